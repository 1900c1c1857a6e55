"""torch.save / torch.load with xxnpu tensors and modules: location tags, map_location
both ways, and a clear error for a checkpoint that names a device this machine lacks."""
import io

import pytest
import torch

from testlib import run_python

import torch_xxnpu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel")

DEV0 = torch.device("xxnpu", 0)
DEV1 = torch.device("xxnpu", 1)


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_storage_location_tags():
    assert torch.serialization.location_tag(torch.ones(1, device="xxnpu").untyped_storage()) == "xxnpu:0"
    assert torch.serialization.location_tag(torch.ones(1, device="xxnpu:1").untyped_storage()) == "xxnpu:1"
    assert torch.serialization.location_tag(torch.ones(1).untyped_storage()) == "cpu"


@pytest.mark.parametrize("weights_only", [True, False])
def test_tensors_come_back_on_their_device(weights_only):
    host = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    obj = {"a": host.to(DEV0), "b": host.to(DEV1), "i": torch.arange(5, device="xxnpu", dtype=torch.int64)}
    out = roundtrip(obj, weights_only=weights_only)
    assert out["a"].device == DEV0 and out["b"].device == DEV1
    assert torch.equal(out["a"].cpu(), host) and torch.equal(out["b"].cpu(), host)
    assert out["i"].dtype == torch.int64 and out["i"].cpu().tolist() == [0, 1, 2, 3, 4]


def test_views_keep_sharing_their_storage():
    base = torch.arange(10, dtype=torch.float32, device="xxnpu")
    a, b = roundtrip([base, base[2:5]])
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert b.storage_offset() == 2
    a.fill_(1.0)
    assert b.cpu().tolist() == [1.0, 1.0, 1.0]


def test_module_state_dict_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("xxnpu")
    sd = roundtrip(model.state_dict())
    assert {v.device for v in sd.values()} == {DEV0}
    clone = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("xxnpu")
    clone.load_state_dict(sd)
    for (k, v), (k2, v2) in zip(model.state_dict().items(), clone.state_dict().items()):
        assert k == k2 and torch.equal(v.cpu(), v2.cpu())
    # a whole module object (pickled, not weights_only)
    whole = roundtrip(model, weights_only=False)
    assert next(whole.parameters()).device == DEV0
    assert torch.equal(whole[0].weight.cpu(), model[0].weight.cpu())


def test_map_location_xxnpu_to_cpu():
    t = torch.arange(4.0, device="xxnpu:1")
    for loc in ("cpu", torch.device("cpu"), {"xxnpu:1": "cpu"}, lambda storage, _: storage):
        out = roundtrip(t, map_location=loc)
        assert out.device.type == "cpu", loc
        assert out.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_map_location_cpu_to_xxnpu():
    t = torch.arange(4.0)
    assert roundtrip(t, map_location="xxnpu").device == DEV0
    assert roundtrip(t, map_location="xxnpu:1").device == DEV1
    assert roundtrip(t, map_location=torch.device("xxnpu", 1)).device == DEV1
    assert roundtrip(t, map_location={"cpu": "xxnpu:1"}).device == DEV1
    out = roundtrip(t, map_location=lambda storage, _: storage.xxnpu(1))
    assert out.device == DEV1 and out.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    # the current device applies to a bare "xxnpu"
    with torch.xxnpu.device(1):
        assert roundtrip(t, map_location="xxnpu").device == DEV1


def test_map_location_between_xxnpu_devices():
    t = torch.arange(3.0, device="xxnpu:1")
    out = roundtrip(t, map_location={"xxnpu:1": "xxnpu:0"})
    assert out.device == DEV0 and out.cpu().tolist() == [0.0, 1.0, 2.0]
    assert roundtrip(torch.ones(2, device="xxnpu:0"), map_location="xxnpu:1").device == DEV1


def test_file_on_disk(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.full((3,), 2.5, device="xxnpu:1")}, path)
    assert torch.load(path)["w"].device == DEV1
    assert torch.load(path, map_location="cpu")["w"].tolist() == [2.5, 2.5, 2.5]


def test_bad_map_location_index_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"device 5 but torch.xxnpu.device_count\(\) is 2"):
        roundtrip(torch.ones(1), map_location="xxnpu:5")


def test_checkpoint_naming_a_missing_device(tmp_path):
    path = tmp_path / "on_dev1.pt"
    torch.save(torch.arange(3.0, device="xxnpu:1"), path)
    r = run_python(
        f"""
        import torch, torch_xxnpu
        assert torch.xxnpu.device_count() == 1
        try:
            torch.load({str(path)!r})
            print("LOADED")
        except RuntimeError as e:
            print("ERR", str(e).replace("\\n", " "))
        # the process goes on, and map_location rescues the checkpoint
        t = torch.load({str(path)!r}, map_location="xxnpu:0")
        print("MAPPED", t.device, t.cpu().tolist())
        """,
        XXNPU_DEVICE_COUNT="1",
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("ERR ")
    assert "Attempting to deserialize object on XXNPU device 1 but torch.xxnpu.device_count() is 1" in lines[0]
    assert "map_location" in lines[0]
    assert lines[1] == "MAPPED xxnpu:0 [0.0, 1.0, 2.0]"
