"""docs/api.md is generated from the docstrings by docs/gen_api.py and must be
current: regenerate it in memory and compare."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_MD = os.path.join(ROOT, "docs", "api.md")


@pytest.fixture(scope="module")
def gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", os.path.join(ROOT, "docs", "gen_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(gen_api):
    return gen_api.render()


def test_api_md_is_up_to_date(rendered):
    with open(API_MD) as f:
        current = f.read()
    assert current == rendered, ("docs/api.md is out of date with the docstrings: run "
                                 "`python docs/gen_api.py` and commit the result")


def test_api_md_has_no_doctests(rendered):
    # the docstrings' examples run with --doctest-modules; api.md must not run them again
    assert ">>>" not in rendered


def test_every_public_name_is_listed(gen_api, rendered):
    for modname, curated in gen_api.MODULES:
        module = gen_api._import(modname)
        if module is None:
            continue
        assert f"## {modname}\n" in rendered
        section = rendered.split(f"## {modname}\n", 1)[1].split("\n## ", 1)[0]
        for name in gen_api.public_names(module, curated):
            assert f"- `{name}" in section or f"- `class {name}" in section, (modname, name)


def test_entries_show_signature_and_first_paragraph(rendered):
    assert "- `grad(outputs, inputs, grad_outputs=None," in rendered
    assert "  Return the gradients of `outputs` w.r.t. `inputs` without touching `.grad`." in rendered
    assert "- `tanh(x)`" in rendered            # formula-table ops show their operands
    assert "- `absolute`: alias of `jitgrad.abs`." in rendered


def test_check_mode_reports_a_stale_file(gen_api, tmp_path, monkeypatch):
    stale = tmp_path / "api.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(gen_api, "OUTPUT", str(stale))
    assert gen_api.main(["--check"]) == 1
    assert gen_api.main([]) == 0
    assert gen_api.main(["--check"]) == 0
