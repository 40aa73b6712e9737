"""The cache of decoded images: reading tens of thousands of JPEGs takes minutes, so the decoded uint8 arrays are kept
in a ``.npz`` next to the data (read with ``allow_pickle=False``). A cache stores a fingerprint of its source (the
size and modification time of every file it was decoded from, plus the preprocessing and :data:`CACHE_VERSION`) and a
SHA-256 of its arrays; it is rebuilt whenever either no longer matches. It is written atomically
(:func:`tradeoff.storage.atomic.atomic_path`); a folder that is not writable only costs the decoding next time."""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from tradeoff.storage.atomic import atomic_path

_log = logging.getLogger(__name__)

# Bumped whenever the decoding or the layout of a cache changes, which invalidates every cache.
CACHE_VERSION = 1

#: what reading a truncated, corrupted (zip CRC) or older-layout cache raises
UNREADABLE_CACHE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def fingerprint(folder: Path, names: Iterable[str], params: str) -> str:
    """Digest of the cache version, the preprocessing and the size and mtime of every named file."""
    digest = hashlib.sha256(f"{CACHE_VERSION}|{params}\n".encode())
    for name in names:
        stat = os.stat(folder / name)
        digest.update(f"{name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes and bytes, in name order): kept with a cache of arrays, so that
    a cache whose zip container is intact but whose values were changed (an edited label) is not used."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def cache_fingerprint(path: Path) -> str | None:
    """The fingerprint stored in a cache written by ``cached``; None when there is none or it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return str(stored["fingerprint"])
    except UNREADABLE_CACHE:
        return None


def cached(path: Path, fingerprint: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays stored in ``path`` when its fingerprint matches; otherwise ``build()``, stored for next time."""
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as stored:
                if str(stored["fingerprint"]) == fingerprint:
                    arrays = {key: stored[key] for key in stored.files if key not in ("fingerprint", "sha256")}
                    if str(stored["sha256"]) == arrays_digest(arrays):
                        return arrays
                    _log.warning("the decoded-image cache %s does not match its checksum (its arrays were "
                                 "changed); decoding the images again", path)
        except UNREADABLE_CACHE as err:
            _log.warning("the decoded-image cache %s cannot be read (%s: %s); decoding the images again", path,
                         type(err).__name__, err)
    arrays = build()
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as stream:
            np.savez(stream, fingerprint=np.array(fingerprint), sha256=np.array(arrays_digest(arrays)), **arrays)
    except OSError as err:
        _log.warning("could not write the decoded-image cache %s: %s", path, err)
    return arrays
