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
