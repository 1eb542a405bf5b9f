"""jitgrad.func: torch.func's composable function transforms.

`grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`, `jacfwd`, `hessian` and
`vmap` take a function and return a function, and compose with each other
(`vmap(grad(f))` for per-sample gradients, `jacfwd(jacrev(f))`, ...);
`functional_call` runs a module with given parameters. docs/func.md says what
is supported and where jitgrad differs from torch.
"""
from ._functional_call import functional_call, stack_module_state
from ._transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from ._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "stack_module_state", "vjp", "vmap"]
