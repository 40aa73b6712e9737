"""Checkpoints: atomic writes, integrity checks, weights-only loading.

Nothing here executes code from a file: every load is ``torch.load(weights_only=True)``, so a checkpoint that
carries a pickled object is refused. Epoch states carry the SHA-256 of their bytes in their file name
(``epoch-0007-<sha>.pt``); a file whose bytes do not match (truncated, corrupted) is reported and skipped,
and training resumes from the newest state that is intact. Every write goes to a temporary file in the same
folder, is fsynced, then renamed over the target, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

STATE_PATTERN = re.compile(r"^epoch-(\d{4,})-([0-9a-f]{16})\.pt$")
KEEP_STATES = 2


class CheckpointError(RuntimeError):
    pass


def atomic_write_bytes(path: str | Path, payload: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def to_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def save(obj: Any, path: str | Path) -> None:
    """Save a weights-only-loadable object (tensors, dicts, lists, numbers, strings) atomically."""
    atomic_write_bytes(path, to_bytes(obj))


def load(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load without executing code: anything but tensors and plain containers is refused."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises several types for bad files
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from exc


def save_state(state_dir: str | Path, epoch: int, obj: Any, keep: int = KEEP_STATES) -> Path:
    """Write the state after ``epoch`` (1-based count of finished epochs) and prune all but the newest ``keep``."""
    payload = to_bytes(obj)
    digest = hashlib.sha256(payload).hexdigest()[:16]
    path = Path(state_dir) / f"epoch-{epoch:04d}-{digest}.pt"
    atomic_write_bytes(path, payload)
    for old in list_states(state_dir)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def list_states(state_dir: str | Path) -> list[Path]:
    """Epoch states, oldest first."""
    state_dir = Path(state_dir)
    if not state_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in state_dir.iterdir() if (m := STATE_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def verify(path: str | Path) -> bool:
    m = STATE_PATTERN.match(Path(path).name)
    if not m:
        return False
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] == m.group(2)


def latest_state(state_dir: str | Path, map_location: Any = "cpu") -> tuple[int, Any] | None:
    """The newest intact state as (epoch, object); corrupt or unloadable ones are reported and skipped."""
    for path in reversed(list_states(state_dir)):
        if not verify(path):
            log.warning("checkpoint %s does not match its checksum (truncated or corrupted); skipping it", path)
            continue
        try:
            obj = load(path, map_location)
        except CheckpointError as exc:
            log.warning("%s; skipping it", exc)
            continue
        return int(STATE_PATTERN.match(path.name).group(1)), obj
    return None
