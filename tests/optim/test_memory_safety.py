"""Memory safety of the compiled kernels: what reached a kernel with operands of
the wrong shape (a parameter whose data was replaced, state loaded for another
model, a gradient assigned by hand, a saved tensor swapped by an unpack hook)
crashed the interpreter or updated the wrong elements. Each case runs in its own
interpreter, so a crash fails its test instead of ending the test run; where
torch raises too, jitgrad's message must contain torch's. Then, in process: a
rejected step or load_state_dict leaves everything as it was, and loaded state
is cast as torch casts it."""
import textwrap

import numpy as np
import pytest

import jitgrad
from jitgrad import nn, optim

from helpers import assert_fails_cleanly, dtype_name, require_torch, run_isolated, torch

# What every jitgrad subprocess starts with.
JITGRAD_HEADER = """
import numpy as np
import jitgrad as lib
from jitgrad import nn, optim
from jitgrad.kernels import fuse
from jitgrad.ops.registry import REGISTRY
from jitgrad.optim import _kernels
f32 = np.float32
"""

# Each case: (code, error, pattern, torch_too). `code` is written against `lib`, `nn`
# and `optim`. It runs on jitgrad in a subprocess and must end in `error` with a
# message matching `pattern` (error None: a clean exit). With `torch_too`, torch runs
# the same code in process, raises the same error, and jitgrad's message contains
# torch's.
CASES = {
    # ---- the two reproducers, and smaller mismatches ------------------------------------
    "sgd_momentum_data_grown": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.SGD([p], lr=0.1, momentum=0.9)
        (p * 2).sum().backward(); o.step()
        p.data = lib.ones(1_000_000)
        o.step()
        """, RuntimeError, r"SGD.step\(\): parameter 0 .*compute the gradient again", True),
    "adam_loaded_state_of_one_element": ("""
        p = nn.Parameter(lib.ones(100_000)); o = optim.Adam([p], lr=0.1)
        (p * 2).sum().backward(); o.step()
        sd = o.state_dict(); sd["state"][0]["exp_avg"] = lib.ones(1)
        sd["state"][0]["exp_avg_sq"] = lib.ones(1)
        o.load_state_dict(sd); o.step()
        """, RuntimeError, r"Adam.load_state_dict\(\): parameter 0 .*state 'exp_avg'", True),
    "sgd_data_shrunk": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.SGD([p], lr=0.1)
        (p * 2).sum().backward()
        p.data = lib.ones(5)
        o.step()
        """, RuntimeError, r"has shape \[5\] but its grad has shape \[10\]", True),
    "sgd_data_reshaped_same_numel": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.SGD([p], lr=0.1)
        (p * 2).sum().backward()
        p.data = lib.ones(2, 5)
        o.step()
        """, RuntimeError, r"has shape \[2, 5\] but its grad has shape \[10\]", True),
    "adam_data_grown_by_one": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.Adam([p], lr=0.1)
        (p * 2).sum().backward(); o.step()
        p.data = lib.ones(11)
        o.step()
        """, RuntimeError, r"has shape \[11\] but its grad has shape \[10\]", True),
    "wrong_shaped__grad": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.SGD([p], lr=0.1)
        p._grad = lib.ones(3)
        o.step()
        """, RuntimeError, r"attempting to assign a gradient of size '\[3\]'", True),
    "broadcastable_grad": ("""
        p = nn.Parameter(lib.ones(4, 5)); o = optim.SGD([p], lr=0.1)
        p.grad = lib.ones(5)
        o.step()
        """, RuntimeError, r"attempting to assign a gradient of size '\[5\]'", True),
    "grad_data_replaced": ("""
        p = nn.Parameter(lib.ones(10)); o = optim.Adam([p], lr=0.1)
        (p * 2).sum().backward()
        p.grad.data = lib.ones(5)
        o.step()
        """, RuntimeError, r"has shape \[10\] but its grad has shape \[5\]", True),
    # ---- state of the wrong shape (more below, set by hand) ------------------------------
    "adam_amsgrad_loaded_max_buffer_wrong_shape": ("""
        p = nn.Parameter(lib.ones(1000)); o = optim.Adam([p], lr=0.1, amsgrad=True)
        (p * 2).sum().backward(); o.step()
        sd = o.state_dict(); sd["state"][0]["max_exp_avg_sq"] = lib.ones(5)
        o.load_state_dict(sd); o.step()
        """, RuntimeError, r"load_state_dict\(\): .*state 'max_exp_avg_sq' has shape \[5\]", True),
    # ---- fused backward and elementwise kernels -----------------------------------------
    "fused_backward_unpack_hook_larger": ("""
        x = lib.randn(20_000, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: lib.ones(60_000)):
            y = (x.sin() * x).exp()
        y.sum().backward()
        """, RuntimeError, r"saved_tensors_hooks unpack hook", True),
    "fused_backward_unpack_hook_broadcastable": ("""
        x = lib.randn(20_000, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: lib.ones(1)):
            y = (x.sin() * x).exp()
        y.sum().backward()
        assert tuple(x.grad.shape) == (20_000,)
        """, None, None, True),
    "elementwise_loop_size_mismatch": ("""
        lib.ones(20_000) + lib.ones(30_000)
        """, RuntimeError, r"op 'add'", True),
    "elementwise_inplace_output_too_small": ("""
        x = lib.ones(20_000)
        x.add_(lib.ones(2, 20_000))
        """, RuntimeError, r"^output with shape \[20000\]", True),
    "elementwise_read_only_operand_at_loop_size": ("""
        import numpy as np
        a = np.full(20_000, 0.5, np.float32); a.flags.writeable = False
        y = lib.ones(20_000, requires_grad=True)
        ((y * lib.from_numpy(a)).sin() * 2).sum().backward()
        assert abs(float(y.grad.sum()) - 20_000 * np.cos(0.5)) < 1
        """, None, None, True),
    "elementwise_strided_operands_at_loop_size": ("""
        a, b = lib.randn(40_000), lib.randn(40_000)
        r = (a[::2] + b[::2]).exp()
        expected = lib.exp(lib.tensor(a.numpy()[::2] + b.numpy()[::2]))
        assert float(((r - expected).abs() / expected).max()) < 1e-5
        """, None, None, True),
}

def _state_set_by_hand(n, optimizer, key, value):
    """A step on `lib.ones(n)`, then state `key` replaced by `value`, then a step."""
    return f"""
        p = nn.Parameter(lib.ones({n})); o = optim.{optimizer}
        (p * 2).sum().backward(); o.step()
        o.state[p][{key!r}] = {value}
        o.step()
        """


SGD_MOMENTUM, ADAM, AMSGRAD = ("SGD([p], lr=0.1, momentum=0.9)", "Adam([p], lr=0.1)",
                               "Adam([p], lr=0.1, amsgrad=True)")
for name, n, optimizer, key, value, error, pattern, torch_too in [
        ("sgd_momentum_buffer_wrong_shape", 4, SGD_MOMENTUM, "momentum_buffer", "lib.ones(3)",
         RuntimeError, r"state 'momentum_buffer' has shape \[3\]", True),
        ("sgd_momentum_buffer_integer", 4, SGD_MOMENTUM, "momentum_buffer",
         "lib.ones(4, dtype=lib.int64)", RuntimeError,
         r"^result type float32 can't be cast to the desired output type int64", False),
        ("adam_exp_avg_sq_wrong_shape", 10, ADAM, "exp_avg_sq", "lib.ones(9)", RuntimeError,
         r"state 'exp_avg_sq' has shape \[9\]", True),
        ("adam_amsgrad_max_buffer_of_one_element", 1000, AMSGRAD, "max_exp_avg_sq",
         "lib.ones(1)", RuntimeError, r"state 'max_exp_avg_sq' has shape \[1\]", True),
        ("adam_state_not_a_tensor", 10, ADAM, "exp_avg", "[0.0] * 10", TypeError,
         r"state 'exp_avg' should be a Tensor of the parameter's shape", False),
        ("adam_step_count_of_three_elements", 10, ADAM, "step", "lib.ones(3)", RuntimeError,
         r"state 'step' should be a one-element real Tensor", False)]:
    CASES[name] = (_state_set_by_hand(n, optimizer, key, value), error, pattern, torch_too)


# The guards inside the kernels themselves, called with operands no jitgrad caller
# passes: a kernel of another length must raise, not index past a buffer. A process's
# first steps run numpy stand-ins (kernels/cpu.py), so the loop-kernel cases end two
# steps first to reach the compiled kernel.
PROMOTE = """
def promote_past_the_numpy_stand_in():
    from jitgrad.kernels import cpu
    for _ in range(cpu.PROMOTE_AFTER_STEPS):
        cpu.end_step()
"""
KERNEL_CASES = {
    "loop_kernel_short_operand": ("""
        kernel = REGISTRY["mul"].loop_kernel(np.dtype(f32), ("a", "a"), False)
        promote_past_the_numpy_stand_in()
        kernel(100, np.ones(100, f32), np.ones(10, f32), np.empty(100, f32))
        """, ValueError, r"mul_fwd: every array operand of a flat kernel must have n elements"),
    "loop_kernel_short_output": ("""
        kernel = REGISTRY["mul"].loop_kernel(np.dtype(f32), ("a", "a"), False)
        promote_past_the_numpy_stand_in()
        kernel(100, np.ones(100, f32), np.ones(100, f32), np.empty(10, f32))
        """, ValueError, r"every array operand of a flat kernel must have n elements"),
    "loop_kernel_wrong_dtype": ("""
        kernel = REGISTRY["mul"].loop_kernel(np.dtype(f32), ("a", "a"), False)
        promote_past_the_numpy_stand_in()
        kernel(100, np.ones(100), np.ones(100, f32), np.empty(100, f32))
        """, TypeError, r"No matching definition"),
    "loop_kernel_strided_operand": ("""
        kernel = REGISTRY["mul"].loop_kernel(np.dtype(f32), ("a", "a"), False)
        promote_past_the_numpy_stand_in()
        kernel(100, np.ones(200, f32)[::2], np.ones(100, f32), np.empty(100, f32))
        """, TypeError, r"No matching definition"),
    "fused_kernel_short_operand": ("""
        x = lib.randn(20_000, requires_grad=True)
        y = (x.sin() * x).exp()
        from jitgrad._node import count_dependencies
        from jitgrad.autograd import fusion
        deps = count_dependencies([y.grad_fn])
        group = next(iter(fusion.plan(deps, {y.grad_fn}, set()).values()))
        gin_kinds = ("a",) * sum(group.ext_in)
        params, types, _, outs = fuse.fused_body(group.kernel_spec, gin_kinds, "float32")
        n = 20_000
        args = [n] + [np.ones(n if k else n // 2, f32) if t.endswith("[::1]") else f32(1)
                      for k, t in enumerate(types[1:])]
        fuse.fused_kernel(group.kernel_spec, gin_kinds, False)(*args)
        """, ValueError, r"fused backward kernel: every array operand"),
    "optimizer_kernel_short_state": ("""
        kernel = _kernels.sgd_kernel("float32", True, False, False, False)
        p, g = np.ones(100, f32), np.ones(100, f32)
        kernel(p, g, np.ones(3, f32), -0.1, 0.9, 1.0, False)
        """, ValueError, r"optimizer kernel: every array operand"),
    "optimizer_kernel_short_gradient": ("""
        kernel = _kernels.adam_kernel("float32", True, False, None)
        p, s = np.ones(100, f32), np.ones(100, f32)
        kernel(p, np.ones(99, f32), s, s.copy(), s.copy(), 0.1, 0.999, 0.001, 1.0, 1e-8, -0.1)
        """, ValueError, r"optimizer kernel: every array operand"),
    "optimizer_kernel_strided_parameter": ("""
        kernel = _kernels.sgd_kernel("float32", False, False, False, False)
        kernel(np.ones(200, f32)[::2], np.ones(100, f32), -0.1)
        """, TypeError, r"No matching definition"),
}

# The same on CUDA, under the simulator: a CUDA kernel cannot raise, so its launcher
# checks (kernels/cpu.py check_lengths) and the optimizer checks as on the CPU.
CUDA_CASES = {
    "cuda_sgd_momentum_data_grown": ("""
        p = nn.Parameter(lib.ones(10, device="cuda")); o = optim.SGD([p], lr=0.1, momentum=0.9)
        (p * 2).sum().backward(); o.step()
        p.data = lib.ones(1000, device="cuda")
        o.step()
        """, RuntimeError, r"The size of tensor a \(1000\) must match the size of tensor b \(10\)"),
    "cuda_optimizer_launcher_short_operand": ("""
        kernel = _kernels.sgd_kernel("float32", True, False, False, False, cuda=True)
        p = lib.ones(10, device="cuda")._data
        kernel(p, p, lib.ones(3, device="cuda")._data, -0.1, 0.9, 1.0, False)
        """, ValueError, r"optimizer kernel: operand 2 has 3 elements, n is 10"),
    "cuda_fused_backward_unpack_hook_larger": ("""
        x = lib.randn(64, device="cuda", requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(
                lambda t: t, lambda t: lib.ones(96, device="cuda")):
            y = (x.sin() * x).exp()
        y.sum().backward()
        """, RuntimeError, r"saved_tensors_hooks unpack hook"),
}


def _torch_error(code):
    """The exception torch raises running `code` (None if it runs through)."""
    t = require_torch()
    try:
        exec(textwrap.dedent(code), {"lib": t, "nn": t.nn, "optim": t.optim})
    except Exception as e:  # noqa: BLE001 - any error is the answer
        return e
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_ends_cleanly(name):
    code, error, pattern, torch_too = CASES[name]
    script = JITGRAD_HEADER + textwrap.dedent(code)
    if error is None:
        r = run_isolated(script)
        assert r.returncode == 0, r.stderr[-3000:]
    else:
        message = assert_fails_cleanly(script, error, pattern)
    if torch_too and torch is not None:
        expected = _torch_error(code)
        if error is None:
            assert expected is None, expected
        else:
            assert type(expected) is error and str(expected) in message, (expected, message)


@pytest.mark.parametrize("name", sorted(KERNEL_CASES))
def test_kernel_guard(name):
    code, error, pattern = KERNEL_CASES[name]
    assert_fails_cleanly(JITGRAD_HEADER + PROMOTE + textwrap.dedent(code), error, pattern)


@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_case_ends_cleanly(name):
    code, error, pattern = CUDA_CASES[name]
    assert_fails_cleanly(JITGRAD_HEADER + textwrap.dedent(code), error, pattern,
                         NUMBA_ENABLE_CUDASIM="1")


# ---- in process: a rejected call changes nothing ------------------------------------------

def _plain(v):
    return (str(v._data.dtype), v._data.tolist()) if isinstance(v, jitgrad.Tensor) else v


def _snapshot(o, params):
    """Everything a step or a load could change, as plain values to compare with ==."""
    return {"params": [_plain(p) for p in params], "grads": [_plain(p.grad) for p in params],
            "versions": [p._version for p in params],
            "state": [{k: _plain(v) for k, v in o.state.get(p, {}).items()} for p in params],
            "groups": [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]}


OPTIMIZERS = {"SGD-momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
              "Adam-amsgrad": lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True),
              "RMSprop-centered": lambda ps: optim.RMSprop(ps, momentum=0.9, centered=True),
              "Adagrad": lambda ps: optim.Adagrad(ps),
              "Adamax": lambda ps: optim.Adamax(ps),
              "NAdam": lambda ps: optim.NAdam(ps, weight_decay=0.1),
              "Adadelta": lambda ps: optim.Adadelta(ps),
              "RAdam": lambda ps: optim.RAdam(ps),
              "Rprop": lambda ps: optim.Rprop(ps),
              "ASGD": lambda ps: optim.ASGD(ps)}
BUFFER = {"SGD-momentum": "momentum_buffer", "Adam-amsgrad": "max_exp_avg_sq",
          "RMSprop-centered": "grad_avg", "Adagrad": "sum", "Adamax": "exp_inf",
          "NAdam": "exp_avg_sq", "Adadelta": "acc_delta", "RAdam": "exp_avg_sq",
          "Rprop": "step_size", "ASGD": "ax"}


def _trained(name):
    """Two parameters, one step taken, gradients of a second backward in place."""
    ps = [nn.Parameter(jitgrad.linspace(-1, 1, 6)), nn.Parameter(jitgrad.ones(2, 3))]
    o = OPTIMIZERS[name](ps)
    for first in (True, False):
        o.zero_grad()
        (ps[0] * ps[0] + ps[1].sin().reshape(-1)).sum().backward()
        if first:
            o.step()
    return ps, o


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("spoil", ["data", "buffer_shape", "buffer_dtype"])
def test_rejected_step_changes_nothing(name, spoil):
    ps, o = _trained(name)
    if spoil == "data":  # the second parameter only: the first must not move either
        ps[1].data = jitgrad.ones(3, 2)
    elif spoil == "buffer_shape":
        o.state[ps[1]][BUFFER[name]] = jitgrad.zeros(6)
    else:
        o.state[ps[1]][BUFFER[name]] = jitgrad.zeros(2, 3, dtype=jitgrad.int32)
    before = _snapshot(o, ps)
    with pytest.raises(RuntimeError, match=r"parameter 1 \(param group 0\)"):
        o.step()
    assert _snapshot(o, ps) == before


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_rejected_load_state_dict_changes_nothing(name):
    ps, o = _trained(name)
    sd = o.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    sd["state"][1] = dict(sd["state"][1], **{BUFFER[name]: jitgrad.zeros(3, 2)})
    before = _snapshot(o, ps)
    state_objects = {id(p): dict(o.state[p]) for p in ps}
    with pytest.raises(RuntimeError, match=rf"load_state_dict\(\): parameter 1 .*{BUFFER[name]}"
                                           r".* has shape \[3, 2\]"):
        o.load_state_dict(sd)
    assert _snapshot(o, ps) == before
    for p in ps:  # the very same state tensors, too
        assert all(o.state[p][k] is v for k, v in state_objects[id(p)].items())
    o.step()  # and it still works


def test_step_after_fixing_the_cause():
    ps, o = _trained("Adam-amsgrad")
    ps[1].data = jitgrad.ones(3, 2)
    with pytest.raises(RuntimeError):
        o.step()
    del o.state[ps[1]]
    o.zero_grad()
    (ps[0] * ps[0] + ps[1].sin().reshape(-1)).sum().backward()
    o.step()
    assert tuple(o.state[ps[1]]["exp_avg"].shape) == (3, 2)


# ---- load_state_dict casts state as torch does ----------------------------------------------

def test_load_state_dict_casts_floating_params_state_as_torch(lib):
    p = lib.nn.Parameter(lib.linspace(-1, 1, 4))
    o = lib.optim.Adam([p], lr=0.1, amsgrad=True)
    (p * p).sum().backward()
    o.step()
    sd = o.state_dict()
    sd["state"][0]["exp_avg"] = lib.ones(4, dtype=lib.float64)
    sd["state"][0]["exp_avg_sq"] = lib.ones(4, dtype=lib.int64)
    sd["state"][0]["max_exp_avg_sq"] = lib.ones(4, dtype=lib.bool)
    sd["state"][0]["step"] = lib.tensor(3, dtype=lib.int64)  # the step count is not cast
    o.load_state_dict(sd)
    dtypes = {k: dtype_name(v) for k, v in o.state[p].items()}
    assert dtypes == {"step": "int64", "exp_avg": "float32", "exp_avg_sq": "float32",
                      "max_exp_avg_sq": "float32"}
    o.step()
    assert float(o.state[p]["step"]) == 4


def test_load_state_dict_number_of_steps_as_torch():
    t = require_torch()
    results = []
    for lib in (jitgrad, t):
        p = lib.nn.Parameter(lib.linspace(-1, 1, 5, dtype=lib.float64))
        o = lib.optim.Adam([p], lr=0.1)
        (p * p).sum().backward()
        o.step()
        sd = o.state_dict()
        sd["state"][0]["step"] = 7  # as old torch checkpoints hold it
        o.load_state_dict(sd)
        assert isinstance(o.state[p]["step"], lib.Tensor)
        o.step()
        results.append(p.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_load_state_dict_refuses_complex_state_for_a_real_parameter():
    # torch casts it, dropping the imaginary part with a warning; jitgrad refuses
    p = nn.Parameter(jitgrad.ones(4))
    o = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = jitgrad.ones(4)
    o.step()
    sd = o.state_dict()
    sd["state"][0]["momentum_buffer"] = jitgrad.ones(4, dtype=jitgrad.complex64)
    with pytest.raises(RuntimeError, match="state 'momentum_buffer' has dtype"):
        o.load_state_dict(sd)
