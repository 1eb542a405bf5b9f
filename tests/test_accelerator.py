"""accelerator.py: torch.accelerator's device-agnostic idiom, here and in torch."""
import pytest

import helpers
import jitgrad


def test_the_device_agnostic_idiom_picks_cuda_or_the_cpu():
    acc = jitgrad.accelerator
    device = acc.current_accelerator().type if acc.is_available() else "cpu"
    assert device == ("cuda" if jitgrad.cuda.is_available() else "cpu")
    assert jitgrad.ones(2, device=device).device.type == device
    assert acc.device_count() == jitgrad.cuda.device_count()


@pytest.mark.skipif("jitgrad.cuda.is_available()", reason="the no-accelerator case")
def test_without_an_accelerator_device_calls_fail_as_in_torch():
    assert jitgrad.accelerator.current_accelerator() is None
    assert jitgrad.accelerator.current_accelerator(check_available=True) is None
    for call in (jitgrad.accelerator.current_device_index, jitgrad.accelerator.synchronize,
                 lambda: jitgrad.accelerator.set_device_index(0)):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                               "available.*is_available"):
            call()
    torch = helpers.torch
    if torch is not None and not torch.accelerator.is_available():
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                               "available"):
            torch.accelerator.current_device_index()


@pytest.mark.skipif("not jitgrad.cuda.is_available()", reason="needs a usable CUDA device")
def test_with_cuda_there_is_one_device_index():
    acc = jitgrad.accelerator
    assert acc.current_accelerator() == jitgrad.device("cuda") and acc.current_device_index() == 0
    acc.set_device_index(0)
    acc.synchronize()
    with pytest.raises(ValueError, match="one CUDA device per process"):
        acc.set_device_index(1)
