"""Datasets as in-memory tensors: one registry, one loader, checksum-verified downloads.

Every dataset lives in its own folder ``ROOT/NAME``. The image datasets are fetched and parsed by
torchvision and verified against torchvision's md5 checksums; nothing that fails its checksum is ever
read: ``load`` refuses it, ``download`` deletes it and fetches it again.

Tiny ImageNet, Tiny-ImageNet-C, CUB-200-2011 and Stanford Dogs, which torchvision does not ship, are archives
of image files: each archive is checked against its md5 before extraction, the extracted files against the
archive's list of files, and the decoded images are cached next to the data (see ``_ArchiveImages``).

digits-c, the digits test split under Hendrycks & Dietterich's corruptions, is not downloaded: ``download`` builds it
(``tradeoff.data.digits_c``) and stores it in its folder, stamped so that a stale copy is built again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import tarfile
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from PIL import Image

from tradeoff.core.errors import UserError
from tradeoff.data.hendrycks import CORRUPTIONS, SEVERITIES
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.registry import Registry
from tradeoff.data.generated import MARKER as GENERATED_MARKER, GeneratedDataRoot
from tradeoff.core.spec import RunSpec


tvd = LazyModule("torchvision.datasets")
tv_utils = LazyModule("torchvision.datasets.utils")
_scipy_io = LazyModule("scipy.io")
_sk_datasets = LazyModule("sklearn.datasets")
_sk_model_selection = LazyModule("sklearn.model_selection")

_log = logging.getLogger(__name__)

_DIGIT_CLASSES = tuple(str(digit) for digit in range(10))

# A fetch that fails or yields a corrupt file is retried this many times before giving up.
_RETRIES = 1


class DatasetError(UserError):
    """A dataset is unknown, missing, corrupt or could not be downloaded."""


@dataclass(frozen=True)
class Data:
    """A dataset held in memory; images are float32 in [0, 1], NCHW, contiguous, on the CPU."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    classes: tuple[str, ...]
    name: str
    # a run's validation split (load_run_data): images held out of the training split, which x_train then lacks
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(channels, height, width) of one image."""
        channels, height, width = self.x_train.shape[1:]
        return channels, height, width


@dataclass(frozen=True)
class DatasetSpec(ABC):
    """How one dataset is fetched, verified and read."""

    name: str
    image_shape: tuple[int, int, int]
    num_classes: int

    @property
    def needs_download(self) -> bool:
        return True

    def folder(self, root: str | Path) -> Path:
        # a GeneratedDataRoot stays one: the folders under it may hold generated files (tradeoff.data.generated)
        return (root if isinstance(root, Path) else Path(root)) / self.name

    @abstractmethod
    def problems(self, folder: Path) -> list[Path]:
        """The files ``read`` needs that are missing or fail their checksum."""

    @abstractmethod
    def fetch(self, folder: Path) -> None:
        """Download (or reuse intact archives) and extract into ``folder``."""

    @abstractmethod
    def read(self, folder: Path) -> Data:
        """Parse verified files into tensors."""

    def generate(self, folder: Path) -> None:
        """Write generated files in the dataset's format instead of fetching it (under a GeneratedDataRoot)."""
        from tradeoff.data import generated as rehearsal_data

        rehearsal_data.write(self.name, folder)

    def _data(
        self,
        x_train: np.ndarray,
        y_train: Iterable[int],
        x_test: np.ndarray,
        y_test: Iterable[int],
        classes: Sequence[str],
    ) -> Data:
        return Data(
            x_train=_unit_float(x_train),
            y_train=_labels(y_train),
            x_test=_unit_float(x_test),
            y_test=_labels(y_test),
            num_classes=self.num_classes,
            classes=tuple(classes),
            name=self.name,
        )


def _unit_float(images: np.ndarray) -> torch.Tensor:
    """uint8 NCHW images (any strides) -> contiguous float32 tensor in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)).div_(255.0)


def _labels(labels: Iterable[int]) -> torch.Tensor:
    return torch.from_numpy(np.asarray(labels, dtype=np.int64).reshape(-1))


def _generated_md5s(folder: Path) -> dict[str, str] | None:
    """The checksums of the generated dataset in ``folder`` (its ``GENERATED.json``) when ``folder`` lies under a
    ``GeneratedDataRoot``; None otherwise: the published checksums apply (``_refuse_generated`` stops a plain root
    from reading a generated folder)."""
    if not isinstance(folder, GeneratedDataRoot):
        return None
    from tradeoff.data import generated as rehearsal_data

    return rehearsal_data.checksums(folder)


def _md5(folder: Path, relative: str, published: str) -> str:
    """The md5 that ``folder/relative`` must have: the published one, or the generated file's (see above)."""
    generated = _generated_md5s(folder)
    return published if generated is None else generated.get(relative, f"not in {GENERATED_MARKER}")


def _refuse_generated(folder: Path) -> None:
    """A folder holding a generated dataset is read only under a GeneratedDataRoot (the rehearsal scale)."""
    if not isinstance(folder, GeneratedDataRoot) and (folder / GENERATED_MARKER).is_file():
        raise DatasetError(f"{folder} holds generated files ({folder / GENERATED_MARKER}), not the dataset: only a "
                           "scale with scale_map.generated_data (config/rehearsal.yaml) reads them; point paths.data "
                           "at the real download")


@dataclass(frozen=True)
class _Digits(DatasetSpec):
    """scikit-learn's bundled 8x8 digits with a fixed stratified 80/20 split."""

    @property
    def needs_download(self) -> bool:
        return False

    def problems(self, folder: Path) -> list[Path]:
        return []

    def fetch(self, folder: Path) -> None:
        """Bundled with scikit-learn: nothing to fetch."""

    def read(self, folder: Path) -> Data:
        arrays = self._split(folder)
        # Pixel values are integers 0..16.
        return Data(
            x_train=torch.from_numpy(arrays["x_train"].astype(np.float32) / 16.0),
            y_train=_labels(arrays["y_train"]),
            x_test=torch.from_numpy(arrays["x_test"].astype(np.float32) / 16.0),
            y_test=_labels(arrays["y_test"]),
            num_classes=self.num_classes,
            classes=_DIGIT_CLASSES,
            name=self.name,
        )

    def _split(self, folder: Path) -> dict[str, np.ndarray]:
        """The split, from ``folder/split.npz`` when scikit-learn's version made it, else made and kept there.

        Every demo job reads digits; importing scikit-learn (and SciPy) to redo the split costs each of them ~2 s
        of CPU, reading the kept arrays ~1 ms. The split depends on scikit-learn's data and ``train_test_split``,
        so a cache written by another version is made again."""
        from importlib.metadata import version

        from tradeoff.storage.atomic import WriteError, atomic_write_bytes

        cache, sklearn_version = folder / "split.npz", version("scikit-learn")
        names = ("x_train", "y_train", "x_test", "y_test")
        try:
            with np.load(cache, allow_pickle=False) as kept:
                if str(kept["sklearn"]) == sklearn_version:
                    arrays = {key: kept[key] for key in names}
                    if str(kept["sha256"]) == arrays_digest(arrays):
                        return arrays
                    _log.warning("digits: %s does not match the checksum kept with it (its arrays were changed); "
                                 "making it again", cache)
        except FileNotFoundError:
            pass  # not made yet
        except _UNREADABLE_CACHE as err:  # truncated, corrupted (zip CRC), or of an older layout (no checksum)
            _log.warning("digits: %s cannot be read (%s: %s); making it again", cache, type(err).__name__, err)
        bunch = _sk_datasets.load_digits()
        x_train, x_test, y_train, y_test = _sk_model_selection.train_test_split(
            bunch.images.astype(np.uint8)[:, None], bunch.target, test_size=0.2, stratify=bunch.target,
            random_state=0)
        arrays = {"x_train": np.ascontiguousarray(x_train), "y_train": y_train,
                  "x_test": np.ascontiguousarray(x_test), "y_test": y_test}
        buffer = io.BytesIO()
        np.savez(buffer, sklearn=np.array(sklearn_version), sha256=np.array(arrays_digest(arrays)), **arrays)
        try:
            atomic_write_bytes(cache, buffer.getvalue())  # concurrent jobs write the same bytes; the rename is atomic
        except WriteError as err:
            _log.warning("digits: the split could not be kept (%s); it is made again by every job", err)
        return arrays


@dataclass(frozen=True)
class _Mnist(DatasetSpec):
    """MNIST as torchvision stores it: gzip archives and their extracted idx files in ``MNIST/raw``."""

    def problems(self, folder: Path) -> list[Path]:
        raw = self._raw(folder)
        bad = []
        for archive_name, md5 in tvd.MNIST.resources:
            archive = raw / archive_name
            extracted = raw / archive_name.removesuffix(".gz")
            if not tv_utils.check_integrity(archive, _md5(folder, f"MNIST/raw/{archive_name}", md5)):
                bad += [archive, extracted]
            # torchvision reads the extracted files without checking them; they must match the verified
            # archive, or an interrupted extraction would be read as data.
            elif not extracted.is_file() or tv_utils.calculate_md5(extracted) != _gunzipped_md5(archive):
                bad.append(extracted)
        return bad

    def fetch(self, folder: Path) -> None:
        raw = self._raw(folder)
        archives = _fetch_files(
            ([mirror + archive_name for mirror in tvd.MNIST.mirrors], raw, archive_name, md5)
            for archive_name, md5 in tvd.MNIST.resources
        )
        for archive in archives:
            tv_utils.extract_archive(archive, raw)

    def read(self, folder: Path) -> Data:
        train = tvd.MNIST(folder, train=True)
        test = tvd.MNIST(folder, train=False)
        x_train, x_test = train.data.numpy()[:, None], test.data.numpy()[:, None]
        return self._data(x_train, train.targets.numpy(), x_test, test.targets.numpy(), _DIGIT_CLASSES)

    @staticmethod
    def _raw(folder: Path) -> Path:
        return folder / "MNIST" / "raw"


def _gunzipped_md5(archive: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with gzip.open(archive, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class _Svhn(DatasetSpec):
    """SVHN cropped digits (train and test splits; torchvision maps label 10 to digit 0)."""

    splits = ("train", "test")

    def problems(self, folder: Path) -> list[Path]:
        files = (tvd.SVHN.split_list[split] for split in self.splits)
        return [folder / name for _, name, md5 in files
                if not tv_utils.check_integrity(folder / name, _md5(folder, name, md5))]

    def fetch(self, folder: Path) -> None:
        files = (tvd.SVHN.split_list[split] for split in self.splits)
        _fetch_files(([url], folder, filename, md5) for url, filename, md5 in files)

    def read(self, folder: Path) -> Data:
        source = tvd.SVHN
        if _generated_md5s(folder) is not None:  # torchvision's reader checks the md5s too: the generated files'
            source = type("GeneratedSVHN", (source,), {"split_list": {
                split: [url, name, _md5(folder, name, md5)] for split, (url, name, md5) in source.split_list.items()}})
        train = source(folder, split="train")
        test = source(folder, split="test")
        return self._data(train.data, train.labels, test.data, test.labels, _DIGIT_CLASSES)


@dataclass(frozen=True)
class _Cifar(DatasetSpec):
    """CIFAR-10 or CIFAR-100 (fine labels), from the python-pickle release."""

    source_name: str  # the torchvision class: CIFAR10 or CIFAR100

    @property
    def source(self) -> type:
        return getattr(tvd, self.source_name)

    def _reader(self, folder: Path) -> type:
        """torchvision's class, which checks the pickles' md5s itself: for a generated dataset, with its md5s."""
        source = self.source
        if _generated_md5s(folder) is None:
            return source

        def files(entries: list) -> list[list[str]]:
            return [[name, _md5(folder, f"{source.base_folder}/{name}", md5)] for name, md5 in entries]

        meta = {**source.meta, "md5": _md5(folder, f"{source.base_folder}/{source.meta['filename']}",
                                            source.meta["md5"])}
        return type(f"Generated{self.source_name}", (source,),
                    {"train_list": files(source.train_list), "test_list": files(source.test_list), "meta": meta})

    def problems(self, folder: Path) -> list[Path]:
        source = self._reader(folder)
        base = folder / source.base_folder
        # torchvision's own _check_integrity skips the metadata file, which holds the class names.
        expected = [*source.train_list, *source.test_list, (source.meta["filename"], source.meta["md5"])]
        return [base / name for name, md5 in expected if not tv_utils.check_integrity(base / name, md5)]

    def fetch(self, folder: Path) -> None:
        source = self.source
        (archive,) = _fetch_files([([source.url], folder, source.filename, source.tgz_md5)])
        tv_utils.extract_archive(archive, folder)

    def read(self, folder: Path) -> Data:
        reader = self._reader(folder)
        train = reader(folder, train=True)
        test = reader(folder, train=False)
        # torchvision keeps CIFAR images as N x H x W x C.
        x_train, x_test = train.data.transpose(0, 3, 1, 2), test.data.transpose(0, 3, 1, 2)
        return self._data(x_train, train.targets, x_test, test.targets, train.classes)


def _fetch_files(files: Iterable[tuple[Sequence[str], Path, str, str]]) -> list[Path]:
    """Download each ``(mirror urls, folder, filename, md5)`` and return the verified paths.

    Every file is attempted even after one fails, so that a single retry of the whole fetch can repair
    them all; ``DatasetError`` lists the failures.
    """
    paths, failures = [], []
    for urls, folder, filename, md5 in files:
        try:
            paths.append(_fetch_file(urls, folder, filename, md5))
        except DatasetError as err:
            failures.append(str(err))
    if failures:
        raise DatasetError("; ".join(failures))
    return paths


def _fetch_file(urls: Sequence[str], folder: Path, filename: str, md5: str) -> Path:
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


# --------------------------------------------------------------------------------------------------------------
# Image folders shipped as archives: Tiny ImageNet, Tiny-ImageNet-C, CUB-200-2011, Stanford Dogs.
#
# Each archive is verified against its md5 before anything is extracted from it. Extraction writes a manifest
# next to the archive (``<archive>.extracted.tsv.gz``: every regular file of the archive and its size); a dataset
# counts as present only while its manifest exists and every file it lists is there with that size, so an
# interrupted extraction or a truncated or deleted file is caught without the archive, which may be deleted
# once extracted. Reading tens of thousands of JPEGs takes minutes, so the decoded uint8 images are cached in a
# ``.npz`` next to the data; the cache stores a fingerprint of the source (path, size and modification time of
# every file of the manifests, plus the preprocessing) and is rebuilt whenever the fingerprint differs.

# Decoding threads (PIL releases the GIL while decoding and resizing); the order of the results is fixed.
_DECODE_WORKERS = min(8, os.cpu_count() or 1)
# Bumped whenever the decoding or the layout of a cache changes, which invalidates every cache.
_CACHE_VERSION = 1


@dataclass(frozen=True)
class _Archive:
    """One downloadable archive: its file name, its mirrors (tried in turn) and its md5."""

    filename: str
    urls: tuple[str, ...]
    md5: str


def _manifest_path(folder: Path, archive: _Archive) -> Path:
    return folder / f"{archive.filename}.extracted.tsv.gz"


def _read_manifest(path: Path) -> list[tuple[str, int]]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        rows = [line.rstrip("\n").rsplit("\t", 1) for line in stream if line.strip()]
    return [(name, int(size)) for name, size in rows]


def _extract(archive_path: Path, folder: Path, archive: _Archive) -> None:
    """Extract a verified archive into ``folder`` and write its manifest (last, atomically)."""
    manifest = _manifest_path(folder, archive)
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
    tmp = manifest.with_name(manifest.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as stream:
        stream.writelines(f"{name}\t{size}\n" for name, size in entries)
    os.replace(tmp, manifest)


def _extraction_problems(folder: Path, archive: _Archive) -> list[Path]:
    """Why the files extracted from ``archive`` cannot be read: the manifest (absent, or listing a file that is
    missing or has the wrong size), the archive itself when it is needed and fails its md5, and up to five of the
    bad files by name."""
    manifest = _manifest_path(folder, archive)
    if not manifest.is_file():
        archive_path = folder / archive.filename
        md5 = _md5(folder, archive.filename, archive.md5)
        return [manifest] + ([] if tv_utils.check_integrity(archive_path, md5) else [archive_path])
    try:
        entries = _read_manifest(manifest)
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


def _fingerprint(folder: Path, names: Iterable[str], params: str) -> str:
    """Digest of the cache version, the preprocessing and the size and mtime of every named file."""
    digest = hashlib.sha256(f"{_CACHE_VERSION}|{params}\n".encode())
    for name in names:
        stat = os.stat(folder / name)
        digest.update(f"{name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


_UNREADABLE_CACHE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes and bytes, in name order): kept with a cache of arrays, so that
    a cache whose zip container is intact but whose values were changed (an edited label) is not used."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _cache_fingerprint(path: Path) -> str | None:
    """The fingerprint stored in a cache written by ``_cached``; None when there is none or it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return str(stored["fingerprint"])
    except _UNREADABLE_CACHE:
        return None


def _cached(path: Path, fingerprint: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays stored in ``path`` when its fingerprint matches; otherwise ``build()``, stored for next time.

    The cache is a plain ``.npz`` read with ``allow_pickle=False``. It is written atomically; a folder that is not
    writable only costs the decoding next time.
    """
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as stored:
                if str(stored["fingerprint"]) == fingerprint:
                    arrays = {key: stored[key] for key in stored.files if key not in ("fingerprint", "sha256")}
                    if str(stored["sha256"]) == arrays_digest(arrays):
                        return arrays
                    _log.warning("the decoded-image cache %s does not match its checksum (its arrays were "
                                 "changed); decoding the images again", path)
        except _UNREADABLE_CACHE as err:
            _log.warning("the decoded-image cache %s cannot be read (%s: %s); decoding the images again", path,
                         type(err).__name__, err)
    arrays = build()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as stream:
            np.savez(stream, fingerprint=np.array(fingerprint), sha256=np.array(arrays_digest(arrays)), **arrays)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        _log.warning("could not write the decoded-image cache %s: %s", path, err)
    return arrays


# ARES evaluates its ImageNet models at crop fraction 0.875 with bicubic interpolation.
_CROP_FRACTION = 0.875


def _resize_center_crop(image: Image.Image, size: int) -> Image.Image:
    """The standard ImageNet evaluation transform at crop ``size``: the shorter side is resized (bicubic) to
    ``round(size / 0.875)`` (256 for 224) and the centre ``size`` x ``size`` square is cut out, with the rounding
    rules of torchvision's ``Resize(int)`` and ``CenterCrop``."""
    short = round(size / _CROP_FRACTION)
    width, height = image.size
    if width <= height:
        new_w, new_h = short, int(short * height / width)
    else:
        new_w, new_h = int(short * width / height), short
    image = image.resize((new_w, new_h), Image.Resampling.BICUBIC)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    return image.crop((left, top, left + size, top + size))



def _decode(paths: Sequence[Path], shape: tuple[int, int, int], resize: int | None, command: str) -> np.ndarray:
    """Decode image files to one uint8 N x 3 x H x W array (RGB; grey, palette and CMYK files are converted).

    ``resize`` applies ``_resize_center_crop``; without it every image must already have the expected size.
    """
    channels, height, width = shape
    out = np.empty((len(paths), channels, height, width), dtype=np.uint8)

    def decode(index: int) -> None:
        path = paths[index]
        try:
            with Image.open(path) as image:
                image = image.convert("RGB")
                if resize is not None:
                    image = _resize_center_crop(image, resize)
                pixels = np.asarray(image)
        except (OSError, ValueError) as err:  # PIL's UnidentifiedImageError and truncated files are OSErrors
            raise DatasetError(f"cannot decode {path}: {err}; {command} to fetch it again") from err
        if pixels.shape != (height, width, channels):
            raise DatasetError(f"{path} is {pixels.shape[1]}x{pixels.shape[0]}, expected {width}x{height}; "
                               f"{command} to fetch it again")
        out[index] = pixels.transpose(2, 0, 1)

    with ThreadPoolExecutor(max_workers=_DECODE_WORKERS) as pool:
        list(pool.map(decode, range(len(paths))))
    return out


@dataclass(frozen=True)
class _ArchiveImages(DatasetSpec):
    """A dataset of image files shipped in ``archives``, verified as described above."""

    archives: ClassVar[tuple[_Archive, ...]] = ()

    def problems(self, folder: Path) -> list[Path]:
        return [path for archive in self.archives for path in _extraction_problems(folder, archive)]

    def fetch(self, folder: Path) -> None:
        paths = _fetch_files((archive.urls, folder, archive.filename, archive.md5) for archive in self.archives)
        for path, archive in zip(paths, self.archives):
            _extract(path, folder, archive)

    def generate(self, folder: Path) -> None:
        super().generate(folder)
        for archive in self.archives:  # extracted as a download is: verified first, then with its manifest
            path = folder / archive.filename
            if not tv_utils.check_integrity(path, _md5(folder, archive.filename, archive.md5)):
                raise DatasetError(f"{path}: the generated archive fails the md5 in {GENERATED_MARKER}")
            _extract(path, folder, archive)

    def files(self, folder: Path) -> list[str]:
        """Every file the archives hold (relative to ``folder``), in manifest order."""
        return [name for archive in self.archives for name, _ in _read_manifest(_manifest_path(folder, archive))]

    def _command(self, folder: Path) -> str:
        return _download_command(self.name, folder.parent)

    def _cache_path(self, folder: Path) -> Path:
        _, height, width = self.image_shape
        return folder / f"{self.name}-{height}x{width}-uint8.npz"

    def _from_cache(self, folder: Path, params: str, build: Callable[[], dict[str, np.ndarray]]) -> Data:
        fingerprint = _fingerprint(folder, self.files(folder), params)
        arrays = _cached(self._cache_path(folder), fingerprint, build)
        classes = [str(name) for name in arrays["classes"]]
        return self._data(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], classes)


def _read_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class _TinyImageNet(_ArchiveImages):
    """Tiny ImageNet (CS231n): 200 classes of 64x64 images, 500 per class for training, 50 per class in ``val``,
    which serves as the test split (the ``test`` folder has no labels).

    Classes are the WordNet ids of ``wnids.txt`` in sorted order (the order of torchvision's ``ImageFolder`` over
    ``train/`` and over the Tiny-ImageNet-C folders); training images are ordered by class, then file name, and
    validation images as listed in ``val/val_annotations.txt``.
    """

    archives: ClassVar[tuple[_Archive, ...]] = (
        _Archive("tiny-imagenet-200.zip", ("http://cs231n.stanford.edu/tiny-imagenet-200.zip",),
                 "90528d7ca1a48142e341f4ef8d21d0de"),
    )
    base: ClassVar[str] = "tiny-imagenet-200"

    def classes(self, folder: Path) -> tuple[str, ...]:
        return tuple(sorted(_read_lines(folder / self.base / "wnids.txt")))

    def read(self, folder: Path) -> Data:
        return self._from_cache(folder, "tinyimagenet", lambda: self._decode_all(folder))

    def _decode_all(self, folder: Path) -> dict[str, np.ndarray]:
        base = folder / self.base
        classes = self.classes(folder)
        index = {wnid: i for i, wnid in enumerate(classes)}
        train = sorted(
            (index[parts[2]], name)
            for name in self.files(folder)
            if (parts := name.split("/"))[:2] == [self.base, "train"] and len(parts) == 5
            and parts[3] == "images" and parts[2] in index and parts[4].lower().endswith(".jpeg")
        )
        val = [line.split("\t")[:2] for line in _read_lines(base / "val" / "val_annotations.txt")]
        unknown = {wnid for _, wnid in val} - set(index)
        if unknown:
            raise DatasetError(f"val_annotations.txt names classes missing from wnids.txt: {sorted(unknown)[:5]}")
        command = self._command(folder)
        return {
            "x_train": _decode([folder / name for _, name in train], self.image_shape, None, command),
            "y_train": np.array([label for label, _ in train], dtype=np.int64),
            "x_test": _decode([base / "val" / "images" / name for name, _ in val], self.image_shape, None, command),
            "y_test": np.array([index[wnid] for _, wnid in val], dtype=np.int64),
            "classes": np.array(classes),
        }




class _CorruptedTestSets(ABC):
    """A dataset of corrupted test images only (Tiny-ImageNet-C, digits-c): ``load_corruptions`` reads it as
    ``{(corruption, severity): (x, y)}``; it has no training split, so ``load`` refuses it. Every set holds the test
    images of ``clean_dataset`` (whose models it evaluates), in one order."""

    name: str
    clean_dataset: ClassVar[str]

    @property
    def corruptions(self) -> tuple[str, ...]:
        """Its corruptions, in Hendrycks' order."""
        return CORRUPTIONS

    def read(self, folder: Path) -> Data:
        raise DatasetError(f"{self.name!r} holds corrupted test images only and has no training split; read it with "
                           "tradeoff.data.load_corruptions (or evaluate with tradeoff.data.corruptions.nrob)")

    @abstractmethod
    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> Mapping:
        """``(corruption, severity) -> (x, y)`` from the verified dataset under ``root``."""


@dataclass(frozen=True)
class _TinyImageNetC(_CorruptedTestSets, _ArchiveImages):
    """Tiny-ImageNet-C (Hendrycks & Dietterich): the 10,000 Tiny ImageNet validation images under each of the 15
    corruptions at 5 severities, as ``Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG``.

    It has no training split, so ``load`` refuses it; read it with ``load_corruptions``. Labels follow Tiny
    ImageNet's class order, read from ``tinyimagenet`` (which must be downloaded too), so a model trained on
    ``load("tinyimagenet")`` is evaluated with the labels it was trained on.

    The md5 is not published next to the file: it is the one recorded by third-party loaders for the
    ``Tiny-ImageNet-C.tar`` of Zenodo record 8206060 (a later version of record 2536630, which adds the four
    "extra" corruptions in a separate file) and measured on a local copy by another project. Both records are
    mirrors; a file that does not match is refused.
    """

    archives: ClassVar[tuple[_Archive, ...]] = (
        _Archive("Tiny-ImageNet-C.tar",
                 ("https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar?download=1",
                  "https://zenodo.org/records/8206060/files/Tiny-ImageNet-C.tar?download=1"),
                 "f9c9a9dbdc11469f0b850190f7ad8be1"),
    )
    clean_dataset: ClassVar[str] = "tinyimagenet"

    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> CorruptionSets:
        folder = _verified_folder(self, root)
        clean = DATASETS[self.clean_dataset]
        assert isinstance(clean, _TinyImageNet)
        classes = clean.classes(_verified_folder(clean, root))
        return CorruptionSets(self, folder, classes, list(corruptions), [int(s) for s in severities])


class CorruptionSets(Mapping):
    """``(corruption, severity) -> (x, y)`` over Tiny-ImageNet-C, decoded lazily.

    ``x`` is float32 in [0, 1], N x 3 x 64 x 64; ``y`` holds Tiny ImageNet's label of each image (its class's
    position in ``load("tinyimagenet").classes``). Images are ordered by class, then file name. One corruption
    (all its severities, as uint8) is kept in memory at a time; each is cached as
    ``cache/<corruption>-uint8.npz`` in the dataset's folder.
    """

    def __init__(self, spec: _TinyImageNetC, folder: Path, classes: tuple[str, ...],
                 corruptions: Sequence[str], severities: Sequence[int]):
        self._spec, self._folder, self._classes = spec, folder, classes
        self._keys = [(corruption, int(severity)) for corruption in corruptions for severity in severities]
        self._files: dict[str, list[tuple[int, int, str, str]]] = {corruption: [] for corruption in corruptions}
        # Manifest entries end in <corruption>/<severity>/<wnid>/<file>, under whatever top folder the tar uses.
        for name in spec.files(folder):
            parts = name.split("/")
            if len(parts) >= 4 and parts[-4] in self._files and parts[-3].isdigit():
                self._files[parts[-4]].append((int(parts[-3]), 0, parts[-2], name))
        index = {wnid: i for i, wnid in enumerate(classes)}
        command = _download_command(spec.name, folder.parent)
        for corruption, severity in self._keys:
            found = [entry for entry in self._files[corruption] if entry[0] == severity]
            if not found:
                raise DatasetError(f"{spec.name}: no images for {corruption} at severity {severity} in {folder}; "
                                   f"{command} to fetch it")
            unknown = {wnid for _, _, wnid, _ in found} - set(index)
            if unknown:
                raise DatasetError(f"{spec.name}: {corruption}/{severity} has classes that Tiny ImageNet lacks: "
                                   f"{sorted(unknown)[:5]}")
        for corruption, entries in self._files.items():
            self._files[corruption] = sorted(
                (severity, index[wnid], wnid, name) for severity, _, wnid, name in entries
                if severity in severities and wnid in index
            )
        self._loaded: tuple[str, dict[str, np.ndarray]] | None = None

    def __getitem__(self, key: tuple[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
        corruption, severity = key[0], int(key[1])
        if (corruption, severity) not in self._keys:
            raise KeyError(key)
        arrays = self._arrays(corruption)
        rows = arrays["severity"] == severity
        return _unit_float(arrays["x"][rows]), _labels(arrays["y"][rows])

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def classes(self) -> tuple[str, ...]:
        return self._classes

    def _arrays(self, corruption: str) -> dict[str, np.ndarray]:
        if self._loaded is None or self._loaded[0] != corruption:
            self._loaded = None  # release the previous corruption before decoding the next
            entries = self._files[corruption]
            folder = self._folder
            params = f"{corruption}|{','.join(self._classes)}"
            fingerprint = _fingerprint(folder, (name for *_, name in entries), params)

            def build() -> dict[str, np.ndarray]:
                command = _download_command(self._spec.name, folder.parent)
                return {
                    "x": _decode([folder / name for *_, name in entries], self._spec.image_shape, None, command),
                    "y": np.array([label for _, label, _, _ in entries], dtype=np.int64),
                    "severity": np.array([severity for severity, *_ in entries], dtype=np.int64),
                }

            self._loaded = (corruption, _cached(folder / "cache" / f"{corruption}-uint8.npz", fingerprint, build))
        return self._loaded[1]


def load_corruptions(
    root: str | Path = "data",
    *,
    dataset: str = "tinyimagenet-c",
    corruptions: Sequence[str] | None = None,
    severities: Sequence[int] = SEVERITIES,
) -> Mapping[tuple[str, int], tuple[torch.Tensor, torch.Tensor]]:
    """A corruption dataset (Tiny-ImageNet-C, digits-c) from ``root/<dataset>`` as ``{(corruption, severity): (x, y)}``,
    corruption-major in the dataset's order; ``corruptions`` (default: all of the dataset's) and ``severities`` pick
    a part. ``x`` is float32 in [0, 1], ``y`` the labels of the clean dataset's classes."""
    spec = corruption_dataset(dataset)
    corruptions = spec.corruptions if corruptions is None else tuple(corruptions)
    unknown = [corruption for corruption in corruptions if corruption not in spec.corruptions]
    if unknown:
        raise DatasetError(f"unknown corruptions {unknown}; {dataset} has: {', '.join(spec.corruptions)}")
    bad_severities = [severity for severity in severities if severity not in SEVERITIES]
    if bad_severities:
        raise DatasetError(f"severities must be among {SEVERITIES}, got {bad_severities}")
    return spec.sets(root, corruptions, severities)


def corruption_dataset(name: str) -> _CorruptedTestSets:
    """The spec of a corruption dataset: its ``corruptions`` and ``clean_dataset``."""
    spec = _spec(name)
    if not isinstance(spec, _CorruptedTestSets):
        raise DatasetError(f"{name!r} is not a dataset of corrupted test images; those are: "
                           f"{', '.join(corruption_dataset_names())}")
    return spec


def corruption_dataset_names() -> list[str]:
    return [name for name, spec in DATASETS.items() if isinstance(spec, _CorruptedTestSets)]


@dataclass(frozen=True)
class _DigitsC(_CorruptedTestSets, DatasetSpec):
    """digits-c: the digits test split under 13 of Hendrycks & Dietterich's 15 corruptions, 5 severities each
    (``tradeoff.data.digits_c`` says how each is carried over to 8x8 images), the stand-in for Tiny-ImageNet-C at the
    scales that map every run onto digits. Nothing is downloaded: ``download`` builds it, deterministically, into
    ``digits-c-uint8.npz`` in its folder (a few seconds), stamped with the code's version, the seed and a digest of
    the clean test images; a set that no longer matches them is built again."""

    clean_dataset: ClassVar[str] = "digits"

    @property
    def needs_download(self) -> bool:
        return False

    @property
    def corruptions(self) -> tuple[str, ...]:
        from tradeoff.data import digits_c

        return digits_c.CORRUPTIONS

    def problems(self, folder: Path) -> list[Path]:
        path = self._path(folder)
        return [] if _cache_fingerprint(path) == self._fingerprint(self._clean(folder).x_test) else [path]

    def fetch(self, folder: Path) -> None:
        self._arrays(folder)

    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> dict:
        arrays = self._arrays(_verified_folder(self, root))
        y = _labels(arrays["y"])
        return {(corruption, int(severity)): (_unit_float(arrays["x"][self.corruptions.index(corruption),
                                                                      SEVERITIES.index(int(severity))]), y)
                for corruption in corruptions for severity in severities}

    def _arrays(self, folder: Path) -> dict[str, np.ndarray]:
        from tradeoff.data import digits_c

        clean = self._clean(folder)
        return _cached(self._path(folder), self._fingerprint(clean.x_test),
                       lambda: {"x": digits_c.build(clean.x_test.numpy()), "y": clean.y_test.numpy()})

    def _clean(self, folder: Path) -> Data:
        return load(self.clean_dataset, folder.parent)

    def _fingerprint(self, x_test: torch.Tensor) -> str:
        from tradeoff.data import digits_c

        digest = hashlib.sha256(x_test.numpy().tobytes()).hexdigest()
        return f"{self.name}|version {digits_c.VERSION}|seed {digits_c.SEED}|{','.join(self.corruptions)}|{digest}"

    def _path(self, folder: Path) -> Path:
        return folder / f"{self.name}-uint8.npz"


@dataclass(frozen=True)
class _Cub(_ArchiveImages):
    """Caltech-UCSD Birds-200-2011: 200 species, the official split (5,994 training and 5,794 test images).

    Preprocessing (fixed, so that the images fit in one tensor): every image is converted to RGB, its shorter
    side resized (bicubic) to round(S / 0.875) and the centre S x S square cut out, S being the spec's image size
    (224: resize to 256, crop 224, ARES's evaluation transform). Class names are ``classes.txt`` without the
    numeric prefix; images are ordered by their id in ``images.txt``.
    """

    archives: ClassVar[tuple[_Archive, ...]] = (
        _Archive("CUB_200_2011.tgz",
                 ("https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",),
                 "97eceeb196236b17998738112f37df78"),
    )
    base: ClassVar[str] = "CUB_200_2011"

    def read(self, folder: Path) -> Data:
        return self._from_cache(folder, f"cub|{self.image_shape[1]}", lambda: self._decode_all(folder))

    def _decode_all(self, folder: Path) -> dict[str, np.ndarray]:
        base = folder / self.base

        def table(filename: str) -> dict[int, str]:
            return {int(key): value for key, value in (line.split(" ", 1) for line in _read_lines(base / filename))}

        images, labels, is_train = table("images.txt"), table("image_class_labels.txt"), table("train_test_split.txt")
        class_table = table("classes.txt")
        classes = [class_table[i].split(".", 1)[-1] for i in sorted(class_table)]
        if len(classes) != self.num_classes or sorted(class_table) != list(range(1, self.num_classes + 1)):
            raise DatasetError(f"{base / 'classes.txt'} lists {len(classes)} classes, expected {self.num_classes}")
        ids = sorted(images)
        train = [i for i in ids if is_train[i].strip() == "1"]
        test = [i for i in ids if is_train[i].strip() == "0"]
        command, size = self._command(folder), self.image_shape[1]
        return {
            "x_train": _decode([base / "images" / images[i] for i in train], self.image_shape, size, command),
            "y_train": np.array([int(labels[i]) - 1 for i in train], dtype=np.int64),
            "x_test": _decode([base / "images" / images[i] for i in test], self.image_shape, size, command),
            "y_test": np.array([int(labels[i]) - 1 for i in test], dtype=np.int64),
            "classes": np.array(classes),
        }


@dataclass(frozen=True)
class _StanfordDogs(_ArchiveImages):
    """Stanford Dogs: 120 breeds, the official split of ``lists.tar`` (``train_list.mat``, 100 images per class,
    12,000 in all; ``test_list.mat``, 8,580), images from ``images.tar`` (``Images/<wnid>-<breed>/*.jpg``).

    Same preprocessing as CUB-200-2011 (RGB, shorter side to round(S / 0.875) bicubic, centre S x S crop). Labels
    are those of the lists (1-based there); class names are the breed part of the folder names.
    """

    archives: ClassVar[tuple[_Archive, ...]] = (
        _Archive("images.tar", ("http://vision.stanford.edu/aditya86/ImageNetDogs/images.tar",),
                 "1bb1f2a596ae7057f99d7d75860002ef"),
        _Archive("lists.tar", ("http://vision.stanford.edu/aditya86/ImageNetDogs/lists.tar",),
                 "edbb9f16854ec66506b5f09b583e0656"),
    )

    def read(self, folder: Path) -> Data:
        return self._from_cache(folder, f"dogs|{self.image_shape[1]}", lambda: self._decode_all(folder))

    def _split(self, folder: Path, filename: str) -> tuple[list[str], np.ndarray]:
        mat = _scipy_io.loadmat(folder / filename)
        files = [str(np.ravel(entry)[0]) for entry in np.ravel(mat["file_list"])]
        labels = np.ravel(mat["labels"]).astype(np.int64) - 1
        if len(files) != len(labels) or labels.min(initial=0) < 0 or labels.max(initial=0) >= self.num_classes:
            raise DatasetError(f"{folder / filename}: inconsistent file list and labels")
        return files, labels

    def _decode_all(self, folder: Path) -> dict[str, np.ndarray]:
        train_files, y_train = self._split(folder, "train_list.mat")
        test_files, y_test = self._split(folder, "test_list.mat")
        breeds: dict[int, str] = {}
        for name, label in zip(train_files + test_files, np.concatenate([y_train, y_test])):
            breed = name.split("/")[0].split("-", 1)[-1]
            if breeds.setdefault(int(label), breed) != breed:
                raise DatasetError(f"label {label + 1} names two breeds in the lists: {breeds[int(label)]}, {breed}")
        if sorted(breeds) != list(range(self.num_classes)):
            raise DatasetError(f"the lists cover {len(breeds)} breeds, expected {self.num_classes}")
        command, size = self._command(folder), self.image_shape[1]
        images = folder / "Images"
        return {
            "x_train": _decode([images / name for name in train_files], self.image_shape, size, command),
            "y_train": y_train,
            "x_test": _decode([images / name for name in test_files], self.image_shape, size, command),
            "y_test": y_test,
            "classes": np.array([breeds[i] for i in range(self.num_classes)]),
        }


DATASETS = Registry("dataset")
DATASETS.register(_Digits("digits", (1, 8, 8), 10))
DATASETS.register(_Mnist("mnist", (1, 28, 28), 10))
DATASETS.register(_Svhn("svhn", (3, 32, 32), 10))
DATASETS.register(_Cifar("cifar10", (3, 32, 32), 10, "CIFAR10"))
DATASETS.register(_Cifar("cifar100", (3, 32, 32), 100, "CIFAR100"))
DATASETS.register(_TinyImageNet("tinyimagenet", (3, 64, 64), 200))
DATASETS.register(_TinyImageNetC("tinyimagenet-c", (3, 64, 64), 200))
# Fine-grained sets at the 224 x 224 resolution of the ImageNet-pretrained transformers (CA-AT, Sec. 5.1).
DATASETS.register(_Cub("cub200", (3, 224, 224), 200))
DATASETS.register(_StanfordDogs("stanford-dogs", (3, 224, 224), 120))
# Built locally from digits: Tiny-ImageNet-C's stand-in at the demo and smoke scales (config corruption_map).
DATASETS.register(_DigitsC("digits-c", (1, 8, 8), 10))


# (training, test) images of each dataset with a training split, as published (digits: this module's fixed split):
# what a job costs before any data is read (tradeoff.pipeline.costs, copied into its flops.json) and how many iterations an
# epoch has (Generalist's ema_horizon in epochs). A test checks digits' against the data.
SPLIT_SIZES: dict[str, tuple[int, int]] = {
    "digits": (1437, 360), "mnist": (60000, 10000), "svhn": (73257, 26032), "cifar10": (50000, 10000),
    "cifar100": (50000, 10000), "tinyimagenet": (100000, 10000), "cub200": (5994, 5794),
    "stanford-dogs": (12000, 8580),
}


def dataset_names() -> list[str]:
    return list(DATASETS)


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def _download_command(name: str, root: str | Path) -> str:
    """How to fetch a dataset: the CLI downloads into the configuration's ``paths.data`` (here ``root``)."""
    return f"run `tradeoff download {name}` (with the same --config files; it fetches into paths.data, here {root})"


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _ensure_downloaded(spec: DatasetSpec, root: str | Path) -> Path:
    folder = spec.folder(root)
    _refuse_generated(folder)
    bad = spec.problems(folder)
    errors: list[str] = []
    # under a GeneratedDataRoot (the rehearsal scale) a dataset that is not there is generated, never downloaded
    make = spec.generate if isinstance(folder, GeneratedDataRoot) and spec.needs_download else spec.fetch
    for _ in range(1 + _RETRIES):
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


def _names(paths: Sequence[Path]) -> str:
    return ", ".join(path.name for path in paths)


def download(name: str, root: str | Path = "data") -> Path:
    """Fetch dataset ``name`` into ``root/name`` and verify it; returns that folder.

    Intact files are kept, so calling it again costs only the checksum pass. A corrupt or interrupted
    download is deleted and fetched again once before ``DatasetError`` is raised.
    """
    return _ensure_downloaded(_spec(name), root)


def is_downloaded(name: str, root: str | Path = "data") -> bool:
    """Whether every file ``load`` needs is present and passes its checksum."""
    spec = _spec(name)
    return not spec.problems(spec.folder(root))


def load(name: str, root: str | Path = "data", *, download: bool = False) -> Data:
    """Load dataset ``name`` from ``root/name`` into memory (fetching it first if ``download``)."""
    spec = _spec(name)
    if download:
        return spec.read(_ensure_downloaded(spec, root))
    return spec.read(_verified_folder(spec, root))


def _verified_folder(spec: DatasetSpec, root: str | Path) -> Path:
    """``root/name`` once every file ``read`` needs is there and intact; else DatasetError with the fix."""
    folder = spec.folder(root)
    _refuse_generated(folder)
    bad = spec.problems(folder)
    if bad:
        shown = _names(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise DatasetError(f"dataset {spec.name!r} is not ready in {folder}: {shown} missing or failing the md5 "
                           f"checksum; {_download_command(spec.name, root)}")
    return folder


def subset(x: torch.Tensor, y: torch.Tensor, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n examples of a fixed permutation (seed 0, independent of the run's seed)."""
    if n is None or n >= len(x):
        return x, y
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:n]
    return x[idx], y[idx]


#: the seed of every validation split's draw: fixed, independent of the run's seed, so that every run on a dataset
#: holds out the same images (runs compared in a table trained on the same images)
VALIDATION_SEED = 0


def validation_indices(y: torch.Tensor, n: int) -> torch.Tensor:
    """The indices (ascending) of ``n`` of a training split's images held out as its validation split: a stratified
    draw with a fixed seed (VALIDATION_SEED). Each class gives its share of ``n`` rounded down, the classes with the
    largest remainders one more (ties: the lower label), so that every class's count is within one image of its
    proportional share; which images of a class, a seeded permutation of them."""
    labels = y.numpy()
    if n <= 0:
        return torch.zeros(0, dtype=torch.long)
    if n >= len(labels):
        raise DatasetError(f"a validation split of {n} images would leave none of the {len(labels)} training images "
                           "to train on (validation.<dataset> in the config)")
    rng = np.random.default_rng(VALIDATION_SEED)
    classes, counts = np.unique(labels, return_counts=True)
    share = counts * n / len(labels)
    take = np.floor(share).astype(np.int64)
    take[np.argsort(-(share - take), kind="stable")[:n - int(take.sum())]] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == label))[:k] for label, k in zip(classes, take)]
    return torch.from_numpy(np.sort(np.concatenate(chosen)))


def hold_out(x: torch.Tensor, y: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                  torch.Tensor]:
    """(x_train, y_train, x_val, y_val): ``n`` images of a training split held out (validation_indices), the rest
    in their order."""
    if n <= 0:  # nothing held out: the split itself, not a copy of it
        return x, y, x[:0], y[:0]
    val = validation_indices(y, n)
    keep = torch.ones(len(y), dtype=torch.bool)
    keep[val] = False
    return x[keep], y[keep], x[val], y[val]


def load_run_data(spec: RunSpec, data_root: str | Path) -> Data:
    """A run's dataset: its validation split (``selection.validation`` images of the training split, held out and
    never trained on), then of the rest and of the test split the first ``train_examples`` / ``test_examples`` (None:
    all) of a fixed permutation."""
    ds = load(spec.dataset, data_root)
    x_rest, y_rest, x_val, y_val = hold_out(ds.x_train, ds.y_train, spec.selection.validation)
    x_tr, y_tr = subset(x_rest, y_rest, spec.train_examples)
    x_te, y_te = subset(ds.x_test, ds.y_test, spec.test_examples)
    return Data(x_tr, y_tr, x_te, y_te, ds.num_classes, ds.classes, ds.name, x_val=x_val, y_val=y_val)


def selection_images(spec: RunSpec, ds: Data) -> tuple[torch.Tensor, torch.Tensor]:
    """The images a run's per-epoch selection measures (``selection.split``): the first ``selection.examples`` of a
    fixed permutation of its validation split, or, under ``split: test``, of its test split."""
    if spec.selection.split == "test":
        return subset(ds.x_test, ds.y_test, spec.selection.examples)
    if ds.x_val is None or ds.y_val is None:
        raise ValueError(f"{ds.name}: no validation split loaded (tradeoff.data.load_run_data holds it out)")
    return subset(ds.x_val, ds.y_val, spec.selection.examples)
