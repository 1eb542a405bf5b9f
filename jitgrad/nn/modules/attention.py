"""`MultiheadAttention`, as torch.nn's: packed or separate input projections, the
(L, N, E) layout (or batch_first), bool or float attention and key-padding masks, and the
attention weights averaged over heads or per head."""
import math

from ...ops import formulas as E
from ...ops import linalg, reduce, views
from ...ops.creation import empty, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for the output projection (it only marks it for quantization tools)."""


def _additive(mask, dtype):
    """A mask as scores to add: a bool mask's True (masked out) becomes -inf."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    return E.where(mask, -math.inf, zeros(tuple(mask.shape), dtype=dtype, device=mask.device))


class MultiheadAttention(Module):
    """Attention of `num_heads` heads over embed_dim-wide queries, keys and values.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = jitgrad.randn(3, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    (jitgrad.Size([3, 5, 8]), jitgrad.Size([3, 5, 5]))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention(add_bias_kv=True or add_zero_attn=True) "
                                      "is not supported yet; append the extra key/value "
                                      "positions to key and value yourself")
        where = dict(device=device, dtype=dtype)
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **where))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **where))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **where))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **where))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **where))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **where)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        for b in (self.in_proj_bias, self.out_proj.bias):
            if b is not None:
                init.constant_(b, 0.0)

    def _projections(self, query, key, value):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None,) * 3 if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(attention output, attention weights or None), as torch: inputs (L, N, E),
        (N, L, E) with batch_first, or unbatched (L, E); masks True (or -inf) where a
        query may not attend."""
        batched = query.ndim == 3
        if not batched:
            query, key, value = (views.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = views.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (views.transpose(t, 0, 1) for t in (query, key, value))
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        tgt_len, bsz, e = query.shape
        src_len = key.shape[0]
        h, d = self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)

        def heads(t, length):  # (length, N, E) -> (N * heads, length, head_dim)
            return views.transpose(views.reshape(t, (length, bsz * h, d)), 0, 1)
        q, k, v = heads(q, tgt_len), heads(k, src_len), heads(v, src_len)
        mask = _additive(attn_mask, q.dtype)
        if mask is not None and mask.ndim == 2:
            mask = views.unsqueeze(mask, 0)
        padding = _additive(key_padding_mask, q.dtype)
        if padding is not None:
            padding = views.reshape(views.expand(views.reshape(padding, (bsz, 1, 1, src_len)),
                                                 (bsz, h, 1, src_len)), (bsz * h, 1, src_len))
            mask = padding if mask is None else mask + padding
        scores = linalg.matmul(q * math.sqrt(1.0 / d), views.transpose(k, -2, -1))
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout)
        out = views.reshape(views.transpose(linalg.matmul(weights, v), 0, 1), (tgt_len * bsz, e))
        out = views.reshape(self.out_proj(out), (tgt_len, bsz, e))
        if not need_weights:
            weights = None
        else:
            weights = views.reshape(weights, (bsz, h, tgt_len, src_len))
            if average_attn_weights:
                weights = reduce.mean(weights, 1)
            if not batched:
                weights = views.squeeze(weights, 0)
        if not batched:
            out = views.squeeze(out, 1)
        elif self.batch_first:
            out = views.transpose(out, 0, 1)
        return out, weights
