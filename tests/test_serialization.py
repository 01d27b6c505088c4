"""tracejit.save / tracejit.load: round trips, and refusals of what could run code or is damaged."""
import collections
import io
import math
import pickle
import zipfile

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


def _rt(obj):
    buf = io.BytesIO()
    tj.save(obj, buf)
    buf.seek(0)
    return tj.load(buf)


@pytest.mark.parametrize("dtype", [tj.float32, tj.float64, tj.float16, tj.int64, tj.int32, tj.int16, tj.int8,
                                   tj.uint8, tj.bool])
def test_tensor_round_trip_preserves_dtype_shape_values(dtype):
    arr = (np.random.standard_normal((3, 4, 2)) * 50)
    t = tj.tensor(arr).to(dtype)
    u = _rt(t)
    assert u.dtype is dtype and u.shape == (3, 4, 2)
    np.testing.assert_array_equal(u.numpy(), t.numpy())
    assert _rt(tj.tensor(3.5)).shape == () and _rt(tj.zeros(0, 3)).shape == (0, 3)


def test_non_contiguous_and_requires_grad():
    t = tj.arange(12.0).reshape(3, 4).t()
    np.testing.assert_array_equal(_rt(t).numpy(), t.numpy())
    p = nn.Parameter(tj.ones(2))
    q = _rt({"p": p, "r": tj.ones(1, requires_grad=True), "f": tj.ones(1)})
    assert isinstance(q["p"], nn.Parameter) and q["p"].requires_grad
    assert q["r"].requires_grad and not q["f"].requires_grad


def test_model_and_optimizer_checkpoint(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = tj.optim.Adam(model.parameters(), lr=0.01)
    sched = tj.optim.lr_scheduler.MultiStepLR(opt, [2, 4])
    model(tj.randn(5, 3)).sum().backward()
    opt.step()
    sched.step()
    path = tmp_path / "ckpt.pt"
    tj.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": 3,
             "hist": [1.5, math.inf, (2, "x")], "note": b"\x00\x01"}, path)
    ck = tj.load(str(path))
    assert list(ck["model"]) == list(model.state_dict())
    assert isinstance(ck["model"], collections.OrderedDict)
    assert ck["epoch"] == 3 and ck["hist"] == [1.5, math.inf, (2, "x")] and ck["note"] == b"\x00\x01"
    assert isinstance(ck["sched"]["milestones"], collections.Counter)
    m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m2.load_state_dict(ck["model"])
    o2 = tj.optim.Adam(m2.parameters(), lr=0.01)
    o2.load_state_dict(ck["opt"])
    x = tj.randn(2, 3)
    model.eval()
    m2.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), m2(x).detach().numpy())
    assert ck["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert int(ck["model"]["1.num_batches_tracked"]) == 1 and ck["model"]["1.num_batches_tracked"].dtype is tj.int64
    assert ck["model"]._metadata == model.state_dict()._metadata


def test_shared_tensor_stored_once_and_misc_types():
    t = tj.ones(1000)
    buf = io.BytesIO()
    tj.save([t, t, tj.float16, tj.Size([2, 3]), None, True, {1: "a", None: 2.0}], buf)
    size_shared = len(buf.getvalue())
    buf.seek(0)
    out = tj.load(buf)
    assert out[0] is out[1]
    assert out[2] is tj.float16 and out[3] == (2, 3) and isinstance(out[3], tj.Size)
    assert out[4] is None and out[5] is True and out[6] == {1: "a", None: 2.0}
    buf2 = io.BytesIO()
    tj.save([t, t.clone()], buf2)
    assert len(buf2.getvalue()) > size_shared + 3000


class Custom:
    pass


@pytest.mark.parametrize("obj,match", [
    (nn.Linear(2, 2), "state_dict"),
    (Custom(), "Custom"),
    ({"f": lambda: 0}, "function"),
    ([np.ones(2)], "numpy array"),
    ({(1, 2): 3}, "key of type tuple"),
    ({1, 2}, "set"),
])
def test_data_only_format_refuses_objects(obj, match):
    with pytest.raises(TypeError, match=match) as e:
        tj.save(obj, io.BytesIO(), format="tracejit")
    assert "can never run code" in str(e.value) or "key" in str(e.value)


def test_data_only_format_round_trip():
    buf = io.BytesIO()
    sd = nn.Linear(3, 2).state_dict()
    tj.save({"sd": sd, "h": tj.ones(2, dtype=tj.float16)}, buf, format="tracejit")
    assert b"tracejit/data.json" in buf.getvalue()
    buf.seek(0)
    out = tj.load(buf)
    assert list(out["sd"]) == ["weight", "bias"] and out["h"].dtype is tj.float16
    np.testing.assert_array_equal(out["sd"]["weight"].numpy(), sd["weight"].numpy())


def test_load_refuses_bare_pickles_and_foreign_files(tmp_path):
    p = tmp_path / "evil.pt"
    p.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(RuntimeError, match="not a checkpoint.*pickle"):
        tj.load(p)
    z = tmp_path / "other.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("x.txt", b"hello")
    with pytest.raises(RuntimeError, match="not a checkpoint"):
        tj.load(z)
    e = tmp_path / "empty.pt"
    e.write_bytes(b"")
    with pytest.raises(RuntimeError, match="empty"):
        tj.load(e)


@pytest.mark.parametrize("fmt,member", [("torch", "archive/data/0"), ("tracejit", "tracejit/tensors/0")])
def test_truncated_or_corrupted_file_gives_clear_error(tmp_path, fmt, member):
    p = tmp_path / "m.pt"
    tj.save(nn.Linear(20, 20).state_dict(), p, format=fmt)
    data = p.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 30):
        p.write_bytes(data[:cut])
        with pytest.raises(RuntimeError, match="corrupted or truncated"):
            tj.load(p)
    bad = bytearray(data)
    i = data.index(member.encode()) + len(member) + 100  # inside the tensor bytes (after the 64-byte alignment)
    bad[i] ^= 0xFF
    p.write_bytes(bytes(bad))
    with pytest.raises(RuntimeError, match="corrupted or truncated"):
        tj.load(p)


def test_state_dict_copied_from_torch_round_trips():
    """A state_dict moved from torch (via numpy) and back through tracejit keeps its numbers."""
    torch = pytest.importorskip("torch")
    m = torch.nn.Conv2d(2, 3, 3)
    sd = {k: tj.tensor(v.detach().numpy()) for k, v in m.state_dict().items()}
    out = _rt(sd)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(out[k].numpy(), v.numpy())
