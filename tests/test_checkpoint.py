import os
import pickle

import pytest
import torch

from tradeoff.storage import checkpoint


def test_round_trip_and_atomic(tmp_path):
    obj = {"w": torch.randn(3, 3), "epoch": 4, "rows": "[1, 2]", "nested": {"a": [torch.ones(2), 1.5]}}
    path = tmp_path / "x.pt"
    checkpoint.save(obj, path)
    back = checkpoint.load(path)
    assert torch.equal(back["w"], obj["w"]) and back["epoch"] == 4 and torch.equal(back["nested"]["a"][0], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]  # no temporary file left behind


def test_states_keep_newest_two_and_skip_corrupt(tmp_path, caplog):
    for epoch in range(1, 5):
        checkpoint.save_state(tmp_path, epoch, {"epoch": epoch, "t": torch.full((100,), float(epoch))})
    states = checkpoint.list_states(tmp_path)
    assert [int(p.name[6:10]) for p in states] == [3, 4]
    newest = states[-1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    epoch, obj = checkpoint.latest_state(tmp_path)
    assert epoch == 3 and obj["epoch"] == 3
    assert "does not match its checksum" in caplog.text


def test_truncated_state_is_skipped(tmp_path):
    checkpoint.save_state(tmp_path, 1, {"epoch": 1})
    path = checkpoint.save_state(tmp_path, 2, {"epoch": 2, "t": torch.zeros(1000)})
    os.truncate(path, path.stat().st_size // 2)
    assert checkpoint.latest_state(tmp_path)[0] == 1


class Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/tradeoff-pwned",))


def test_pickle_payload_is_refused_without_running(tmp_path):
    marker = "/tmp/tradeoff-pwned"
    if os.path.exists(marker):
        os.unlink(marker)
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "x": Payload()}, path)
    with pytest.raises(checkpoint.CheckpointError, match="cannot load checkpoint"):
        checkpoint.load(path)
    assert not os.path.exists(marker)
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(raw)
    assert not os.path.exists(marker)


def test_atomic_path_renames_what_a_library_wrote_and_leaves_the_old_file_when_it_fails(tmp_path):
    """tradeoff.storage.atomic.atomic_path: the library writes the temporary file, the block's end renames it over
    the target with the usual permissions; a block that raises leaves the target as it was and no temporary file."""
    import stat

    import numpy as np

    from tradeoff.storage.atomic import WriteError, atomic_path

    path = tmp_path / "sub" / "arrays.npz"
    with atomic_path(path) as tmp, open(tmp, "wb") as stream:
        assert tmp.parent == path.parent and not path.exists()
        np.savez(stream, a=np.arange(3))
    with np.load(path) as kept:
        assert kept["a"].tolist() == [0, 1, 2]
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    before = path.read_bytes()
    with pytest.raises(ValueError, match="the library failed"):
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"half a file")
            raise ValueError("the library failed")
    with pytest.raises(WriteError, match=f"cannot write {path}"):
        with atomic_path(path) as tmp:
            raise OSError(28, "No space left on device")
    assert path.read_bytes() == before and [p.name for p in path.parent.iterdir()] == ["arrays.npz"]


def test_a_generated_backbone_is_written_as_a_checkpoint(tmp_path):
    """write_backbone saves through tradeoff.storage.checkpoint (atomic, the same bytes every time: torch.save names
    its archive's folder after the file it writes, so it writes to a buffer, never to a temporary name)."""
    from tradeoff.models.adapters import write_backbone

    first = write_backbone("vit_tiny_adapter", tmp_path / "a" / "backbone.pth")
    second = write_backbone("vit_tiny_adapter", tmp_path / "b" / "backbone.pth")
    assert first.read_bytes() == second.read_bytes()
    assert [p.name for p in first.parent.iterdir()] == ["backbone.pth"]
    assert "model" in checkpoint.load(first)
