"""Archives of image files (zip, tar, tgz): md5-checked extraction and the manifest of what was extracted.

Each archive is verified against its md5 before anything is extracted from it. Extraction writes a manifest next to
the archive (``<archive>.extracted.tsv.gz``: every regular file of the archive and its size), last and atomically; a
dataset counts as present only while its manifest exists and every file it lists is there with that size, so an
interrupted extraction or a truncated or deleted file is caught without the archive, which may be deleted once
extracted."""

from __future__ import annotations

import gzip
import os
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.data.fetch import expected_md5
from tradeoff.storage.atomic import atomic_write_bytes

tv_utils = LazyModule("torchvision.datasets.utils")


@dataclass(frozen=True)
class Archive:
    """One downloadable archive: its file name, its mirrors (tried in turn) and its md5."""

    filename: str
    urls: tuple[str, ...]
    md5: str


def manifest_path(folder: Path, archive: Archive) -> Path:
    return folder / f"{archive.filename}.extracted.tsv.gz"


def read_manifest(path: Path) -> list[tuple[str, int]]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        rows = [line.rstrip("\n").rsplit("\t", 1) for line in stream if line.strip()]
    return [(name, int(size)) for name, size in rows]


def extract(archive_path: Path, folder: Path, archive: Archive) -> None:
    """Extract a verified archive into ``folder`` and write its manifest (last, atomically)."""
    manifest = manifest_path(folder, archive)
    manifest.unlink(missing_ok=True)
    if zipfile.is_zipfile(archive_path):
        with zipfile.ZipFile(archive_path) as zf:
            entries = [(info.filename, info.file_size) for info in zf.infolist() if not info.is_dir()]
            zf.extractall(folder)
    else:
        with tarfile.open(archive_path, "r:*") as tar:
            members = tar.getmembers()
            entries = [(member.name, member.size) for member in members if member.isfile()]
            tar.extractall(folder, members=members, filter="data")
    rows = "".join(f"{name}\t{size}\n" for name, size in entries)
    atomic_write_bytes(manifest, gzip.compress(rows.encode("utf-8"), mtime=0))


def extraction_problems(folder: Path, archive: Archive) -> list[Path]:
    """Why the files extracted from ``archive`` cannot be read: the manifest (absent, or listing a file that is
    missing or has the wrong size), the archive itself when it is needed and fails its md5, and up to five of the
    bad files by name."""
    manifest = manifest_path(folder, archive)
    if not manifest.is_file():
        archive_path = folder / archive.filename
        md5 = expected_md5(folder, archive.filename, archive.md5)
        return [manifest] + ([] if tv_utils.check_integrity(archive_path, md5) else [archive_path])
    try:
        entries = read_manifest(manifest)
    except (OSError, EOFError, ValueError):
        return [manifest]
    bad = []
    for name, size in entries:
        try:
            if os.stat(folder / name).st_size != size:
                bad.append(folder / name)
        except OSError:
            bad.append(folder / name)
        if len(bad) == 5:
            break
    return [manifest, *bad] if bad else []
