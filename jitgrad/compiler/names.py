"""What the compiler knows of a recorded instruction from its name alone."""
from ..ops import formulas as E

# Ops without effects beyond their results, whose guarded shapes and dtypes leave them
# nothing to refuse at run time: a call whose results nothing reads need not run (the
# first derivative a Hessian-vector product computes, a transpose only it read). Not
# random ops (a dropout mask advances the generator), indexing (an index may be out of
# range) or anything in place.
PURE = frozenset((
    "matmul", "mm", "bmm", "dot", "sum", "mean", "sum_to_size", "amax", "amin", "_extreme",
    "softmax", "log_softmax", "reshape", "view", "transpose", "t", "permute", "unsqueeze",
    "squeeze", "expand", "expand_as", "broadcast_to", "flatten", "contiguous", "narrow",
    "select", "unbind", "split", "chunk", "stack", "cat", "flip", "clone", "detach",
    "ones_like", "zeros_like", "zeros_as", "float", "double", "to_dtype"))

# Tensor methods recorded as themselves, not as the elementwise call they make:
# the op they run, operands swapped.
SWAPPED = {"__rsub__": E.sub.op, "__rtruediv__": E.div.op, "__rpow__": E.pow.op}
