"""asv_bench's asv configurations: strict JSON, pointing at this repository and at
a benchmark directory that exists, with asv's output directories git-ignored,
and a history configuration that can build any commit in a virtualenv."""
import glob
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "asv_bench")
CONFIGS = sorted(glob.glob(os.path.join(BENCH, "asv.conf*.json")))
OUTPUT_DIRS = ("env_dir", "results_dir", "html_dir")


def _load(path):
    with open(path) as f:
        return json.load(f)  # strict JSON: asv would take comments, other tools would not


def test_both_configurations_are_there():
    assert [os.path.basename(p) for p in CONFIGS] == ["asv.conf.history.json", "asv.conf.json"]


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_config_names_this_repository_and_existing_benchmarks(path):
    conf = _load(path)
    assert conf["version"] == 1 and conf["project"] == "jitgrad" and conf["dvcs"] == "git"
    repo = os.path.normpath(os.path.join(BENCH, conf["repo"]))
    assert os.path.isfile(os.path.join(repo, "pyproject.toml")), f"repo {conf['repo']!r} is not the root"
    benchmarks = os.path.join(BENCH, conf["benchmark_dir"])
    assert os.path.isfile(os.path.join(benchmarks, "__init__.py"))
    assert glob.glob(os.path.join(benchmarks, "bench_*.py")), f"no bench_*.py in {benchmarks}"
    assert conf["environment_type"] in ("existing", "virtualenv")
    assert conf["branches"] == ["main"]


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_asv_output_directories_are_git_ignored(path):
    conf = _load(path)
    with open(os.path.join(ROOT, ".gitignore")) as f:
        ignored = {line.strip() for line in f}
    for key in OUTPUT_DIRS:
        assert f"asv_bench/{conf[key]}/" in ignored, f"{key} {conf[key]!r} is not in .gitignore"


def test_one_dashboard_for_both_configurations():
    """Results of either configuration land in the same results/ and html/."""
    quick, history = (_load(os.path.join(BENCH, name))
                      for name in ("asv.conf.json", "asv.conf.history.json"))
    assert all(quick[key] == history[key] for key in OUTPUT_DIRS + ("benchmark_dir", "repo"))


def test_history_config_builds_a_commit_into_a_virtualenv():
    conf = _load(os.path.join(BENCH, "asv.conf.history.json"))
    assert conf["environment_type"] == "virtualenv"
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        pyproject = f.read()
    # every runtime dependency comes from the registry, in the environment's matrix
    for dep in ("numba", "numpy", "llvmlite"):
        assert f'"{dep}"' in pyproject and dep in conf["matrix"]["req"]
    build, = conf["build_command"]
    assert "{build_dir}" in build and "{build_cache_dir}" in build and "--no-deps" in build
    install, = conf["install_command"]
    assert "{wheel_file}" in install and "--no-deps" in install


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_asv_knows_every_key(path):
    """A misspelt key is silently ignored by asv: compare with its defaults."""
    config = pytest.importorskip("asv.config")
    conf = _load(path)
    # build_cache_size has no default in Config: asv reads it with getattr
    known = set(vars(config.Config())) | {"version", "build_cache_size"}
    assert set(conf) <= known, f"keys asv does not know: {sorted(set(conf) - known)}"
    assert config.Config.load(path).environment_type == conf["environment_type"]
