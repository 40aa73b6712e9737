"""Datasets as in-memory tensors: one registry, one loader, checksum-verified downloads.

Every dataset lives in its own folder ``ROOT/NAME``. The image datasets are fetched and parsed by
torchvision and verified against torchvision's md5 checksums; nothing that fails its checksum is ever
read: ``load`` refuses it, ``download`` deletes it and fetches it again.
"""

from __future__ import annotations

import gzip
import hashlib
import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torchvision import datasets as tvd
from torchvision.datasets import utils as tv_utils

_DIGIT_CLASSES = tuple(str(digit) for digit in range(10))

# A fetch that fails or yields a corrupt file is retried this many times before giving up.
_RETRIES = 1


class DatasetError(Exception):
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
        return Path(root) / self.name

    @abstractmethod
    def problems(self, folder: Path) -> list[Path]:
        """The files ``read`` needs that are missing or fail their checksum."""

    @abstractmethod
    def fetch(self, folder: Path) -> None:
        """Download (or reuse intact archives) and extract into ``folder``."""

    @abstractmethod
    def read(self, folder: Path) -> Data:
        """Parse verified files into tensors."""

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
        bunch = load_digits()
        # Pixel values are integers 0..16.
        images = bunch.images.astype(np.float32)[:, None] / 16.0
        x_train, x_test, y_train, y_test = train_test_split(
            images, bunch.target, test_size=0.2, stratify=bunch.target, random_state=0
        )
        return Data(
            x_train=torch.from_numpy(np.ascontiguousarray(x_train)),
            y_train=_labels(y_train),
            x_test=torch.from_numpy(np.ascontiguousarray(x_test)),
            y_test=_labels(y_test),
            num_classes=self.num_classes,
            classes=tuple(str(name) for name in bunch.target_names),
            name=self.name,
        )


@dataclass(frozen=True)
class _Mnist(DatasetSpec):
    """MNIST as torchvision stores it: gzip archives and their extracted idx files in ``MNIST/raw``."""

    def problems(self, folder: Path) -> list[Path]:
        raw = self._raw(folder)
        bad = []
        for archive_name, md5 in tvd.MNIST.resources:
            archive = raw / archive_name
            extracted = raw / archive_name.removesuffix(".gz")
            if not tv_utils.check_integrity(archive, md5):
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
        return [folder / name for _, name, md5 in files if not tv_utils.check_integrity(folder / name, md5)]

    def fetch(self, folder: Path) -> None:
        files = (tvd.SVHN.split_list[split] for split in self.splits)
        _fetch_files(([url], folder, filename, md5) for url, filename, md5 in files)

    def read(self, folder: Path) -> Data:
        train = tvd.SVHN(folder, split="train")
        test = tvd.SVHN(folder, split="test")
        return self._data(train.data, train.labels, test.data, test.labels, _DIGIT_CLASSES)


@dataclass(frozen=True)
class _Cifar(DatasetSpec):
    """CIFAR-10 or CIFAR-100 (fine labels), from the python-pickle release."""

    source: type[tvd.CIFAR10]

    def problems(self, folder: Path) -> list[Path]:
        source = self.source
        base = folder / source.base_folder
        # torchvision's own _check_integrity skips the metadata file, which holds the class names.
        expected = [*source.train_list, *source.test_list, (source.meta["filename"], source.meta["md5"])]
        return [base / name for name, md5 in expected if not tv_utils.check_integrity(base / name, md5)]

    def fetch(self, folder: Path) -> None:
        source = self.source
        (archive,) = _fetch_files([([source.url], folder, source.filename, source.tgz_md5)])
        tv_utils.extract_archive(archive, folder)

    def read(self, folder: Path) -> Data:
        train = self.source(folder, train=True)
        test = self.source(folder, train=False)
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


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        _Digits("digits", (1, 8, 8), 10),
        _Mnist("mnist", (1, 28, 28), 10),
        _Svhn("svhn", (3, 32, 32), 10),
        _Cifar("cifar10", (3, 32, 32), 10, tvd.CIFAR10),
        _Cifar("cifar100", (3, 32, 32), 100, tvd.CIFAR100),
    )
}


def dataset_names() -> list[str]:
    return list(DATASETS)


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def _download_command(name: str, root: str | Path) -> str:
    return f"tradeoff download {name} --root {shlex.quote(str(root))}"


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _ensure_downloaded(spec: DatasetSpec, root: str | Path) -> Path:
    folder = spec.folder(root)
    bad = spec.problems(folder)
    errors: list[str] = []
    for _ in range(1 + _RETRIES):
        if not bad:
            return folder
        # Removed first so that no corrupt file outlives a failed fetch.
        _remove(bad)
        try:
            spec.fetch(folder)
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
    folder = spec.folder(root)
    bad = spec.problems(folder)
    if bad:
        raise DatasetError(
            f"dataset {name!r} is missing or corrupt in {folder} (missing or failing the md5 checksum: "
            f"{_names(bad)}); run `{_download_command(name, root)}` to fetch it"
        )
    return spec.read(folder)
