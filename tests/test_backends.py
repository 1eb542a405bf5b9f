"""backends.py: torch.backends' checks and switches, as training scripts use them."""
import helpers
import jitgrad


def test_the_device_choice_of_the_older_quickstart_runs():
    device = ("cuda" if jitgrad.cuda.is_available()
              else "mps" if jitgrad.backends.mps.is_available() else "cpu")
    assert device == ("cuda" if jitgrad.cuda.is_available() else "cpu")
    assert jitgrad.backends.mps.is_built() is False


def test_cudnn_switches_keep_what_is_set_and_match_torchs_defaults():
    torch = helpers.torch
    cudnn = jitgrad.backends.cudnn
    if torch is not None:
        for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
            assert getattr(cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
        assert jitgrad.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    assert cudnn.is_available() is False and cudnn.version() is None
    before = cudnn.deterministic
    try:
        cudnn.deterministic, cudnn.benchmark = True, False  # a script's seeding boilerplate
        assert cudnn.deterministic is True
    finally:
        cudnn.deterministic = before
    assert jitgrad.backends.cuda.is_built() == jitgrad.cuda.is_available()
