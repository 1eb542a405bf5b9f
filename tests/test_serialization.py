"""jitgrad.save / jitgrad.load: round trips of tensors (every dtype, views,
Parameters, requires_grad), state dicts and nested containers, through paths and
file objects; a tensor saved twice loads as one; map_location; safe loading (no
pickle unless weights_only=False); the format as documented; torch files refused
with the conversion steps."""
import io
import json
import math
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.serialization import FORMAT


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    jitgrad.save(obj, buffer)
    buffer.seek(0)
    return jitgrad.load(buffer, **load_kwargs)


def assert_same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, jitgrad.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64",
                                   "bool", "complex64", "complex128"])
def test_tensor_of_every_dtype(dtype):
    arr = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    t = jitgrad.tensor(arr)
    assert_same(round_trip(t), t)
    assert_same(round_trip(t[:, ::2].t()), t[:, ::2].t().contiguous())  # a strided view


def test_nested_containers_and_scalars():
    obj = {"a": [1, 2.5, -0.0, math.inf, -math.inf, math.nan, True, None, "text", b"\x00\xff"],
           "t": (1, (2, [3, {"x": 4}])), 3: "int key", (1, "k"): "tuple key", 2.5: "float key",
           "c": complex(1, -2), "od": OrderedDict([("z", 1), ("a", 2)]),
           "counter": Counter([5, 5, 7]), "dtype": jitgrad.float64,
           "device": jitgrad.device("cpu"), "np": np.arange(4.0), "npscalar": np.float32(1.5),
           "shape": jitgrad.ones(2, 3).shape,
           "empty": [[], {}, ()]}
    loaded = round_trip(obj)
    assert_same(loaded, obj)
    assert type(loaded["npscalar"]) is np.float32


def test_module_and_optimizer_state_dicts_reload():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = jitgrad.optim.Adam(model.parameters(), lr=0.01)
    sched = jitgrad.optim.lr_scheduler.MultiStepLR(opt, [2, 4])
    model(jitgrad.ones(5, 3)).sum().backward()
    opt.step()
    sched.step()
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                  "scheduler": sched.state_dict(), "epoch": 1}
    loaded = round_trip(checkpoint)
    assert_same(loaded, checkpoint)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model2.load_state_dict(loaded["model"])
    opt2 = jitgrad.optim.Adam(model2.parameters(), lr=0.5)
    opt2.load_state_dict(loaded["optimizer"])
    sched2 = jitgrad.optim.lr_scheduler.MultiStepLR(opt2, [9])
    sched2.load_state_dict(loaded["scheduler"])
    assert sched2.milestones == Counter([2, 4]) and opt2.param_groups[0]["lr"] == 0.01


def test_parameters_and_requires_grad_survive():
    p = nn.Parameter(jitgrad.ones(2))
    frozen = nn.Parameter(jitgrad.ones(2), requires_grad=False)
    leaf = jitgrad.ones(2, requires_grad=True)
    a, b, c = round_trip([p, frozen, leaf])
    assert type(a) is nn.Parameter and a.requires_grad and type(b) is nn.Parameter
    assert not b.requires_grad and type(c) is jitgrad.Tensor and c.requires_grad and c.is_leaf


def test_a_tensor_saved_twice_loads_as_one_object():
    shared = jitgrad.ones(3)
    loaded = round_trip({"encoder.weight": shared, "decoder.weight": shared,
                         "copy": shared.clone()})
    assert loaded["encoder.weight"] is loaded["decoder.weight"]
    assert loaded["copy"] is not loaded["encoder.weight"]


def test_paths_and_file_objects(tmp_path):
    path = tmp_path / "ckpt.jg"
    jitgrad.save({"w": jitgrad.arange(3.0)}, path)
    assert round_trip(jitgrad.load(path))["w"].tolist() == [0.0, 1.0, 2.0]
    jitgrad.save([1, 2], str(path))
    assert jitgrad.load(str(path)) == [1, 2]
    with open(path, "wb") as f:
        jitgrad.save("x", f)
    with open(path, "rb") as f:
        assert jitgrad.load(f) == "x"


def test_map_location():
    t = jitgrad.arange(3.0)
    for location in ("cpu", jitgrad.device("cpu"), {"cpu": "cpu"}):
        assert round_trip(t, map_location=location).device == jitgrad.device("cpu")
    seen = []
    loaded = round_trip([t], map_location=lambda tensor, where: seen.append(where) or tensor * 2)
    assert seen == ["cpu"] and loaded[0].tolist() == [0.0, 2.0, 4.0]


def test_map_location_to_cuda_without_a_gpu_says_how_to_fix():
    if jitgrad.backend.cuda.unavailable_reason() is None:
        pytest.skip("a CUDA device is available here")
    with pytest.raises(RuntimeError, match=r"map_location=jitgrad.device\('cpu'\)"):
        round_trip(jitgrad.ones(2), map_location="cuda")


class Custom:
    def __init__(self, value):
        self.value = value


def test_other_objects_need_weights_only_false():
    buffer = io.BytesIO()
    jitgrad.save({"model": nn.Linear(2, 2), "obj": Custom(3)}, buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError, match=r"Weights only load failed: "
                       r"obj\['model'\] is an object of type jitgrad.nn.modules.linear.Linear.*"
                       r"weights_only=False"):
        jitgrad.load(buffer)
    buffer.seek(0)
    loaded = jitgrad.load(buffer, weights_only=False)
    assert isinstance(loaded["model"], nn.Linear) and loaded["obj"].value == 3


def test_format_is_a_zip_of_npy_and_json():
    buffer = io.BytesIO()
    jitgrad.save({"w": jitgrad.ones(2, 3), "n": 3}, buffer)
    with zipfile.ZipFile(buffer) as zf:
        assert zf.read("jitgrad/format").decode() == FORMAT + "\n"
        tree = json.loads(zf.read("jitgrad/data.json"))
        assert tree["dict"][1] == ["n", 3]
        key, value = tree["dict"][0]
        assert key == "w" and value["tensor"]["array"] == "arrays/0.npy"
        with zf.open("jitgrad/arrays/0.npy") as f:
            arr = np.lib.format.read_array(f, allow_pickle=False)
        assert arr.shape == (2, 3) and arr.dtype == np.float32
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_torch_files_are_refused_with_the_conversion_steps(tmp_path):
    torch = pytest.importorskip("torch")
    for new_format in (True, False):
        path = tmp_path / f"torch_{new_format}.pt"
        torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=new_format)
        with pytest.raises(RuntimeError, match=r"torch.*jitgrad.tensor\(t.numpy\(\)\).*"
                                               r"jitgrad.save\(converted"):
            jitgrad.load(path)


def test_other_files_are_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(RuntimeError, match="is not a file written by jitgrad.save"):
        jitgrad.load(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.txt", "x")
    buffer.seek(0)
    with pytest.raises(RuntimeError, match="is not a file written by jitgrad.save"):
        jitgrad.load(buffer)


def test_arrays_holding_objects_go_through_pickle():
    obj = np.array([{"a": 1}], dtype=object)
    with pytest.raises(pickle.UnpicklingError):
        round_trip(obj)
    assert round_trip(obj, weights_only=False)[0] == {"a": 1}
