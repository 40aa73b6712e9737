"""Getting a dataset onto disk, verified: the md5 each file must have (the published one, or under a
``GeneratedDataRoot`` the generated file's, :mod:`tradeoff.data.generated`), fetching from mirrors with a retry, and
the two gates every reader passes: :func:`ensure_downloaded` (fetch what is missing or corrupt, once more on failure)
and :func:`verified_folder` (refuse what is missing or corrupt, naming the command that fetches it).

Nothing that fails its checksum is ever read: a corrupt or interrupted download is deleted and fetched again once
before ``DatasetError`` is raised."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.data import generated
from tradeoff.data.registry import DatasetError, DatasetSpec
from tradeoff.data.roots import MARKER as GENERATED_MARKER
from tradeoff.data.roots import GeneratedDataRoot

tv_utils = LazyModule("torchvision.datasets.utils")

# A fetch that fails or yields a corrupt file is retried this many times before giving up.
RETRIES = 1


def generated_md5s(folder: Path) -> dict[str, str] | None:
    """The checksums of the generated dataset in ``folder`` (its ``GENERATED.json``) when ``folder`` lies under a
    ``GeneratedDataRoot``; None otherwise: the published checksums apply (``refuse_generated`` stops a plain root
    from reading a generated folder)."""
    if not isinstance(folder, GeneratedDataRoot):
        return None
    return generated.checksums(folder)


def expected_md5(folder: Path, relative: str, published: str) -> str:
    """The md5 that ``folder/relative`` must have: the published one, or the generated file's (see above)."""
    md5s = generated_md5s(folder)
    return published if md5s is None else md5s.get(relative, f"not in {GENERATED_MARKER}")


def refuse_generated(folder: Path) -> None:
    """A folder holding a generated dataset is read only under a GeneratedDataRoot (the rehearsal scale)."""
    if not isinstance(folder, GeneratedDataRoot) and (folder / GENERATED_MARKER).is_file():
        raise DatasetError(f"{folder} holds generated files ({folder / GENERATED_MARKER}), not the dataset: only a "
                           "scale with scale_map.generated_data (config/rehearsal.yaml) reads them; point paths.data "
                           "at the real download")


def download_command(name: str, root: str | Path) -> str:
    """How to fetch a dataset: the CLI downloads into the configuration's ``paths.data`` (here ``root``)."""
    return f"run `tradeoff download {name}` (with the same --config files; it fetches into paths.data, here {root})"


def fetch_files(files: Iterable[tuple[Sequence[str], Path, str, str]]) -> list[Path]:
    """Download each ``(mirror urls, folder, filename, md5)`` and return the verified paths.

    Every file is attempted even after one fails, so that a single retry of the whole fetch can repair
    them all; ``DatasetError`` lists the failures.
    """
    paths, failures = [], []
    for urls, folder, filename, md5 in files:
        try:
            paths.append(fetch_file(urls, folder, filename, md5))
        except DatasetError as err:
            failures.append(str(err))
    if failures:
        raise DatasetError("; ".join(failures))
    return paths


def fetch_file(urls: Sequence[str], folder: Path, filename: str, md5: str) -> Path:
    """Download one file, trying each mirror in turn, and return it once its md5 matches.

    torchvision's ``download_url`` keeps an intact local copy and re-downloads a corrupt one. The checksum
    is verified here as well so that nothing is extracted from an archive that was not verified, whatever
    the transport did; a file that fails is deleted rather than left behind.
    """
    path = folder / filename
    failures = []
    for url in urls:
        try:
            tv_utils.download_url(url, folder, filename, md5)
        except (OSError, RuntimeError) as err:  # URLError is an OSError; a checksum mismatch a RuntimeError
            failures.append(f"{url}: {err}")
            continue
        if tv_utils.check_integrity(path, md5):
            return path
        failures.append(f"{url}: md5 mismatch")
    path.unlink(missing_ok=True)
    raise DatasetError(f"could not fetch {filename} ({'; '.join(failures)})")


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _names(paths: Sequence[Path]) -> str:
    return ", ".join(path.name for path in paths)


def ensure_downloaded(spec: DatasetSpec, root: str | Path) -> Path:
    """``root/<name>`` once every file ``spec.read`` needs is there and intact: what is missing or fails its md5 is
    removed and fetched (generated, under a GeneratedDataRoot), once more on failure; else DatasetError."""
    folder = spec.folder(root)
    refuse_generated(folder)
    bad = spec.problems(folder)
    errors: list[str] = []
    # under a GeneratedDataRoot (the rehearsal scale) a dataset that is not there is generated, never downloaded
    make = spec.generate if isinstance(folder, GeneratedDataRoot) and spec.needs_download else spec.fetch
    for _ in range(1 + RETRIES):
        if not bad:
            return folder
        # Removed first so that no corrupt file outlives a failed fetch.
        _remove(bad)
        try:
            make(folder)
        except (DatasetError, OSError) as err:
            errors.append(str(err))
        bad = spec.problems(folder)
    if not bad:
        return folder
    _remove(bad)
    detail = "; ".join(errors) if errors else "downloaded files fail their md5 checksums: " + _names(bad)
    raise DatasetError(f"could not download {spec.name!r} into {folder}: {detail}")


def verified_folder(spec: DatasetSpec, root: str | Path) -> Path:
    """``root/name`` once every file ``read`` needs is there and intact; else DatasetError with the fix."""
    folder = spec.folder(root)
    refuse_generated(folder)
    bad = spec.problems(folder)
    if bad:
        shown = _names(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise DatasetError(f"dataset {spec.name!r} is not ready in {folder}: {shown} missing or failing the md5 "
                           f"checksum; {download_command(spec.name, root)}")
    return folder
