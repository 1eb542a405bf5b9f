"""Grad modes as decorators of generators and coroutines, and inference tensors:
each body runs on jitgrad and on torch (the `lib` fixture) and must agree."""
import asyncio

import pytest

import jitgrad

MODES = {  # name -> (mode factory, the flag it sets, its value inside)
    "no_grad": (lambda lib: lib.no_grad(), "is_grad_enabled", False),
    "enable_grad": (lambda lib: lib.enable_grad(), "is_grad_enabled", True),
    "set_grad_enabled": (lambda lib: lib.set_grad_enabled(False), "is_grad_enabled", False),
    "inference_mode": (lambda lib: lib.inference_mode(), "is_inference_mode_enabled", True),
}


def outer_context(lib, flag, inside):
    """A context where the flag has the value opposite to `inside`."""
    if flag == "is_grad_enabled":
        return lib.set_grad_enabled(not inside)
    return lib.inference_mode(not inside)


@pytest.mark.parametrize("name", MODES)
def test_generator_keeps_mode_across_yield(lib, name):
    make, flag, inside = MODES[name]
    read = getattr(lib, flag)

    with outer_context(lib, flag, inside):
        @make(lib)
        def gen():
            received = yield read()
            yield received, read()
        it = gen()
        assert next(it) is inside
        assert read() is not inside          # the mode does not leak to the caller
        assert it.send("x") == ("x", inside)
        assert read() is not inside
        it.close()
        assert read() is not inside


@pytest.mark.parametrize("name", MODES)
def test_generator_close_and_exceptions_run_in_mode(lib, name):
    make, flag, inside = MODES[name]
    read = getattr(lib, flag)
    seen = []

    @make(lib)
    def gen():
        try:
            yield 1
        except ValueError:
            seen.append(("thrown", read()))
            yield 2
        finally:
            seen.append(("finally", read()))

    with outer_context(lib, flag, inside):
        it = gen()
        next(it)
        assert it.throw(ValueError()) == 2
        it.close()
        assert read() is not inside

        @make(lib)
        def failing():
            yield
            raise KeyError("boom")
        it = failing()
        next(it)
        with pytest.raises(KeyError):
            next(it)
        assert read() is not inside
    assert seen == [("thrown", inside), ("finally", inside)]


def test_generator_return_value(lib):
    @lib.no_grad()
    def gen():
        yield 1
        return "done"

    def outer():
        return (yield from gen())
    it = outer()
    next(it)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == "done"


def test_set_grad_enabled_decorator_does_not_leak(lib):
    with lib.enable_grad():
        @lib.set_grad_enabled(False)
        def f():
            return lib.is_grad_enabled()
        assert lib.is_grad_enabled()
        assert f() is False
        assert lib.is_grad_enabled()


# torch 2.13 wraps a coroutine function like a plain function: the mode covers
# only the creation of the coroutine object, so its body runs in the caller's
# mode. jitgrad runs each step of the body in the mode, as for generators
# (docs/forward-ad-and-functional.md, "Grad modes").
@pytest.mark.parametrize("name", MODES)
def test_coroutine_keeps_mode_across_await(name):
    make, flag, inside = MODES[name]
    read = getattr(jitgrad, flag)

    @make(jitgrad)
    async def body():
        before = read()
        await asyncio.sleep(0)
        return before, read()

    async def other():
        return read()

    async def main():
        return await asyncio.gather(body(), other())

    with outer_context(jitgrad, flag, inside):
        assert asyncio.run(main()) == [(inside, inside), not inside]
        assert read() is not inside

        @make(jitgrad)
        async def failing():
            await asyncio.sleep(0)
            raise KeyError("boom")
        with pytest.raises(KeyError):
            asyncio.run(failing())
        assert read() is not inside

        coro = body()
        coro.send(None)
        assert read() is not inside
        coro.close()
        assert read() is not inside


def test_coroutine_body_runs_in_callers_mode_in_torch():
    torch = pytest.importorskip("torch")

    @torch.no_grad()
    async def body():
        return torch.is_grad_enabled()
    with torch.enable_grad():
        assert asyncio.run(body()) is True


# ---- inference tensors -------------------------------------------------------------------------

def test_inference_tensor_cannot_be_saved(lib):
    with lib.inference_mode():
        x = lib.ones(3)
    assert x.is_inference()
    w = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        x * w
    (x + w).sum().backward()  # add saves nothing: allowed
    assert w.grad.tolist() == [1.0, 1.0, 1.0]
    assert not x.clone().is_inference()


def test_inference_tensor_requires_grad_outside_raises(lib):
    with lib.inference_mode():
        x = lib.ones(3)
        x.requires_grad_()  # inside inference mode: allowed
    with lib.inference_mode():
        y = lib.ones(3)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor outside"):
        y.requires_grad_()
    assert not y.requires_grad


def test_inplace_in_inference_mode_bumps_version(lib):
    w = lib.ones(3, requires_grad=True)
    a = lib.ones(3) * 2
    y = (a * w).sum()
    with lib.inference_mode():
        a.add_(1)
    assert a._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_view_made_in_inference_mode_modified_outside_raises(lib):
    a = lib.ones(3, requires_grad=True) * 1
    with lib.inference_mode():
        v = a[:2]
    assert not v.is_inference()
    with pytest.raises(RuntimeError, match="A view was created in inference mode and is being "
                                           "modified inplace in normal mode"):
        v.add_(1)
    assert a.tolist() == [1.0, 1.0, 1.0]
    with lib.no_grad():
        v.add_(1)  # not recorded: allowed
    assert a.tolist() == [2.0, 2.0, 1.0]

    b = lib.ones(3)
    with lib.inference_mode():
        u = b[1:].view(2)
    with pytest.raises(RuntimeError, match="A view was created in inference mode"):
        u.mul_(lib.ones(2, requires_grad=True))
    u.add_(1)  # nothing to record: allowed
    assert b.tolist() == [1.0, 2.0, 2.0]


@pytest.mark.parametrize("outer", ["inference_mode", "no_grad"])
def test_inference_mode_false_records(lib, outer):
    w = lib.ones(3, requires_grad=True)
    with getattr(lib, outer)():
        with lib.inference_mode(False):
            assert lib.is_grad_enabled() and not lib.is_inference_mode_enabled()
            y = w * 2
    assert y.requires_grad and not y.is_inference()
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
