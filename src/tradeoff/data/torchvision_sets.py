"""The small image datasets: scikit-learn's bundled 8x8 digits (split here, once, and kept), and MNIST, SVHN,
CIFAR-10 and CIFAR-100, fetched and parsed by torchvision and verified against torchvision's md5 checksums (or, under
a ``GeneratedDataRoot``, against the generated files' own)."""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.data.cache import UNREADABLE_CACHE, arrays_digest
from tradeoff.data.fetch import expected_md5, fetch_files, generated_md5s
from tradeoff.data.registry import Data, DatasetSpec, dataset, label_tensor
from tradeoff.storage.atomic import WriteError, atomic_write_bytes

tvd = LazyModule("torchvision.datasets")
tv_utils = LazyModule("torchvision.datasets.utils")
_sk_datasets = LazyModule("sklearn.datasets")
_sk_model_selection = LazyModule("sklearn.model_selection")

_log = logging.getLogger(__name__)

DIGIT_CLASSES = tuple(str(digit) for digit in range(10))


@dataset("digits")
@dataclass(frozen=True)
class Digits(DatasetSpec):
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
            y_train=label_tensor(arrays["y_train"]),
            x_test=torch.from_numpy(arrays["x_test"].astype(np.float32) / 16.0),
            y_test=label_tensor(arrays["y_test"]),
            num_classes=self.num_classes,
            classes=DIGIT_CLASSES,
            name=self.name,
        )

    def _split(self, folder: Path) -> dict[str, np.ndarray]:
        """The split, from ``folder/split.npz`` when scikit-learn's version made it, else made and kept there.

        Every demo job reads digits; importing scikit-learn (and SciPy) to redo the split costs each of them ~2 s
        of CPU, reading the kept arrays ~1 ms. The split depends on scikit-learn's data and ``train_test_split``,
        so a cache written by another version is made again."""
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
        except UNREADABLE_CACHE as err:  # truncated, corrupted (zip CRC), or of an older layout (no checksum)
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


@dataset("mnist")
@dataclass(frozen=True)
class Mnist(DatasetSpec):
    """MNIST as torchvision stores it: gzip archives and their extracted idx files in ``MNIST/raw``."""

    def problems(self, folder: Path) -> list[Path]:
        raw = self._raw(folder)
        bad = []
        for archive_name, md5 in tvd.MNIST.resources:
            archive = raw / archive_name
            extracted = raw / archive_name.removesuffix(".gz")
            if not tv_utils.check_integrity(archive, expected_md5(folder, f"MNIST/raw/{archive_name}", md5)):
                bad += [archive, extracted]
            # torchvision reads the extracted files without checking them; they must match the verified
            # archive, or an interrupted extraction would be read as data.
            elif not extracted.is_file() or tv_utils.calculate_md5(extracted) != _gunzipped_md5(archive):
                bad.append(extracted)
        return bad

    def fetch(self, folder: Path) -> None:
        raw = self._raw(folder)
        archives = fetch_files(
            ([mirror + archive_name for mirror in tvd.MNIST.mirrors], raw, archive_name, md5)
            for archive_name, md5 in tvd.MNIST.resources
        )
        for archive in archives:
            tv_utils.extract_archive(archive, raw)

    def read(self, folder: Path) -> Data:
        train = tvd.MNIST(folder, train=True)
        test = tvd.MNIST(folder, train=False)
        x_train, x_test = train.data.numpy()[:, None], test.data.numpy()[:, None]
        return self._data(x_train, train.targets.numpy(), x_test, test.targets.numpy(), DIGIT_CLASSES)

    @staticmethod
    def _raw(folder: Path) -> Path:
        return folder / "MNIST" / "raw"


def _gunzipped_md5(archive: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with gzip.open(archive, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataset("svhn")
@dataclass(frozen=True)
class Svhn(DatasetSpec):
    """SVHN cropped digits (train and test splits; torchvision maps label 10 to digit 0)."""

    splits = ("train", "test")

    def problems(self, folder: Path) -> list[Path]:
        files = (tvd.SVHN.split_list[split] for split in self.splits)
        return [folder / name for _, name, md5 in files
                if not tv_utils.check_integrity(folder / name, expected_md5(folder, name, md5))]

    def fetch(self, folder: Path) -> None:
        files = (tvd.SVHN.split_list[split] for split in self.splits)
        fetch_files(([url], folder, filename, md5) for url, filename, md5 in files)

    def read(self, folder: Path) -> Data:
        source = tvd.SVHN
        if generated_md5s(folder) is not None:  # torchvision's reader checks the md5s too: the generated files'
            source = type("GeneratedSVHN", (source,), {"split_list": {
                split: [url, name, expected_md5(folder, name, md5)]
                for split, (url, name, md5) in source.split_list.items()}})
        train = source(folder, split="train")
        test = source(folder, split="test")
        return self._data(train.data, train.labels, test.data, test.labels, DIGIT_CLASSES)


# decorators apply from the bottom up: cifar10 is registered before cifar100
@dataset("cifar100", source_name="CIFAR100")
@dataset("cifar10", source_name="CIFAR10")
@dataclass(frozen=True)
class Cifar(DatasetSpec):
    """CIFAR-10 or CIFAR-100 (fine labels), from the python-pickle release."""

    source_name: str  # the torchvision class: CIFAR10 or CIFAR100

    @property
    def source(self) -> type:
        return getattr(tvd, self.source_name)

    def _reader(self, folder: Path) -> type:
        """torchvision's class, which checks the pickles' md5s itself: for a generated dataset, with its md5s."""
        source = self.source
        if generated_md5s(folder) is None:
            return source

        def files(entries: list) -> list[list[str]]:
            return [[name, expected_md5(folder, f"{source.base_folder}/{name}", md5)] for name, md5 in entries]

        meta = {**source.meta, "md5": expected_md5(folder, f"{source.base_folder}/{source.meta['filename']}",
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
        (archive,) = fetch_files([([source.url], folder, source.filename, source.tgz_md5)])
        tv_utils.extract_archive(archive, folder)

    def read(self, folder: Path) -> Data:
        reader = self._reader(folder)
        train = reader(folder, train=True)
        test = reader(folder, train=False)
        # torchvision keeps CIFAR images as N x H x W x C.
        x_train, x_test = train.data.transpose(0, 3, 1, 2), test.data.transpose(0, 3, 1, 2)
        return self._data(x_train, train.targets, x_test, test.targets, train.classes)
