"""Checkpoints: integrity checks, weights-only loading (atomic writes: tradeoff.storage.atomic).

A checkpoint's bytes depend only on its values (:func:`canonical`): a model trained twice, or once straight through
and once resumed, is the same file, so DVC sees a faithful rebuild unchanged (its provenance is in a sidecar,
tradeoff.storage.provenance). Nothing here executes code from a file: every load is ``torch.load(weights_only=True)``, so a checkpoint that
carries a pickled object is refused. Epoch states carry the SHA-256 of their bytes in their file name
(``epoch-0007-<sha>.pt``); a file whose bytes do not match (truncated, corrupted) is reported and skipped,
and training resumes from the newest state that is intact. Every write is atomic
(tradeoff.storage.atomic: a reader never sees half a file; a write that fails raises ``WriteError`` naming the file and
leaves what was there unchanged).
A run's state folder is locked while it trains (``lock_states``), so two processes never train one run at once.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import logging
import os
import re
import socket
import sys
import zipfile
from pathlib import Path
from typing import Any

from tradeoff.core.errors import UserError
from tradeoff.storage.atomic import WriteError, atomic_write_bytes, write_error

log = logging.getLogger(__name__)

#: ``epoch-0007-<sha>.pt``: the state after 7 finished epochs; ``epoch-0007-step-000012-<sha>.pt``: after 7 finished
#: epochs and 12 steps of the 8th (written when a signal stops training mid-epoch: SLURM's time limit or preemption)
STATE_PATTERN = re.compile(r"^epoch-(?P<epoch>\d{4,})(?:-step-(?P<step>\d{6,}))?-(?P<sha>[0-9a-f]{16})\.pt$")
TEMP_PATTERN = re.compile(r"^\.epoch-.*\.tmp$")  # a state write that was killed before its rename
KEEP_STATES = 2


class CheckpointError(UserError, RuntimeError):
    pass


def canonical(obj: Any) -> Any:
    """The same values as an object graph that torch.save writes the same way, whatever made it: every container
    new (none shared), every string interned (equal strings are one object, so pickle's memo always refers back to
    the first of them), every tensor its own contiguous copy (no storage shared). Without it, equal values built by
    training and loaded from a state file (a resumed run) pickle to different bytes."""
    import torch  # here, not at the top: importing this module stays light

    def copy(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return obj.detach().clone(memory_format=torch.contiguous_format)
        if type(obj) is str:
            return sys.intern(obj)
        if type(obj) is dict:
            return {copy(k): copy(v) for k, v in obj.items()}
        if type(obj) is list:
            return [copy(v) for v in obj]
        if type(obj) is tuple:
            return tuple(copy(v) for v in obj)
        return obj

    return copy(obj)


def to_bytes(obj: Any) -> bytes:
    """torch.save's bytes of ``obj``'s values (:func:`canonical`): equal values, equal bytes."""
    import torch

    buffer = io.BytesIO()
    torch.save(canonical(obj), buffer)
    return buffer.getvalue()


def save(obj: Any, path: str | Path) -> None:
    """Save a weights-only-loadable object (tensors, dicts, lists, numbers, strings) atomically."""
    atomic_write_bytes(path, to_bytes(obj))


def load(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load without executing code: anything but tensors and plain containers is refused. Every failure is one
    CheckpointError line naming the file and what is wrong with it."""
    import torch

    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises several types for bad files
        raise CheckpointError(f"cannot load checkpoint {path}: {_load_problem(Path(path), exc)}") from None


#: the first bytes of torch.save's format (a zip archive) and of a pickle (protocol 2 and later; torch's legacy format)
ZIP_MAGIC, PICKLE_MAGIC = b"PK\x03\x04", b"\x80"
#: a zip archive's last record: its signature, and its length without the archive's comment
ZIP_END, ZIP_END_SIZE = b"PK\x05\x06", 22


def _zip_complete(path: Path, size: int) -> bool:
    """Whether a zip archive ends with its end record (the last 64 KiB hold it, comment included): a file cut short
    (a copy or download that stopped) does not."""
    with open(path, "rb") as f:
        f.seek(max(0, size - (ZIP_END_SIZE + 65535)))
        tail = f.read()
    at = tail.rfind(ZIP_END)
    if at < 0 or len(tail) - at < ZIP_END_SIZE:
        return False
    comment = int.from_bytes(tail[at + 20:at + 22], "little")
    return at + ZIP_END_SIZE + comment == len(tail)


def _load_problem(path: Path, exc: Exception) -> str:
    """What is wrong with a file that torch.load (weights only) refused, in a few words that say which: "truncated"
    (a PyTorch archive or pickle cut short), "not a checkpoint" (neither), or pickled code refused; never PyTorch's
    advice to load it with weights_only=False, which would run whatever code the file carries."""
    text = str(exc)
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "it is a folder"
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as err:
        return f"cannot read it ({err.strerror or err})"
    if size == 0:
        return "the file is empty (0 bytes)"
    found = re.search(r"GLOBAL (\S+)", text) if "Weights only load failed" in text else None
    if found:
        return (f"it carries pickled Python objects ({found.group(1)}), not only tensors: refused, nothing in it "
                "was run (a checkpoint of this pipeline holds tensors and plain containers only)")
    if head.startswith(ZIP_MAGIC) or ZIP_MAGIC.startswith(head):
        if not _zip_complete(path, size):
            return (f"it is truncated: a PyTorch checkpoint cut short ({size} bytes, without the archive's end; a copy "
                    "or download that stopped?)")
        try:
            with zipfile.ZipFile(path) as archive:
                torch_archive = any(n.endswith("/data.pkl") for n in archive.namelist())
        except (zipfile.BadZipFile, OSError):
            torch_archive = True  # a zip that zipfile cannot read either: PyTorch's, damaged inside
        if not torch_archive:
            return "it is not a checkpoint: a zip archive without PyTorch's data.pkl (torch.save writes one)"
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
        return f"it is a corrupted PyTorch checkpoint (its archive is complete, its contents unreadable: {first[:200]})"
    if head.startswith(PICKLE_MAGIC):  # torch's legacy format, or a plain pickle
        if isinstance(exc, EOFError) or any(w in text for w in ("truncated", "Ran out of input", "unexpected EOF")):
            return f"it is truncated: a pickle cut short ({size} bytes)"
        return "it is not a checkpoint of tensors (a pickle that torch cannot read weights-only)"
    return (f"it is not a checkpoint: neither a PyTorch archive (zip) nor a pickle (it begins with {head[:8]!r}; "
            "torch.save writes one)")


def state_position(path: str | Path) -> tuple[int, int]:
    """(finished epochs, steps of the next epoch) of a state file's name: the order in which states were made."""
    m = STATE_PATTERN.match(Path(path).name)
    return int(m.group("epoch")), int(m.group("step") or 0)


def save_state(state_dir: str | Path, epoch: int, obj: Any, keep: int = KEEP_STATES, *, step: int = 0) -> Path:
    """Write the state after ``epoch`` (1-based count of finished epochs) and, with ``step``, that many steps of the
    next epoch; prune all but the newest ``keep``."""
    payload = to_bytes(obj)
    digest = hashlib.sha256(payload).hexdigest()[:16]
    path = Path(state_dir) / (f"epoch-{epoch:04d}-step-{step:06d}-{digest}.pt" if step else
                              f"epoch-{epoch:04d}-{digest}.pt")
    try:
        atomic_write_bytes(path, payload)
    except WriteError as exc:
        raise WriteError(exc.errno, f"{exc.strerror}; the states already in {state_dir} are intact and "
                                    "training resumes from the newest when started again") from exc
    here = (epoch, step)
    for other in list_states(state_dir):  # states of this or a later point from an abandoned try: training
        if other != path and state_position(other) >= here:  # resumed before them, so they failed their
            other.unlink(missing_ok=True)  # checksum; they must not outlive good ones
    for old in list_states(state_dir)[:-keep]:
        old.unlink(missing_ok=True)
    for stale in Path(state_dir).iterdir():  # temporary files of writes that were killed (kill -9, node failure)
        if TEMP_PATTERN.match(stale.name):
            stale.unlink(missing_ok=True)
    return path


def clear_states(state_dir: str | Path) -> None:
    """Delete every epoch state (and leftover temporary file) of a run."""
    for path in list_states(state_dir):
        path.unlink(missing_ok=True)
    state_dir = Path(state_dir)
    if state_dir.is_dir():
        for stale in state_dir.iterdir():
            if TEMP_PATTERN.match(stale.name):
                stale.unlink(missing_ok=True)


def lock_states(state_dir: str | Path):
    """Lock a run's state folder for this process; returns the open lock file (the lock lasts until it is closed
    or the process ends, however it ends: the kernel releases it). Raises CheckpointError naming the holder when
    another process trains the same run (two pipelines, or Snakemake and DVC, in one folder)."""
    state_dir = Path(state_dir)
    path = state_dir / ".lock"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+")
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise CheckpointError(f"{state_dir} is locked by {holder}: this run is already being trained; wait for "
                              "it to end (or stop it) instead of starting it twice") from None
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        log.warning("cannot lock %s (%s): nothing stops a second process from training this run", path, exc)
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    f.flush()
    return f


def list_states(state_dir: str | Path) -> list[Path]:
    """Epoch states, oldest first."""
    state_dir = Path(state_dir)
    if not state_dir.is_dir():
        return []
    found = [(state_position(p), p) for p in state_dir.iterdir() if STATE_PATTERN.match(p.name)]
    return [p for _, p in sorted(found)]


def verify(path: str | Path) -> bool:
    m = STATE_PATTERN.match(Path(path).name)
    if not m:
        return False
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] == m.group("sha")


def latest_state(state_dir: str | Path, map_location: Any = "cpu") -> tuple[int, Any] | None:
    """The newest intact state as (finished epochs, object); corrupt or unloadable ones are reported and skipped. A
    state written mid-epoch holds its position in the object (``partial``, see tradeoff.training.train)."""
    for path in reversed(list_states(state_dir)):
        if not verify(path):
            log.warning("checkpoint %s does not match its checksum (truncated or corrupted); skipping it", path)
            continue
        try:
            obj = load(path, map_location)
        except CheckpointError as exc:
            log.warning("%s; skipping it", exc)
            continue
        return state_position(path)[0], obj
    return None
