"""Error messages: torch's wording, and jitgrad's fix hint."""
import re

import pytest

import jitgrad


ERRORS = {
    "matmul": (lambda lib: lib.ones(2, 3) @ lib.ones(4, 5), RuntimeError,
               "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    "broadcast": (lambda lib: lib.ones(2, 3) + lib.ones(4), RuntimeError,
                  "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
                  "dimension 1"),
    "sum dim": (lambda lib: lib.ones(2, 3).sum(5), IndexError,
                "Dimension out of range (expected to be in range of [-2, 1], but got 5)"),
    "transpose dim": (lambda lib: lib.ones(2, 3).transpose(0, -3), IndexError,
                      "Dimension out of range (expected to be in range of [-2, 1], but got -3)"),
    "softmax dim": (lambda lib: lib.ones(2, 3).softmax(2), IndexError, "Dimension out of range"),
    "index": (lambda lib: lib.ones(4, 3)[10], IndexError,
              "index 10 is out of bounds for dimension 0 with size 4"),
    "index dim 1": (lambda lib: lib.ones(4, 3)[:, -4], IndexError,
                    "index -4 is out of bounds for dimension 1 with size 3"),
    "index tensor": (lambda lib: lib.ones(4, 3)[lib.tensor([0, 9])], IndexError,
                     "index 9 is out of bounds for dimension 0 with size 4"),
    "index_select": (lambda lib: lib.ones(4, 3).index_select(0, lib.tensor([0, 9])), IndexError,
                     "index out of range in self"),
    "view": (lambda lib: lib.ones(3).view(2, 2), RuntimeError,
             "shape '[2, 2]' is invalid for input of size 3"),
    "view non-contiguous": (lambda lib: lib.ones(2, 3).t().view(6), RuntimeError,
                            "view size is not compatible with input tensor's size and stride"),
    "cat": (lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)]), RuntimeError,
            "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 "
            "for tensor number 1 in the list"),
    "stack": (lambda lib: lib.stack([lib.ones(2), lib.ones(3)]), RuntimeError,
              "stack expects each tensor to be equal size"),
    "expand": (lambda lib: lib.ones(2, 3).expand(4, 3), RuntimeError,
               "The expanded size of the tensor (4) must match the existing size (2) at "
               "non-singleton dimension 0"),
    "item": (lambda lib: lib.ones(2).item(), RuntimeError,
             "a Tensor with 2 elements cannot be converted to Scalar"),
    "bool": (lambda lib: bool(lib.ones(2)), RuntimeError,
             "Boolean value of Tensor with more than one value is ambiguous"),
    "requires_grad_ on non-leaf": (
        lambda lib: lib.ones(2, requires_grad=True).mul(2).requires_grad_(False), RuntimeError,
        "you can only change requires_grad flags of leaf"),
    "mm": (lambda lib: lib.mm(lib.ones(2, 3), lib.ones(2, 3)), RuntimeError,
           "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"),
    "dot sizes": (lambda lib: lib.dot(lib.ones(2), lib.ones(3)), RuntimeError,
                  "inconsistent tensor size"),
    "gather index": (lambda lib: lib.ones(2, 3).gather(1, lib.tensor([[0], [5]])), RuntimeError,
                     "out of bounds for dimension 1 with size 3"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_error_messages_match_torch(lib, case):
    fn, exc, phrase = ERRORS[case]
    with pytest.raises(exc, match=re.escape(phrase)):
        fn(lib)


# jitgrad's own addition to torch's wording: each error says how to fix it.
FIX_HINTS = {
    "in place on a leaf": (lambda: jitgrad.ones(2, requires_grad=True).add_(1), "no_grad()"),
    "broadcast": (lambda: jitgrad.ones(2, 3) + jitgrad.ones(4), "broadcastable"),
    "int requires grad": (lambda: jitgrad.tensor([1]).requires_grad_(), ".float()"),
    "cuda device index": (lambda: jitgrad.zeros(1, device="cuda:3") if jitgrad.cuda.is_available()
                          else jitgrad.zeros(1, device="cuda"),
                          "cuda:0" if jitgrad.cuda.is_available() else "pip install 'jitgrad[cuda]'"),
    "view of non-contiguous": (lambda: jitgrad.ones(2, 3).t().view(6), ".reshape("),
    "matmul dtypes": (lambda: jitgrad.ones(2, 2) @ jitgrad.ones(2, 2, dtype=jitgrad.float64),
                      ".to("),
}


@pytest.mark.parametrize("case", sorted(FIX_HINTS))
def test_errors_carry_a_fix_hint(case):
    fn, hint = FIX_HINTS[case]
    with pytest.raises((RuntimeError, IndexError, TypeError)) as info:
        fn()
    assert hint in str(info.value)
