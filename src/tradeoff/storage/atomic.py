"""Atomic file writing, on the ground floor (no PyTorch, nothing of the package but its errors): every write goes to
a temporary file in the same folder, is fsynced, then renamed over the target, so a reader never sees half a file
(:func:`atomic_write_bytes` and :func:`atomic_write_text` for what is in memory, :func:`atomic_path` for a library
that writes the file itself; no other module renames a file into place, tests/test_structure.py checks it);
a write that fails (disk full, read-only folder) raises ``WriteError`` naming the file and leaves what was there
unchanged. Also a file's SHA-256 (:func:`sha256_file`; a settings dict's digest is tradeoff.core.spec.json_digest)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tradeoff.core.errors import UserError


class WriteError(UserError, OSError):
    """A file could not be written (disk full, read-only or unwritable folder); the previous file is unchanged."""


def write_error(path: Path, exc: OSError) -> WriteError:
    """The one line that says ``path`` could not be written, and that nothing was replaced."""
    reason = exc.strerror or str(exc)
    return WriteError(exc.errno, f"cannot write {path}: {reason}; nothing was replaced (the previous file, if "
                                 "any, is intact)")


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would, for a moment, for every thread)
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary file beside ``path`` for a library that writes a file itself (matplotlib's ``savefig``, NumPy's
    ``savez`` into the opened file): once the block ends it is fsynced and renamed over ``path``; a block that
    raises removes it and leaves ``path`` as it was (an OSError becomes ``WriteError`` naming ``path``). The one
    place a file is renamed into place.

    Its name is ``.<name>.<random>.tmp``: name the format where the library reads it from the file name
    (``savefig(tmp, format=...)``), hand NumPy the open file (it would append ``.npz`` to a name), and give
    ``torch.save`` a buffer, not this path (it names its archive's folder after the file, which would put the
    random name in the bytes): :func:`tradeoff.storage.checkpoint.save`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from exc
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual permissions of a new file
        finally:
            os.close(fd)
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise write_error(path, exc) from exc
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_bytes(path: str | Path, payload: bytes) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(payload)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex, all 64 digits): what identifies a checkpoint that this pipeline did not
    write; its first 16 digits identify a model in an evaluation's resumable state."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
