"""Generate docs/torch-coverage.md: which of torch's public names jitgrad has.

    python docs/gen_torch_coverage.py           # rewrite docs/torch-coverage.md
    python docs/gen_torch_coverage.py --check   # exit 1 if it is out of date

For each torch namespace in MODULES, every public name of the installed torch
(its `__all__` and the non-underscore classes and functions that torch defines
in that namespace, since torch's `__all__` lacks `set_default_dtype`; without an
`__all__`, also those it takes from private torch modules; for `torch.Tensor`
its non-underscore attributes; submodules are left out) is

- supported: the matching jitgrad object has an attribute of that name (a
  jitgrad module that does not exist yet supports nothing);
- out of scope: it matches a rule of OUT_OF_SCOPE, which gives the reason;
- not yet: everything else, listed most used first.

"Most used" is FREQUENT below: for each namespace, the names that show up most
in everyday training code, most frequent first. It is a hand-kept list, written
from our own judgement of common tutorial and example code (the PyTorch
tutorials on autograd, nn and optim, pytorch/examples, and widely read tutorial
repositories), not a measured count; names it lacks follow alphabetically.

Importing this module generates nothing; `render()` returns the text, or None
when torch is not installed.
"""
import argparse
import importlib
import importlib.util
import os
import re
import sys
import textwrap
import types

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "torch-coverage.md")

# (torch namespace, the jitgrad object that should have the same names)
MODULES = [
    ("torch", "jitgrad"),
    ("torch.Tensor", "jitgrad.Tensor"),
    ("torch.nn", "jitgrad.nn"),
    ("torch.nn.functional", "jitgrad.nn.functional"),
    ("torch.nn.init", "jitgrad.nn.init"),
    ("torch.optim", "jitgrad.optim"),
    ("torch.optim.lr_scheduler", "jitgrad.optim.lr_scheduler"),
    ("torch.autograd", "jitgrad.autograd"),
    ("torch.func", "jitgrad.func"),
    ("torch.utils.data", "jitgrad.utils.data"),
]

# (reason, pattern): a name of any namespace that fully matches the pattern is out
# of scope for that reason (the first rule that matches gives it).
OUT_OF_SCOPE = [
    ("quantization",
     r".*quanti[sz].*|q_.*|q?u?int\d+x\d+|qu?int\d+|qscheme|int_repr|.*_per_(channel|tensor).*|"
     r"choose_qparams.*|fused_moving_avg_obs_fake_quant|fake_quant.*"),
    ("sparse tensors",
     r"(?!sparse_$).*sparse.*|.*_coo.*|.*csr.*|.*csc.*|.*bsr.*|.*bsc.*|to_dense|dense_dim|_nnz|coalesce|"
     r"is_coalesced|(indices|values|(c?col|crow|row)_indices)(_copy)?|hspmm|smm|sspaddmm|saddmm|spmm"),
    ("TorchScript, fx and export (jitgrad.compile is jitgrad's own capture)",
     r"(Any|Await|Bool|Class|Complex|DeviceObj|Dict|Enum|Float|Future|Int|Interface|List|None|"
     r"Number|Optional|PyObject|RRef|StreamObj|String|Sym\w*|Tensor|Tuple|Union)Type|Type|"
     r"AliasDb|Argument|ArgumentSpec|Block|CallStack|Capsule|Code|CompilationUnit|"
     r"CompleteArgumentSpec|ConcreteModuleType(Builder)?|DeepCopyMemoTable|ErrorReport|"
     r"ExecutionPlan|FileCheck|FunctionSchema|Gradient|Graph|GraphExecutorState|IODescriptor|"
     r"InferredType|JITException|LiteScriptModule|LockingLogger|NoopLogger|Node|OperatorInfo|"
     r"Script\w*|StaticModule|TracingState|Use|Value|Tag|AggregationType|AVG|SUM|"
     r"BenchmarkConfig|BenchmarkExecutionStats|ThroughputBenchmark|PyTorchFile(Reader|Writer)|"
     r"(De)?[sS]erializationStorageContext|Future|cond|while_loop|functionalize|linearize|"
     r"export|jit|fx|compiled_with_cxx11_abi|is_in_onnx_export|sym_\w+|Sym\w+|"
     r"set_autocast_\w+|get_autocast_\w+|is_autocast_\w+|clear_autocast_cache|"
     r"(un)?register_\w*_(op|kernel|fake)\w*"),
    ("devices other than the CPU and CUDA, and vendor libraries",
     r"(\w+_)?(mps|xpu|hpu|mtia|maia|ipu|ve|xla|vulkan|meta)(_\w+)?|.*mkldnn.*|.*cudnn.*|"
     r".*miopen.*|.*nnpack.*|.*fbgemm.*|.*onednn.*|has_(mkl|lapack|openmp|spectral)|"
     r"get_device_module|Stream|Event|AcceleratorError|OutOfMemoryError"),
    ("complex autograd (conjugate and negative views)",
     r"conj|conj_physical_?|resolve_conj|resolve_neg|is_conj|is_neg|view_as_real|"
     r"view_as_complex|polar|chalf|complex32"),
    ("storage, layout and dispatch internals",
     r".*[Ss]torage.*|data_ptr|storage_offset|set_|share_memory_|is_shared|pin_memory|"
     r"is_pinned|record_stream|memory_format|contiguous_format|channels_last(_3d)?|"
     r"preserve_format|layout|strided|DispatchKey\w*|ExcludeDispatchKeyGuard|"
     r"DisableTorchFunction\w*|as_subclass|has_torch_function\w*|handle_torch_function|"
     r"is_nonzero|smm|module_load|is_set_to|nbytes|itemsize_?|dispatch_\w+"),
    ("named tensors", r"rename_?|refine_names|align_to|align_as|names|has_names"),
    ("nested tensors", r"nested\w*|to_padded_tensor"),
    ("sub-byte and 8-bit floating-point dtypes",
     r"bits\w*|bit|float8\w*|float4\w*|u?int[1-7]"),
    ("DataPipes (deprecated in torch)",
     r"\w*DataPipe|DataChunk|functional_datapipe|guaranteed_datapipes_determinism|"
     r"non_deterministic|argument_validation|runtime_validation\w*"),
]
_OUT_OF_SCOPE = [(reason, re.compile(pattern)) for reason, pattern in OUT_OF_SCOPE]

# namespace -> its most used names, most used first (see the module docstring)
FREQUENT = {
    "torch": """
        tensor zeros ones randn arange cat stack no_grad manual_seed device save load float32
        long from_numpy rand randint linspace exp sum mean max argmax sqrt log matmul mm bmm
        softmax sigmoid tanh relu clamp where zeros_like ones_like randn_like full eye allclose
        equal isclose all any abs pow sin cos norm einsum topk sort argsort gather scatter
        flatten reshape squeeze unsqueeze transpose permute split chunk cumsum tril triu diag
        multinomial randperm bernoulli normal set_default_dtype get_default_dtype
        set_default_device is_tensor numel FloatTensor LongTensor as_tensor empty masked_fill
        logsumexp log_softmax nonzero unique bincount meshgrid outer dot inverse det sign floor
        ceil round isnan isinf isfinite nan_to_num lerp maximum minimum amax amin var std prod
        cumprod flip roll repeat_interleave tile broadcast_to cdist logical_and logical_or
        logical_not bucketize searchsorted set_printoptions compile Generator get_rng_state
        set_rng_state seed inference_mode enable_grad set_grad_enabled autocast float16
        bfloat16 uint8 int8 Size dtype Tensor""",
    "torch.Tensor": """
        backward item view to size shape numpy detach cpu cuda float long zero_ grad
        requires_grad_ sum mean max argmax reshape unsqueeze squeeze permute transpose
        contiguous clone data t matmul exp log eq ne type tolist dim numel expand expand_as
        repeat masked_fill fill_ copy_ add_ mul_ normal_ uniform_ clamp clamp_ pow sqrt abs
        sort topk gather scatter_ index_select new_zeros new_ones new_full new_tensor
        new_empty bool int half double all any equal allclose cumsum flip chunk split norm std
        var softmax log_softmax sigmoid tanh relu argsort nonzero unique bernoulli_ random_
        exponential_ is_cuda device dtype ndim T mT is_contiguous register_hook retain_grad
        grad_fn is_leaf apply_ masked_select index_add_ index_fill_ masked_scatter_ lt gt le ge
        floor round ceil isnan sign min amax prod roll tril triu diag diagonal trace bmm mm
        outer view_as reshape_as unfold narrow select unbind stride element_size nelement
        fill_diagonal_""",
    "torch.nn": """
        Module Linear Sequential ReLU Conv2d MSELoss CrossEntropyLoss Dropout BatchNorm2d
        MaxPool2d Flatten Parameter ModuleList Embedding LayerNorm Tanh Sigmoid Softmax
        LogSoftmax NLLLoss BCELoss BCEWithLogitsLoss LeakyReLU GELU Conv1d BatchNorm1d
        AdaptiveAvgPool2d AvgPool2d LSTM GRU RNN ModuleDict Identity ParameterList L1Loss
        SmoothL1Loss HuberLoss KLDivLoss SiLU ELU Unflatten Transformer TransformerEncoder
        TransformerEncoderLayer MultiheadAttention ConvTranspose2d Upsample DataParallel
        GroupNorm Softplus Dropout2d ParameterDict Conv3d MaxPool1d AdaptiveMaxPool2d PReLU
        Hardtanh ReLU6 Mish Softsign CosineSimilarity PairwiseDistance TripletMarginLoss
        MarginRankingLoss CTCLoss PixelShuffle ZeroPad2d ConstantPad2d ReflectionPad2d
        Bilinear InstanceNorm2d""",
    "torch.nn.functional": """
        relu softmax cross_entropy log_softmax mse_loss dropout sigmoid tanh linear nll_loss
        binary_cross_entropy binary_cross_entropy_with_logits gelu leaky_relu conv2d
        max_pool2d avg_pool2d adaptive_avg_pool2d one_hot pad interpolate normalize layer_norm
        batch_norm embedding l1_loss smooth_l1_loss huber_loss kl_div softplus silu elu
        cosine_similarity conv1d unfold fold grid_sample affine_grid pairwise_distance
        logsigmoid softmin hardtanh relu6 mish glu scaled_dot_product_attention group_norm
        instance_norm embedding_bag margin_ranking_loss triplet_margin_loss ctc_loss
        gumbel_softmax pixel_shuffle""",
    "torch.nn.init": """
        xavier_uniform_ kaiming_normal_ normal_ zeros_ constant_ xavier_normal_
        kaiming_uniform_ uniform_ ones_ orthogonal_ trunc_normal_ calculate_gain eye_ dirac_""",
    "torch.optim": """
        SGD Adam AdamW Optimizer RMSprop Adagrad Adamax NAdam RAdam Adadelta LBFGS ASGD
        Rprop""",
    "torch.optim.lr_scheduler": """
        StepLR CosineAnnealingLR ReduceLROnPlateau ExponentialLR MultiStepLR LambdaLR
        OneCycleLR LinearLR CosineAnnealingWarmRestarts CyclicLR LRScheduler SequentialLR
        ConstantLR PolynomialLR ChainedScheduler MultiplicativeLR""",
    "torch.autograd": """
        grad backward Function Variable gradcheck gradgradcheck functional forward_ad graph
        detect_anomaly set_detect_anomaly profiler no_grad enable_grad""",
    "torch.func": """
        functional_call grad vmap jacrev jacfwd hessian vjp jvp grad_and_value
        stack_module_state""",
    "torch.utils.data": """
        DataLoader Dataset TensorDataset random_split Subset Sampler RandomSampler
        SequentialSampler BatchSampler default_collate IterableDataset ConcatDataset
        WeightedRandomSampler SubsetRandomSampler get_worker_info DistributedSampler
        StackDataset ChainDataset""",
}
_RANK = {module: {name: i for i, name in enumerate(text.split())}
         for module, text in FREQUENT.items()}

# What holds for the supported names in a way a torch user would not guess.
NOTES = """\
## Notes on supported names

- `Tensor.type()` names jitgrad's types after jitgrad, as its reprs do:
  `'jitgrad.FloatTensor'` where torch says `'torch.FloatTensor'`; `x.type(...)`
  takes a dtype, a legacy type (`jitgrad.LongTensor`) or a type name in
  either spelling (`'torch.cuda.FloatTensor'`).
- `FloatTensor(tensor)` & co return a view of the tensor (torch: an alias);
  torch's other legacy types (`ByteTensor`, `CharTensor`, `ShortTensor`) need
  dtypes jitgrad does not have yet.
- `set_default_device` checks the device when it is called (torch: at the first
  factory call); `with device(...)` as a context manager is not supported.
- `out=` is taken by the top-level functions that take it in torch (the list is
  `jitgrad.ops.out.TAKES_OUT`): the op computes its result, which is then copied
  into `out`, with torch's casting rule, resize warning and refusal when an
  argument requires grad.
- `axis=` and `keepdims=` are taken wherever `dim=` and `keepdim=` are (functions
  and methods), as torch's argument parser takes them.
- `nn.DataParallel` runs the module on this process's one device (the GPU, or
  the CPU), as torch's does with one device; `device_ids` naming more than one
  GPU is refused with a pointer to `DistributedDataParallel`.
- `backends.cudnn`, `backends.cuda.matmul` and `backends.mps` answer that jitgrad
  uses none of those libraries; their switches (`cudnn.benchmark`,
  `cudnn.deterministic`, `matmul.allow_tf32`) keep what a script sets and change
  nothing.
- `accelerator.current_accelerator()` is `device('cuda')` where CUDA is usable
  and `None` otherwise (torch names its build's accelerator even with no device
  present); only device index 0 exists.
- `sort`, `argsort` and `topk` are always stable (equal values keep their
  index order): `stable=` is accepted and changes nothing. torch's `topk`
  orders ties its own way, so among equal values it may return other indices.
- `scatter(dim, index, src)` with a `src` larger than `index`: the part of
  `src` that is not scattered gets a zero gradient (torch fails in backward
  with "invalid gradient at index 1").
- `einsum` contracts its operands pairwise, left to right, with batched
  matmuls (torch may reorder them); sums at the float limits can overflow in
  one order and not the other.
- `diagonal` and `unfold` return copies (torch: views), so writing into their
  result does not change the input; `fill_diagonal_` writes in place.
- Random numbers come from numpy's PCG64 generator: a seed gives other numbers
  than torch's, and `get_rng_state()` is an int64 tensor of that generator's
  state (torch: a uint8 tensor of its own), for `set_rng_state` only.
- `unique`, `bernoulli` and `multinomial` results never require grad (torch
  marks some as requiring grad, then fails in backward).
- On CUDA, the ops above that have no CUDA kernel yet (sorting, `roll`,
  `repeat`/`tile`, ...) run on the host, one copy each way, with
  `jitgrad.cuda`'s warning (see docs/cuda.md).
"""

_PROMPT = ">" * 3  # spelled so that this file holds no doctest prompt


def _import(name):
    """The object named by a dotted path (a module, or a class in one), or None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


def public_names(obj, namespace):
    """The public names of a torch namespace (see the module docstring)."""
    names = [n for n in dir(obj) if not n.startswith("_")]
    if not isinstance(obj, type):
        listed = getattr(obj, "__all__", None)
        names = [n for n in names if _defined_for(getattr(obj, n), namespace, listed is None)]
        names += listed or []
    return sorted({n for n in names if not isinstance(getattr(obj, n, None), types.ModuleType)})


def _defined_for(obj, namespace, or_private):
    """A class or function that torch defines in `namespace` (or in one of its
    submodules), or, if `or_private`, in a private torch module: torch.nn.functional
    has no `__all__`, and its `conv2d` comes from torch._C while its `Tensor` is an
    import."""
    module = getattr(obj, "__module__", None)
    if not callable(obj) or not isinstance(module, str) or module.split(".")[0] != "torch":
        return False
    if module == namespace or module.startswith(namespace + "."):
        return True
    return or_private and any(part.startswith("_") for part in module.split("."))


def out_of_scope_reason(name):
    for reason, pattern in _OUT_OF_SCOPE:
        if pattern.fullmatch(name):
            return reason
    return None


def _has(ours, name):
    """jitgrad has `name` (a submodule of that name is not torch's function)."""
    return hasattr(ours, name) and not isinstance(getattr(ours, name), types.ModuleType)


def classify(torch_name, jitgrad_name):
    """{"supported": [...], "not yet": [...] (most used first), "out of scope":
    {reason: [...]}} for one namespace."""
    theirs = _import(torch_name)
    ours = _import(jitgrad_name)
    supported, missing, excluded = [], [], {}
    for name in public_names(theirs, torch_name):
        if _has(ours, name):
            supported.append(name)
            continue
        reason = out_of_scope_reason(name)
        if reason is None:
            missing.append(name)
        else:
            excluded.setdefault(reason, []).append(name)
    rank = _RANK.get(torch_name, {})
    missing.sort(key=lambda n: (rank.get(n, len(rank)), n.lower(), n))
    return {"supported": supported, "not yet": missing, "out of scope": excluded}


def _names(names):
    return textwrap.fill(", ".join(f"`{n}`" for n in names), 96, break_on_hyphens=False,
                         break_long_words=False)


def render():
    """The text of docs/torch-coverage.md, or None without torch."""
    torch = _import("torch")
    if torch is None:
        return None
    tables = [(torch_name, jitgrad_name, classify(torch_name, jitgrad_name))
              for torch_name, jitgrad_name in MODULES]
    out = ["# Coverage of torch's API", "",
           f"Generated by `docs/gen_torch_coverage.py` from torch {torch.__version__} and this "
           "checkout; do not edit (run `python docs/gen_torch_coverage.py`). A name is "
           "*supported* when the matching jitgrad object has it, *out of scope* for the reason "
           "given, and otherwise *not yet*, listed most used first (by the script's hand-kept "
           "list of names common in training code).", "",
           "| torch namespace | jitgrad | names | supported | not yet | out of scope |",
           "|---|---|---:|---:|---:|---:|"]
    for torch_name, jitgrad_name, c in tables:
        n_out = sum(len(v) for v in c["out of scope"].values())
        total = len(c["supported"]) + len(c["not yet"]) + n_out
        out.append(f"| `{torch_name}` | `{jitgrad_name}` | {total} | {len(c['supported'])} | "
                   f"{len(c['not yet'])} | {n_out} |")
    out.append("")
    out.append(NOTES)
    for torch_name, jitgrad_name, c in tables:
        out += [f"## {torch_name}", ""]
        if _import(jitgrad_name) is None:
            out += [f"`{jitgrad_name}` does not exist yet.", ""]
        out += [f"Not yet ({len(c['not yet'])}), most used first:", "", _names(c["not yet"]) or "none",
                "", f"Supported ({len(c['supported'])}):", "", _names(c["supported"]) or "none", ""]
        if c["out of scope"]:
            out += ["Out of scope:", ""]
            for reason, names in c["out of scope"].items():
                out.append(textwrap.fill(f"- {reason}: " + ", ".join(f"`{n}`" for n in names), 96,
                                         subsequent_indent="  ", break_on_hyphens=False,
                                         break_long_words=False))
            out.append("")
    text = "\n".join(out).rstrip("\n") + "\n"
    assert _PROMPT not in text, "torch-coverage.md must not contain doctest prompts"
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generate docs/torch-coverage.md.")
    ap.add_argument("--check", action="store_true",
                    help="only check that docs/torch-coverage.md is current")
    args = ap.parse_args(argv)
    text = render()
    if text is None:
        print("torch is not installed: the coverage table is made from an installed torch",
              file=sys.stderr)
        return 2
    return _gen_api().write_or_check(text, OUTPUT, "docs/gen_torch_coverage.py", args.check)


def _gen_api():
    """docs/gen_api.py, the sibling generator whose writer this one shares (loaded by
    path: docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_api", os.path.join(HERE, "gen_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))  # the checkout's jitgrad, without installing it
    sys.exit(main())
