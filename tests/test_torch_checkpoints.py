"""PyTorch's checkpoint format both ways, and what the default (weights_only) loader refuses.

The attack files are written byte by byte here: a pickle whose __reduce__ runs a command, opcodes applied to
the wrong kind of object, storages and tensors that do not fit, zip member names that climb out of a folder.
"""
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


def _archive(pkl, storages=(), names=None):
    """A torch-format zip holding data.pkl = `pkl` and storages {key: bytes}."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(names or "archive/data.pkl", pkl)
        for k, b in dict(storages).items():
            z.writestr(f"archive/data/{k}", b)
        z.writestr("archive/version", b"3\n")
    buf.seek(0)
    return buf


def _tensor_pickle(numel, offset, size, stride, storage="FloatStorage"):
    """data.pkl of one tensor, as torch.save writes it (protocol 2, persistent storage id)."""
    sz = b"".join(b"K" + bytes([s]) for s in size)
    st = b"".join(b"K" + bytes([s]) if s >= 0 else b"J" + struct.pack("<i", s) for s in stride)
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\n" + storage.encode() +
            b"\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK" + bytes([numel]) + b"tQK" + bytes([offset]) +
            b"(" + sz + b"t(" + st + b"t\x89ccollections\nOrderedDict\n)RtR.")


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_crafted_tensor_pickle_loads():
    t = tj.load(_archive(_tensor_pickle(6, 1, (2, 2), (2, 1)), {"0": np.arange(6, dtype="<f4").tobytes()}))
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t.stride() == (2, 1)


def test_malicious_reduce_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    f = _archive(pickle.dumps({"w": Evil(marker)}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="(?s)Weights only load failed.*trusted source.*"
                                                     "GLOBAL (posix|os).system"):
        tj.load(f)
    assert not marker.exists()
    # the same for a bare pickle (no zip): refused before unpickling
    with pytest.raises(RuntimeError, match="not a checkpoint"):
        tj.load(io.BytesIO(pickle.dumps(Evil(marker))))
    assert not marker.exists()


@pytest.mark.parametrize("pkl,match", [
    (b"\x80\x02]K\x00K\x01s.", "SETITEM.*list"),                          # SETITEM on a list
    (b"\x80\x02)K\x00K\x01s.", "SETITEM.*tuple"),                         # SETITEM on a tuple
    (b"\x80\x02}K\x01a.", "APPEND.*dict"),                                # APPEND on a dict
    (b"\x80\x02](K\x01K\x02u.", "SETITEM.*list"),                         # SETITEMS on a list
    (b"\x80\x02]}b.", "BUILD of list"),                                   # BUILD on a list
    (b"\x80\x02ctorch\nfloat32\n)R.", "REDUCE of dtype"),                 # calling a non-callable global
    (b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "GLOBAL builtins.eval"),
    (b"\x80\x02X\x02\x00\x00\x00osX\x06\x00\x00\x00system\x93.", "GLOBAL os.system"),  # STACK_GLOBAL
    (b"\x80\x02ccollections\nOrderedDict\n)\x81.", "operand"),            # NEWOBJ
    (b"(ios\nsystem\n.", "operand"),                                      # INST
    (b"\x80\x02\x82\x01.", "operand"),                                    # EXT1 (copyreg's extension registry)
])
def test_opcodes_on_the_wrong_objects_are_refused(pkl, match):
    with pytest.raises(pickle.UnpicklingError, match="(?s)Weights only load failed.*" + match):
        tj.load(_archive(pkl))


@pytest.mark.parametrize("numel,offset,size,stride,nbytes,match", [
    (100, 0, (2,), (1,), 24, "storage 0 has 24 bytes, expected 400"),    # declared count > bytes in the archive
    (6, 4, (2, 2), (2, 1), 24, "reaches element 7"),                     # tensor extent outside its storage
    (6, 0, (2, 2), (-1, 1), 24, "negative"),                             # negative stride
])
def test_storages_and_tensors_that_do_not_fit_are_refused(numel, offset, size, stride, nbytes, match):
    f = _archive(_tensor_pickle(numel, offset, size, stride), {"0": b"\x00" * nbytes})
    with pytest.raises(RuntimeError, match="corrupted or truncated.*" + match):
        tj.load(f)


@pytest.mark.parametrize("name", ["../archive/data.pkl", "archive/../../x/data.pkl", "/abs/data.pkl",
                                  "archive/data.pkl"])
def test_zip_member_names_climbing_out_are_refused(tmp_path, name):
    buf = _archive(b"\x80\x02N.", names=None)
    with zipfile.ZipFile(buf, "a") as z:
        z.writestr("../evil" if name == "archive/data.pkl" else name, b"x")
    before = set(os.listdir(tmp_path)) | set(os.listdir(tmp_path.parent))
    with pytest.raises(RuntimeError, match="unsafe member name"):
        tj.load(io.BytesIO(buf.getvalue()))
    assert set(os.listdir(tmp_path)) | set(os.listdir(tmp_path.parent)) == before


def test_whole_objects_save_and_load_only_when_asked(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    p = tmp_path / "model.pt"
    tj.save(model, p)                                   # pickled, as torch.save does
    with pytest.raises(pickle.UnpicklingError, match="(?s)Weights only load failed.*trusted source.*GLOBAL "
                                                     "tracejit.nn.modules.container.Sequential"):
        tj.load(p)
    m2 = tj.load(p, weights_only=False)
    x = tj.randn(5, 3)
    assert type(m2) is nn.Sequential
    np.testing.assert_array_equal(m2(x).detach().numpy(), model(x).detach().numpy())
    assert m2[0].weight is not model[0].weight and isinstance(m2[0].weight, nn.Parameter)


def test_shared_storage_strides_and_dtypes_round_trip():
    base = tj.arange(12.0).reshape(3, 4)
    obj = {"base": base, "t": base.t(), "row": base[1], "h": tj.tensor([1.5, -2.0], dtype=tj.float16),
           "i8": tj.tensor([-128, 127], dtype=tj.int8), "b": tj.tensor([True, False]), "p": nn.Parameter(tj.ones(2))}
    buf = io.BytesIO()
    tj.save(obj, buf)
    buf.seek(0)
    out = tj.load(buf)
    assert out["t"].stride() == (1, 4) and out["row"].storage_offset() == 4
    assert np.shares_memory(out["row"].numpy(), out["base"].numpy())
    out["base"].add_(1)                                  # one storage: the views see the change
    assert out["row"].tolist() == [5.0, 6.0, 7.0, 8.0]
    assert [out[k].dtype for k in ("h", "i8", "b")] == [tj.float16, tj.int8, tj.bool]
    assert out["i8"].tolist() == [-128, 127] and isinstance(out["p"], nn.Parameter) and out["p"].requires_grad


# ------------------------------------------------------------------------------------------- with torch

def _models(torch):
    def make(lib):
        return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.ReLU(), lib.nn.Flatten(),
                                 lib.nn.Linear(12, 4))
    return make(torch), make(tj)


def test_torch_state_dict_loads_into_tracejit_model(tmp_path):
    torch = pytest.importorskip("torch")
    tm, jm = _models(torch)
    tm(torch.randn(8, 2, 4, 4))                           # running stats move
    tm.eval()
    jm.eval()
    torch.save(tm.state_dict(), tmp_path / "sd.pt")
    sd = tj.load(tmp_path / "sd.pt")
    assert list(sd) == list(tm.state_dict()) and sd._metadata == tm.state_dict()._metadata
    jm.load_state_dict(sd)
    x = np.random.default_rng(0).standard_normal((5, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(jm(tj.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_tracejit_state_dict_loads_into_torch_model(tmp_path):
    torch = pytest.importorskip("torch")
    tm, jm = _models(torch)
    jm(tj.randn(8, 2, 4, 4))
    tm.eval()
    jm.eval()
    tj.save(jm.state_dict(), tmp_path / "sd.pt")
    sd = torch.load(tmp_path / "sd.pt")                   # weights_only=True, torch's default
    tm.load_state_dict(sd)
    assert int(sd["1.num_batches_tracked"]) == 1 and sd["1.num_batches_tracked"].dtype == torch.int64
    x = np.random.default_rng(0).standard_normal((5, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(tm(torch.tensor(x)).detach().numpy(), jm(tj.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_dtypes_strides_and_shared_storages_both_ways(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(12.0).reshape(3, 4)
    src = {"base": base, "t": base.t(), "row": base[1], "bf": torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16),
           "p": torch.nn.Parameter(torch.ones(2))}
    for dt in (torch.float16, torch.float64, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
               torch.bool):
        src[str(dt)] = (torch.arange(-3, 3) * 37).to(dt)
    torch.save(src, tmp_path / "t.pt")
    with pytest.warns(UserWarning, match="bfloat16"):
        got = tj.load(tmp_path / "t.pt")
    for k, v in src.items():
        want = v.detach().float().numpy() if v.dtype == torch.bfloat16 else v.detach().numpy()
        np.testing.assert_array_equal(got[k].detach().numpy(), want)
        if v.dtype != torch.bfloat16:
            assert got[k].dtype.name == str(v.dtype).replace("torch.", "")
            assert got[k].stride() == v.stride() and got[k].storage_offset() == v.storage_offset()
    assert np.shares_memory(got["row"].numpy(), got["t"].numpy())
    assert isinstance(got["p"], nn.Parameter) and got["p"].requires_grad
    # and back to torch
    tj.save(got, tmp_path / "j.pt")
    back = torch.load(tmp_path / "j.pt")
    for k, v in src.items():
        assert torch.equal(back[k], v.float() if v.dtype == torch.bfloat16 else v)
        assert back[k].stride() == v.stride()
    assert back["row"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    assert isinstance(back["p"], torch.nn.Parameter)


def test_torch_whole_module_file_is_refused_by_default(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL torch.nn.modules.linear.Linear"):
        tj.load(tmp_path / "m.pt")


def test_torch_legacy_format_loads(tmp_path):
    torch = pytest.importorskip("torch")
    sd = torch.nn.Linear(3, 2).state_dict()
    sd["h"] = torch.arange(4).to(torch.float16)
    sd["v"] = torch.arange(6.0).reshape(2, 3).t()
    p = tmp_path / "legacy.pt"
    torch.save(sd, p, _use_new_zipfile_serialization=False)
    got = tj.load(p)
    assert list(got) == list(sd)
    for k, v in sd.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
        assert got[k].stride() == v.stride()
    data = p.read_bytes()
    for cut in (len(data) - 5, len(data) // 2, 40):
        p.write_bytes(data[:cut])
        with pytest.raises(RuntimeError, match="corrupted or truncated"):
            tj.load(p)
    lin = torch.nn.Linear(2, 2)
    torch.save(lin, p, _use_new_zipfile_serialization=False)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL torch.nn.modules.linear.Linear"):
        tj.load(p)
    whole = tj.load(p, weights_only=False)              # opted in: the module, its storages filled
    assert type(whole) is torch.nn.Linear
    np.testing.assert_array_equal(whole.weight.detach().numpy(), lin.weight.detach().numpy())


def test_legacy_storages_declaring_more_than_the_file_are_refused():
    """Storages are made while the object pickle is read: their declared sizes together are bounded by the file
    (each of these two alone would fit)."""
    from tracejit._torch_format import _Global, _Pickler

    class Rec:
        def __init__(self, key, numel):
            self.key, self.numel = key, numel

    class LegacyPickler(_Pickler):
        def persistent_id(self, obj):
            if type(obj) is Rec:
                return ("storage", _Global("torch", "FloatStorage"), obj.key, "cpu", obj.numel, None)
            return None

    buf = io.BytesIO()
    for v in (0x1950a86a20f9469cfc6c, 1001, {"little_endian": True}):
        buf.write(pickle.dumps(v, protocol=2))
    LegacyPickler(buf).dump([Rec("0", 40), Rec("1", 40)])
    buf.write(pickle.dumps(["0", "1"], protocol=2) + (40).to_bytes(8, "little") * 2)
    assert 160 <= len(buf.getvalue()) < 320
    buf.seek(0)
    with pytest.raises(RuntimeError, match="corrupted or truncated.*storage 1 declares 40 elements, more than"):
        tj.load(buf)
