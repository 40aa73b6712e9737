"""tradeoff.data: the digits split, each torchvision on-disk format (tiny generated files), checksums, re-fetch.

The real archives cannot be fetched offline and their checksums cannot be reproduced, so every test writes
a few images in the dataset's real on-disk format and points torchvision's md5 tables at those files.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import struct
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from sklearn.datasets import load_digits
from torchvision import datasets as tvd
from torchvision.datasets import utils as tv_utils

from tradeoff import data
from tradeoff.data import DatasetError

N_TRAIN, N_TEST = 20, 10
IMAGE_DATASETS = ("mnist", "svhn", "cifar10", "cifar100")


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def flip_byte(path: Path) -> None:
    content = bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))


@dataclass
class Written:
    """What a writer put on disk, to compare with what ``load`` returns."""

    x_train: np.ndarray  # uint8, NCHW
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    served: dict[str, Path]  # what a download fetches: file name -> generated file


def random_split(rng: np.random.Generator, shape: tuple[int, int, int], num_classes: int):
    x_train = rng.integers(0, 256, (N_TRAIN, *shape), dtype=np.uint8)
    x_test = rng.integers(0, 256, (N_TEST, *shape), dtype=np.uint8)
    return x_train, rng.integers(0, num_classes, N_TRAIN), x_test, rng.integers(0, num_classes, N_TEST)


def write_mnist(folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> Written:
    """idx-ubyte files, each also gzipped, in ``MNIST/raw`` as torchvision downloads and extracts them."""
    x_train, y_train, x_test, y_test = random_split(rng, (1, 28, 28), 10)
    raw = folder / "MNIST" / "raw"
    raw.mkdir(parents=True)
    contents = {
        "train-images-idx3-ubyte": struct.pack(">IIII", 0x803, N_TRAIN, 28, 28) + x_train.tobytes(),
        "train-labels-idx1-ubyte": struct.pack(">II", 0x801, N_TRAIN) + y_train.astype(np.uint8).tobytes(),
        "t10k-images-idx3-ubyte": struct.pack(">IIII", 0x803, N_TEST, 28, 28) + x_test.tobytes(),
        "t10k-labels-idx1-ubyte": struct.pack(">II", 0x801, N_TEST) + y_test.astype(np.uint8).tobytes(),
    }
    served = {}
    for name, content in contents.items():
        (raw / name).write_bytes(content)
        (raw / f"{name}.gz").write_bytes(gzip.compress(content))
        served[f"{name}.gz"] = raw / f"{name}.gz"
    assert [name for name, _ in tvd.MNIST.resources] == list(served)
    monkeypatch.setattr(tvd.MNIST, "resources", [(name, md5(path)) for name, path in served.items()])
    return Written(x_train, y_train, x_test, y_test, tuple("0123456789"), served)


def write_svhn(folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> Written:
    """``{train,test}_32x32.mat`` with X as H x W x C x N and digit 0 labelled 10, as the originals."""
    x_train, y_train, x_test, y_test = random_split(rng, (3, 32, 32), 10)
    y_train[0] = 0  # stored as label 10
    folder.mkdir(parents=True)
    split_list = dict(tvd.SVHN.split_list)
    served = {}
    for split, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        url, filename, _ = split_list[split]
        path = folder / filename
        labels = np.where(y == 0, 10, y).astype(np.uint8)[:, None]
        scipy.io.savemat(path, {"X": x.transpose(2, 3, 1, 0), "y": labels})
        split_list[split] = [url, filename, md5(path)]
        served[filename] = path
    monkeypatch.setattr(tvd.SVHN, "split_list", split_list)
    return Written(x_train, y_train, x_test, y_test, tuple("0123456789"), served)


def write_cifar(
    source: type[tvd.CIFAR10], folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> Written:
    """The python-pickle release: 3072-byte CHW rows, label lists and a metadata file, plus its tar.gz."""
    hundred = source is tvd.CIFAR100
    num_classes = 100 if hundred else 10
    x_train, y_train, x_test, y_test = random_split(rng, (3, 32, 32), num_classes)
    classes = tuple(f"class{i}" for i in range(num_classes))
    base = folder / source.base_folder
    base.mkdir(parents=True)

    def dump(filename: str, entry: dict) -> tuple[str, str]:
        with open(base / filename, "wb") as f:
            pickle.dump(entry, f, protocol=2)
        return filename, md5(base / filename)

    def batch(x: np.ndarray, y: np.ndarray) -> dict:
        if hundred:
            return {"data": x.reshape(len(x), -1), "fine_labels": y.tolist(), "coarse_labels": (y // 5).tolist()}
        return {"data": x.reshape(len(x), -1), "labels": y.tolist()}

    if hundred:
        train_list = [dump("train", batch(x_train, y_train))]
        test_list = [dump("test", batch(x_test, y_test))]
        meta = dump("meta", {"fine_label_names": list(classes), "coarse_label_names": [f"super{i}" for i in range(20)]})
    else:
        chunks = zip(np.array_split(x_train, 5), np.array_split(y_train, 5))
        train_list = [dump(f"data_batch_{i}", batch(x, y)) for i, (x, y) in enumerate(chunks, start=1)]
        test_list = [dump("test_batch", batch(x_test, y_test))]
        meta = dump("batches.meta", {"label_names": list(classes), "num_vis": 3072})
    assert [name for name, _ in train_list + test_list] == [name for name, _ in source.train_list + source.test_list]

    archive = folder / source.filename
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(base, arcname=source.base_folder)
    monkeypatch.setattr(source, "train_list", [list(entry) for entry in train_list])
    monkeypatch.setattr(source, "test_list", [list(entry) for entry in test_list])
    monkeypatch.setattr(source, "meta", {**source.meta, "md5": meta[1]})
    monkeypatch.setattr(source, "tgz_md5", md5(archive))
    return Written(x_train, y_train, x_test, y_test, classes, {source.filename: archive})


WRITERS: dict[str, Callable[[Path, np.random.Generator, pytest.MonkeyPatch], Written]] = {
    "mnist": write_mnist,
    "svhn": write_svhn,
    "cifar10": lambda *args: write_cifar(tvd.CIFAR10, *args),
    "cifar100": lambda *args: write_cifar(tvd.CIFAR100, *args),
}


def write(name: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> Written:
    return WRITERS[name](root / name, np.random.default_rng(0), monkeypatch)


def assert_matches(loaded: data.Data, written: Written, name: str) -> None:
    spec = data.DATASETS[name]
    assert loaded.name == name
    assert loaded.num_classes == spec.num_classes
    assert loaded.classes == written.classes
    for x, y, x_ref, y_ref in (
        (loaded.x_train, loaded.y_train, written.x_train, written.y_train),
        (loaded.x_test, loaded.y_test, written.x_test, written.y_test),
    ):
        assert x.shape == (len(x_ref), *spec.image_shape)
        assert x.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous()
        assert 0.0 <= x.min() and x.max() <= 1.0
        assert torch.equal(x, torch.from_numpy(x_ref).float() / 255)
        assert y.dtype == torch.int64
        assert torch.equal(y, torch.from_numpy(y_ref).long())


def test_registry_names():
    assert data.dataset_names() == ["digits", "mnist", "svhn", "cifar10", "cifar100", "tinyimagenet",
                                    "tinyimagenet-c", "cub200", "stanford-dogs", "digits-c"]
    assert list(data.DATASETS) == data.dataset_names()


@pytest.mark.parametrize("call", [data.load, data.download, data.is_downloaded])
def test_unknown_name_lists_the_known_ones(call, tmp_path):
    with pytest.raises(DatasetError, match="imagenet") as info:
        call("imagenet", tmp_path)
    assert all(name in str(info.value) for name in data.dataset_names())


def test_digits_fixed_stratified_split(tmp_path):
    digits = data.load("digits", tmp_path)
    assert digits.x_train.shape == (1437, 1, 8, 8) and digits.x_test.shape == (360, 1, 8, 8)
    assert digits.y_train.shape == (1437,) and digits.y_test.shape == (360,)
    assert digits.x_train.dtype == torch.float32 and digits.y_train.dtype == torch.int64
    assert digits.x_train.is_contiguous() and digits.x_test.is_contiguous()
    assert digits.x_train.min() == 0.0 and digits.x_train.max() == 1.0
    assert digits.num_classes == 10 and digits.classes == tuple("0123456789") and digits.name == "digits"

    # The two splits partition the bundled data set.
    bunch = load_digits()
    rows = torch.cat([digits.x_train, digits.x_test]).flatten(1) * 16
    labels = torch.cat([digits.y_train, digits.y_test])
    together = sorted(map(tuple, torch.cat([rows, labels[:, None]], dim=1).tolist()))
    reference = np.concatenate([bunch.data, bunch.target[:, None]], axis=1)
    assert together == sorted(map(tuple, reference.tolist()))

    # Stratified: each class holds 20% of its examples in the test split, up to rounding.
    per_class = np.bincount(bunch.target)
    assert np.all(np.abs(np.bincount(digits.y_test.numpy()) - 0.2 * per_class) <= 1)

    again = data.load("digits", tmp_path)
    assert torch.equal(again.x_train, digits.x_train) and torch.equal(again.y_test, digits.y_test)


def _change_a_label(cache: Path) -> None:
    """Rewrite the kept split as a valid .npz (the zip container intact) with one test label changed."""
    with np.load(cache) as kept:
        arrays = {key: kept[key] for key in kept.files}
    arrays["y_test"] = arrays["y_test"].copy()
    arrays["y_test"][0] = (arrays["y_test"][0] + 1) % 10
    np.savez(cache, **arrays)


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "label changed", "no checksum"])
def test_a_damaged_digits_cache_is_reported_and_made_again(damage, tmp_path, caplog):
    digits = data.load("digits", tmp_path)
    cache = tmp_path / "digits" / "split.npz"
    if damage == "truncated":
        os.truncate(cache, cache.stat().st_size // 2)
    elif damage == "corrupted":
        flip_byte(cache)
    elif damage == "label changed":
        _change_a_label(cache)
    else:  # a cache written before checksums were kept
        with np.load(cache) as kept:
            np.savez(cache, **{key: kept[key] for key in kept.files if key != "sha256"})
    damaged = cache.read_bytes()
    again = data.load("digits", tmp_path)  # no zipfile.BadZipFile, no silently changed label
    assert torch.equal(again.y_test, digits.y_test) and torch.equal(again.x_train, digits.x_train), damage
    assert str(cache) in caplog.text and "making it again" in caplog.text, caplog.text
    assert cache.read_bytes() != damaged  # replaced by a good one, which the next job reads without a word
    caplog.clear()
    assert torch.equal(data.load("digits", tmp_path).y_test, digits.y_test) and "making it again" not in caplog.text


def test_digits_needs_no_download(tmp_path):
    assert not data.DATASETS["digits"].needs_download
    assert data.download("digits", tmp_path) == tmp_path / "digits"
    assert data.is_downloaded("digits", tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", IMAGE_DATASETS)
def test_load_reads_the_real_format(name, tmp_path, monkeypatch):
    written = write(name, tmp_path, monkeypatch)
    assert data.is_downloaded(name, tmp_path)
    assert_matches(data.load(name, tmp_path), written, name)


def test_svhn_label_10_is_digit_0(tmp_path, monkeypatch):
    write("svhn", tmp_path, monkeypatch)
    stored = scipy.io.loadmat(tmp_path / "svhn" / "train_32x32.mat")["y"]
    assert stored[0, 0] == 10 and stored.min() >= 1
    loaded = data.load("svhn", tmp_path)
    assert loaded.y_train[0] == 0 and set(loaded.y_train.tolist()) <= set(range(10))


@pytest.mark.parametrize(
    ("name", "victim"),
    [
        ("mnist", "train-images-idx3-ubyte.gz"),
        ("mnist", "t10k-labels-idx1-ubyte"),  # extracted file, which torchvision itself never checks
        ("svhn", "test_32x32.mat"),
        ("cifar10", "data_batch_3"),
        ("cifar100", "meta"),
    ],
)
def test_corrupt_file_is_refused(name, victim, tmp_path, monkeypatch):
    write(name, tmp_path, monkeypatch)
    (path,) = (tmp_path / name).rglob(victim)
    flip_byte(path)
    assert not data.is_downloaded(name, tmp_path)
    with pytest.raises(DatasetError) as info:
        data.load(name, tmp_path)
    message = str(info.value)
    assert f"run `tradeoff download {name}` (with the same --config files; it fetches into paths.data, here " \
           f"{tmp_path})" in message
    assert victim in message


def test_missing_dataset_names_the_download_command(tmp_path):
    """One sentence naming the folder, a few of the files and the command as it exists (no --root flag)."""
    with pytest.raises(DatasetError) as info:
        data.load("cifar10", tmp_path)
    assert str(info.value) == (
        f"dataset 'cifar10' is not ready in {tmp_path / 'cifar10'}: data_batch_1, data_batch_2, data_batch_3, "
        "data_batch_4 and 3 more missing or failing the md5 checksum; run `tradeoff download cifar10` (with the same "
        f"--config files; it fetches into paths.data, here {tmp_path})")
    assert "--root" not in str(info.value)


class FakeDownloads:
    """Stands in for torchvision's ``download_url``: copies generated files, the first deliveries truncated.

    It checks nothing itself, like a transport that silently delivers a broken file.
    """

    def __init__(self, served: dict[str, Path], corrupt_deliveries: int):
        self.served = served
        self.corrupt_left = dict.fromkeys(served, corrupt_deliveries)
        self.calls: list[str] = []

    def __call__(self, url, root, filename=None, md5=None, max_redirect_hops=3):
        filename = filename or os.path.basename(url)
        self.calls.append(filename)
        content = self.served[filename].read_bytes()
        if self.corrupt_left[filename]:
            self.corrupt_left[filename] -= 1
            content = content[: len(content) // 2]
        os.makedirs(root, exist_ok=True)
        Path(root, filename).write_bytes(content)


def serve(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corrupt_deliveries: int):
    written = write(name, tmp_path / "server", monkeypatch)
    downloads = FakeDownloads(written.served, corrupt_deliveries)
    monkeypatch.setattr(tv_utils, "download_url", downloads)
    return written, downloads


@pytest.mark.parametrize("name", IMAGE_DATASETS)
def test_download_refetches_a_corrupt_transfer(name, tmp_path, monkeypatch):
    written, downloads = serve(name, tmp_path, monkeypatch, corrupt_deliveries=1)
    root = tmp_path / "data"
    assert not data.is_downloaded(name, root)

    assert data.download(name, root) == root / name
    # Every file arrived truncated once, was caught by its checksum and fetched again.
    assert sorted(downloads.calls) == sorted(2 * list(written.served))
    assert data.is_downloaded(name, root)
    assert_matches(data.load(name, root), written, name)

    downloads.calls.clear()
    data.download(name, root)
    assert downloads.calls == []


def test_download_gives_up_when_the_retry_is_corrupt_too(tmp_path, monkeypatch):
    _, downloads = serve("cifar10", tmp_path, monkeypatch, corrupt_deliveries=2)
    root = tmp_path / "data"
    with pytest.raises(DatasetError, match="could not download 'cifar10'"):
        data.download("cifar10", root)
    assert downloads.calls == [tvd.CIFAR10.filename] * 2
    # The broken archive is not left behind, and nothing was extracted from it.
    assert not (root / "cifar10" / tvd.CIFAR10.filename).exists()
    assert not (root / "cifar10" / tvd.CIFAR10.base_folder).exists()


def test_download_repairs_a_corrupted_extracted_file(tmp_path, monkeypatch):
    written, _ = serve("cifar10", tmp_path, monkeypatch, corrupt_deliveries=0)
    root = tmp_path / "data"
    data.download("cifar10", root)
    flip_byte(root / "cifar10" / tvd.CIFAR10.base_folder / "data_batch_2")
    assert not data.is_downloaded("cifar10", root)

    assert_matches(data.load("cifar10", root, download=True), written, "cifar10")
    assert data.is_downloaded("cifar10", root)


def test_declared_split_sizes_cover_every_dataset_with_a_training_split_and_match_the_digits(tmp_path):
    """tradeoff.data.declared declares the sizes that the cost plan, the configuration's check and Generalist need
    without the data: one for every dataset with a training split, and digits' (the one the tests can build at its
    real size: scikit-learn's bundled images) equal to the data."""
    from tradeoff.data.declared import SPLIT_SIZES

    assert data.SPLIT_SIZES is SPLIT_SIZES
    trainable = [name for name in data.dataset_names() if name not in data.corruption_dataset_names()]
    assert list(SPLIT_SIZES) == trainable
    digits = data.load("digits", tmp_path)
    assert SPLIT_SIZES["digits"] == (len(digits.x_train), len(digits.x_test))


def test_every_dataset_registered_is_declared_alike():
    """The configuration checks datasets against tradeoff.data.declared without their code: the registry holds exactly
    the declared datasets, in the declared order, each with the declared image shape and classes, and the datasets of
    corrupted test images are the declared ones, with the declared clean dataset; the decorator refuses a dataset
    nobody declared."""
    from tradeoff.data.corruption_sets import CorruptedTestSets
    from tradeoff.data.declared import DECLARED
    from tradeoff.data.registry import dataset

    assert list(data.DATASETS) == list(DECLARED) == data.dataset_names()
    for name, spec in data.DATASETS.items():
        declared = DECLARED[name]
        assert (spec.image_shape, spec.num_classes) == (declared.image_shape, declared.num_classes), name
        assert isinstance(spec, CorruptedTestSets) == (declared.clean_dataset is not None), name
        if declared.clean_dataset is not None:
            assert data.corruption_dataset(name).clean_dataset == declared.clean_dataset
    with pytest.raises(TypeError, match="declare it in tradeoff.data.declared"):
        dataset("no-such-set")(type(data.DATASETS["digits"]))


def test_the_package_names_each_resolve_in_their_module_without_torch_until_read():
    """tradeoff.data's one table of names: importing the package or reading its split sizes imports no PyTorch;
    every name of the table is its module's, and no module of the package shadows one (``tradeoff.data.download``
    would: a submodule, once imported, is an attribute of the package)."""
    import importlib
    import pkgutil
    import subprocess
    import sys

    import tradeoff.data as package

    code = ("import sys, tradeoff.data as d; d.SPLIT_SIZES; from tradeoff.data import generated; "
            "assert 'torch' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert not modules & set(package._NAMES), modules & set(package._NAMES)
    for name, module in package._NAMES.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError):
        package.no_such_name
