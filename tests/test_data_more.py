"""tradeoff.data: Tiny ImageNet, Tiny-ImageNet-C, CUB-200-2011 and Stanford Dogs from tiny generated archives.

Each writer builds the dataset's real archive (zip or tar, the real folder layout, real JPEG files, the real
index files: wnids.txt and val_annotations.txt, images.txt and friends, the .mat lists) with a few classes and
images, and points the spec's md5 table at it. ``download`` then finds the archive already in place, verifies
it and extracts it; nothing is fetched (any attempt fails the test).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image
from test_data import FakeDownloads, flip_byte, md5
from torchvision import transforms
from torchvision.datasets import utils as tv_utils

from tradeoff import data
from tradeoff.data import DatasetError, archive_sets
from tradeoff.data.archives import Archive
from tradeoff.data.decode import resize_center_crop

NEW_DATASETS = ("tinyimagenet", "tinyimagenet-c", "cub200", "stanford-dogs")
SMALL = 32  # image size of the small CUB / Dogs specs the tests register


def jpeg(rng: np.random.Generator, width: int, height: int, mode: str = "RGB") -> bytes:
    """A real JPEG file of random smooth content (upsampled noise, which JPEG keeps recognisable)."""
    small = rng.integers(0, 256, (max(2, height // 8), max(2, width // 8), 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((width, height), Image.Resampling.BILINEAR).convert(mode)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def decoded(content: bytes, resize: int | None = None) -> np.ndarray:
    """What a file should load as: PIL's RGB decoding, then torchvision's resize + centre crop, as uint8 CHW."""
    image = Image.open(io.BytesIO(content)).convert("RGB")
    if resize is not None:
        transform = transforms.Compose([
            transforms.Resize(round(resize / 0.875), interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(resize),
        ])
        image = transform(image)
    return np.asarray(image).transpose(2, 0, 1)


def make_tar(path: Path, files: dict[str, bytes], mode: str = "w") -> None:
    with tarfile.open(path, mode) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


def make_zip(path: Path, files: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)


@dataclass
class Written:
    """The expected contents of a generated dataset and the archives a download serves."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    served: dict[str, Path]


def patch_archives(monkeypatch: pytest.MonkeyPatch, cls: type, served: dict[str, Path]) -> None:
    archives = tuple(Archive(name, (f"https://example.invalid/{name}",), md5(path))
                     for name, path in served.items())
    assert [a.filename for a in archives] == [a.filename for a in cls.archives]
    monkeypatch.setattr(cls, "archives", archives)


# Tiny ImageNet --------------------------------------------------------------------------------------------------
TINY_WNIDS = ("n09999999", "n01443537", "n02124075")  # wnids.txt is not sorted in the real file either


def write_tinyimagenet(folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> Written:
    base = "tiny-imagenet-200"
    files = {
        f"{base}/wnids.txt": "".join(f"{w}\n" for w in TINY_WNIDS).encode(),
        f"{base}/words.txt": "".join(f"{w}\tthing {i}, other name\n" for i, w in enumerate(TINY_WNIDS)).encode(),
    }
    classes = tuple(sorted(TINY_WNIDS))
    x_train, y_train = [], []
    for label, wnid in enumerate(classes):
        boxes = []
        for i in (0, 1, 10):  # file names sort as text: _0, _1, _10
            name = f"{wnid}_{i}.JPEG"
            content = jpeg(rng, 64, 64, mode="L" if (label, i) == (1, 1) else "RGB")  # Tiny ImageNet has grey images
            files[f"{base}/train/{wnid}/images/{name}"] = content
            boxes.append(f"{name}\t0\t0\t63\t63\n")
            x_train.append(decoded(content))
            y_train.append(label)
        files[f"{base}/train/{wnid}/{wnid}_boxes.txt"] = "".join(boxes).encode()
    annotations, x_test, y_test = [], [], []
    for i, label in enumerate([2, 0, 1, 1, 0]):
        content = jpeg(rng, 64, 64)
        files[f"{base}/val/images/val_{i}.JPEG"] = content
        annotations.append(f"val_{i}.JPEG\t{classes[label]}\t1\t2\t30\t40\n")
        x_test.append(decoded(content))
        y_test.append(label)
    files[f"{base}/val/val_annotations.txt"] = "".join(annotations).encode()
    files[f"{base}/test/images/test_0.JPEG"] = jpeg(rng, 64, 64)
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / "tiny-imagenet-200.zip"
    make_zip(archive, files)
    patch_archives(monkeypatch, archive_sets.TinyImageNet, {archive.name: archive})
    monkeypatch.setitem(data.DATASETS, "tinyimagenet", archive_sets.TinyImageNet("tinyimagenet", (3, 64, 64), len(classes)))
    return Written(np.stack(x_train), np.array(y_train), np.stack(x_test), np.array(y_test), classes,
                   {archive.name: archive})


# Tiny-ImageNet-C ------------------------------------------------------------------------------------------------
def write_tinyimagenet_c(
    folder: Path,
    rng: np.random.Generator,
    monkeypatch: pytest.MonkeyPatch,
    image: Callable[[str, int, str, int], bytes] | None = None,
    per_class: int = 2,
) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """``Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/<file>.JPEG`` for all 15 corruptions and 5 severities.

    ``image(corruption, severity, wnid, index)`` makes each file (random content by default). Returns the expected
    ``(x, y)`` of each set, labels in Tiny ImageNet's (sorted) class order.
    """
    image = image or (lambda *_: jpeg(rng, 64, 64))
    classes = sorted(TINY_WNIDS)
    files, expected = {}, {}
    for corruption in data.CORRUPTIONS:
        for severity in data.SEVERITIES:
            xs, ys = [], []
            for label, wnid in enumerate(classes):
                for i in range(per_class):
                    content = image(corruption, severity, wnid, i)
                    files[f"Tiny-ImageNet-C/{corruption}/{severity}/{wnid}/val_{label * 100 + i}.JPEG"] = content
                    xs.append(decoded(content))
                    ys.append(label)
            expected[(corruption, severity)] = (np.stack(xs), np.array(ys))
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / "Tiny-ImageNet-C.tar"
    make_tar(archive, files)
    patch_archives(monkeypatch, archive_sets.TinyImageNetC, {archive.name: archive})
    monkeypatch.setitem(data.DATASETS, "tinyimagenet-c",
                        archive_sets.TinyImageNetC("tinyimagenet-c", (3, 64, 64), len(classes)))
    return expected


# CUB-200-2011 ---------------------------------------------------------------------------------------------------
CUB_CLASSES = ("Black_footed_Albatross", "Laysan_Albatross", "Sooty_Albatross")


def write_cub(folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, size: int = SMALL,
              num_classes: int = len(CUB_CLASSES)) -> Written:
    base = "CUB_200_2011"
    names = [*CUB_CLASSES, *(f"Bird_{i}" for i in range(len(CUB_CLASSES), num_classes))]
    files = {"attributes.txt": b"1 has_bill_shape::curved\n"}
    images, labels, split = [], [], []
    x_train, y_train, x_test, y_test = [], [], [], []
    image_id = 0
    for label, name in enumerate(names[: len(CUB_CLASSES)]):
        folder_name = f"{label + 1:03d}.{name}"
        for i, (width, height) in enumerate([(50, 37), (30, 44), (41, 41)]):
            image_id += 1
            path = f"{folder_name}/{name}_{i:04d}_{image_id}.jpg"
            content = jpeg(rng, width, height, mode="L" if image_id == 4 else "RGB")
            files[f"{base}/images/{path}"] = content
            is_train = int(i != 1)
            images.append(f"{image_id} {path}\n")
            labels.append(f"{image_id} {label + 1}\n")
            split.append(f"{image_id} {is_train}\n")
            (x_train if is_train else x_test).append(decoded(content, size))
            (y_train if is_train else y_test).append(label)
    files[f"{base}/images.txt"] = "".join(images).encode()
    files[f"{base}/image_class_labels.txt"] = "".join(labels).encode()
    files[f"{base}/train_test_split.txt"] = "".join(split).encode()
    files[f"{base}/classes.txt"] = "".join(f"{i + 1} {i + 1:03d}.{n}\n" for i, n in enumerate(names)).encode()
    files[f"{base}/bounding_boxes.txt"] = b"1 0.0 0.0 10.0 10.0\n"
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / "CUB_200_2011.tgz"
    make_tar(archive, files, "w:gz")
    patch_archives(monkeypatch, archive_sets.Cub, {archive.name: archive})
    if (size, num_classes) != (224, 200):
        monkeypatch.setitem(data.DATASETS, "cub200", archive_sets.Cub("cub200", (3, size, size), num_classes))
    return Written(np.stack(x_train), np.array(y_train), np.stack(x_test), np.array(y_test), tuple(names),
                   {archive.name: archive})


# Stanford Dogs --------------------------------------------------------------------------------------------------
DOG_FOLDERS = ("n02085620-Chihuahua", "n02085782-Japanese_spaniel", "n02116738-African_hunting_dog")


def mat(files: list[str], labels: list[int]) -> bytes:
    """A list file as in lists.tar: file_list and annotation_list cell arrays, 1-based labels."""
    cells = np.empty((len(files), 1), dtype=object)
    annotations = np.empty((len(files), 1), dtype=object)
    for i, name in enumerate(files):
        cells[i, 0] = np.array([name])
        annotations[i, 0] = np.array([name.removesuffix(".jpg")])
    out = io.BytesIO()
    scipy.io.savemat(out, {"file_list": cells, "annotation_list": annotations,
                           "labels": np.array(labels, dtype=np.uint8)[:, None]})
    return out.getvalue()


def write_dogs(folder: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> Written:
    images = {}
    train, test = ([], []), ([], [])
    x_train, y_train, x_test, y_test = [], [], [], []
    for label, dog in enumerate(DOG_FOLDERS):
        wnid = dog.split("-")[0]
        for i, (width, height) in enumerate([(60, 45), (35, 52), (48, 48)]):
            name = f"{dog}/{wnid}_{i}.jpg"
            content = jpeg(rng, width, height)
            images[f"Images/{name}"] = content
            target, xs, ys = (train, x_train, y_train) if i < 2 else (test, x_test, y_test)
            target[0].append(name)
            target[1].append(label + 1)
            xs.append(decoded(content, SMALL))
            ys.append(label)
    # The lists interleave classes; file_list.mat is the union.
    order = [0, 2, 4, 1, 3, 5]
    train = ([train[0][i] for i in order], [train[1][i] for i in order])
    x_train, y_train = [x_train[i] for i in order], [y_train[i] for i in order]
    lists = {
        "file_list.mat": mat(train[0] + test[0], train[1] + test[1]),
        "train_list.mat": mat(*train),
        "test_list.mat": mat(*test),
    }
    folder.mkdir(parents=True, exist_ok=True)
    make_tar(folder / "images.tar", images)
    make_tar(folder / "lists.tar", lists)
    served = {"images.tar": folder / "images.tar", "lists.tar": folder / "lists.tar"}
    patch_archives(monkeypatch, archive_sets.StanfordDogs, served)
    monkeypatch.setitem(data.DATASETS, "stanford-dogs",
                        archive_sets.StanfordDogs("stanford-dogs", (3, SMALL, SMALL), len(DOG_FOLDERS)))
    return Written(np.stack(x_train), np.array(y_train), np.stack(x_test), np.array(y_test),
                   tuple(dog.split("-", 1)[1] for dog in DOG_FOLDERS), served)


WRITERS = {"tinyimagenet": write_tinyimagenet, "cub200": write_cub, "stanford-dogs": write_dogs}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Nothing is downloaded: like torchvision's ``download_url``, an intact file in place is kept; any other
    fetch that the test does not serve fails."""

    def refuse(url, root, filename=None, md5=None, max_redirect_hops=3):
        if not tv_utils.check_integrity(Path(root, filename or os.path.basename(url)), md5):
            raise OSError(f"offline: would download {url}")

    monkeypatch.setattr(tv_utils, "download_url", refuse)


def written(name: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> Written:
    """Generate ``name`` with its archives in place and extract it through ``download``."""
    out = WRITERS[name](root / name, np.random.default_rng(0), monkeypatch)
    assert data.download(name, root) == root / name
    return out


def assert_loads_as(loaded: data.Data, expected: Written, name: str) -> None:
    spec = data.DATASETS[name]
    assert loaded.name == name and loaded.num_classes == spec.num_classes == len(expected.classes)
    assert loaded.classes == expected.classes
    for x, y, x_ref, y_ref in ((loaded.x_train, loaded.y_train, expected.x_train, expected.y_train),
                               (loaded.x_test, loaded.y_test, expected.x_test, expected.y_test)):
        assert x.shape == (len(x_ref), *spec.image_shape) and x.dtype == torch.float32 and x.is_contiguous()
        assert torch.equal(x, torch.from_numpy(x_ref).float() / 255)
        assert y.dtype == torch.int64 and torch.equal(y, torch.from_numpy(y_ref).long())


def test_registry_adds_the_new_datasets():
    names = data.dataset_names()
    assert names[:5] == ["digits", "mnist", "svhn", "cifar10", "cifar100"]
    assert names[5:] == [*NEW_DATASETS, "digits-c"]  # digits-c is built locally: tests/test_digits_c.py
    shapes = {name: (data.DATASETS[name].image_shape, data.DATASETS[name].num_classes) for name in NEW_DATASETS}
    assert shapes == {
        "tinyimagenet": ((3, 64, 64), 200),
        "tinyimagenet-c": ((3, 64, 64), 200),
        "cub200": ((3, 224, 224), 200),
        "stanford-dogs": ((3, 224, 224), 120),
    }
    assert all(data.DATASETS[name].needs_download for name in NEW_DATASETS)


def test_known_checksums():
    """The archives' md5s are the published ones (see the specs' docstrings for Tiny-ImageNet-C's)."""
    tables = {spec.name: [(a.filename, a.md5) for a in spec.archives]
              for spec in map(data.DATASETS.get, NEW_DATASETS)}
    assert tables == {
        "tinyimagenet": [("tiny-imagenet-200.zip", "90528d7ca1a48142e341f4ef8d21d0de")],
        "tinyimagenet-c": [("Tiny-ImageNet-C.tar", "f9c9a9dbdc11469f0b850190f7ad8be1")],
        "cub200": [("CUB_200_2011.tgz", "97eceeb196236b17998738112f37df78")],
        "stanford-dogs": [("images.tar", "1bb1f2a596ae7057f99d7d75860002ef"),
                          ("lists.tar", "edbb9f16854ec66506b5f09b583e0656")],
    }


@pytest.mark.parametrize("name", list(WRITERS))
def test_load_reads_the_real_layout(name, tmp_path, monkeypatch):
    expected = written(name, tmp_path, monkeypatch)
    assert data.is_downloaded(name, tmp_path)
    assert_loads_as(data.load(name, tmp_path), expected, name)


def test_cub_at_the_registered_224_pixels(tmp_path, monkeypatch):
    """The registered spec: 224 x 224 (resize 256, centre crop 224), 200 classes from classes.txt."""
    expected = write_cub(tmp_path / "cub200", np.random.default_rng(1), monkeypatch, size=224, num_classes=200)
    loaded = data.load("cub200", tmp_path, download=True)
    assert loaded.x_train.shape == (6, 3, 224, 224) and loaded.x_test.shape == (3, 3, 224, 224)
    assert len(loaded.classes) == 200 and loaded.classes[:3] == CUB_CLASSES
    assert_loads_as(loaded, expected, "cub200")


def test_resize_matches_torchvision_for_both_orientations():
    rng = np.random.default_rng(2)
    for width, height in [(500, 333), (333, 500), (224, 224), (300, 257)]:
        image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        ours = np.asarray(resize_center_crop(image, 224))
        reference = transforms.CenterCrop(224)(
            transforms.Resize(256, interpolation=transforms.InterpolationMode.BICUBIC)(image))
        assert ours.shape == (224, 224, 3) and np.array_equal(ours, np.asarray(reference))


def test_tinyimagenet_splits_and_class_order(tmp_path, monkeypatch):
    written("tinyimagenet", tmp_path, monkeypatch)
    loaded = data.load("tinyimagenet", tmp_path)
    assert loaded.classes == tuple(sorted(TINY_WNIDS))  # sorted, not wnids.txt's order
    assert loaded.y_train.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert loaded.y_test.tolist() == [2, 0, 1, 1, 0]  # val/ is the test split, in annotation order
    assert len(loaded.x_train) == 9 and len(loaded.x_test) == 5  # test/ (unlabelled) is not read


def test_cache_is_used_and_invalidated_when_the_source_changes(tmp_path, monkeypatch):
    written("tinyimagenet", tmp_path, monkeypatch)
    first = data.load("tinyimagenet", tmp_path)
    caches = list((tmp_path / "tinyimagenet").glob("*.npz"))
    assert [path.name for path in caches] == ["tinyimagenet-64x64-uint8.npz"]

    calls = []
    real_decode = archive_sets.decode
    monkeypatch.setattr(archive_sets, "decode", lambda *args: calls.append(args) or real_decode(*args))
    again = data.load("tinyimagenet", tmp_path)
    assert calls == [] and torch.equal(again.x_train, first.x_train) and torch.equal(again.y_test, first.y_test)

    # Rewriting a source image with the same size (a red JPEG padded after its end marker, which decoders ignore)
    # changes its mtime: the cache is rebuilt from the files.
    image = tmp_path / "tinyimagenet" / "tiny-imagenet-200" / "val" / "images" / "val_0.JPEG"
    size = image.stat().st_size
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (255, 0, 0)).save(buffer, "JPEG", quality=90)
    assert len(buffer.getvalue()) < size
    image.write_bytes(buffer.getvalue().ljust(size, b"\0"))
    os.utime(image, ns=(image.stat().st_atime_ns, image.stat().st_mtime_ns + 10**9))
    assert data.is_downloaded("tinyimagenet", tmp_path)
    rebuilt = data.load("tinyimagenet", tmp_path)
    assert len(calls) == 2  # train and test decoded again
    assert torch.allclose(rebuilt.x_test[0, 0], torch.ones(64, 64), atol=0.02)
    assert torch.equal(rebuilt.x_test[1:], first.x_test[1:]) and torch.equal(rebuilt.x_train, first.x_train)


def test_a_stale_cache_from_another_preprocessing_is_not_used(tmp_path, monkeypatch):
    written("cub200", tmp_path, monkeypatch)
    first = data.load("cub200", tmp_path)
    cache = tmp_path / "cub200" / f"cub200-{SMALL}x{SMALL}-uint8.npz"
    with np.load(cache) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays["x_train"] = np.zeros_like(arrays["x_train"])
    arrays["fingerprint"] = np.array("something else")
    np.savez(cache, **arrays)
    assert torch.equal(data.load("cub200", tmp_path).x_train, first.x_train)


def test_a_cache_whose_arrays_were_changed_is_not_used(tmp_path, monkeypatch, caplog):
    written("cub200", tmp_path, monkeypatch)
    first = data.load("cub200", tmp_path)
    cache = tmp_path / "cub200" / f"cub200-{SMALL}x{SMALL}-uint8.npz"
    with np.load(cache) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays["y_test"] = arrays["y_test"].copy()
    arrays["y_test"][0] += 1  # a valid file, the fingerprint of its sources intact: only the checksum tells
    np.savez(cache, **arrays)
    assert torch.equal(data.load("cub200", tmp_path).y_test, first.y_test)
    assert f"{cache} does not match its checksum" in caplog.text


@pytest.mark.parametrize("name", NEW_DATASETS)
def test_missing_dataset_names_the_download_command(name, tmp_path):
    assert not data.is_downloaded(name, tmp_path)
    with pytest.raises(DatasetError, match=re.escape(f"run `tradeoff download {name}` (with the same --config files; "
                                                     f"it fetches into paths.data, here {tmp_path})")):
        data.load(name, tmp_path)


@pytest.mark.parametrize(
    ("name", "victim"),
    [
        ("tinyimagenet", "n01443537_10.JPEG"),
        ("tinyimagenet", "val_annotations.txt"),
        ("cub200", "images.txt"),
        ("stanford-dogs", "n02085620_1.jpg"),
        ("stanford-dogs", "test_list.mat"),
    ],
)
@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_damaged_extracted_file_is_refused_and_repaired(name, victim, damage, tmp_path, monkeypatch):
    expected = written(name, tmp_path, monkeypatch)
    (path,) = (tmp_path / name).rglob(victim)
    if damage == "delete":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-3])
    assert not data.is_downloaded(name, tmp_path)
    with pytest.raises(DatasetError) as info:
        data.load(name, tmp_path)
    message = str(info.value)
    assert f"run `tradeoff download {name}` (with" in message and victim in message
    # The verified archive is still there: download extracts it again without fetching anything.
    assert_loads_as(data.load(name, tmp_path, download=True), expected, name)


def test_corrupt_archive_is_never_extracted(tmp_path, monkeypatch):
    write_cub(tmp_path / "cub200", np.random.default_rng(0), monkeypatch)
    flip_byte(tmp_path / "cub200" / "CUB_200_2011.tgz")
    with pytest.raises(DatasetError, match="CUB_200_2011.tgz") as info:
        data.load("cub200", tmp_path)
    assert "tradeoff download cub200" in str(info.value)
    with pytest.raises(DatasetError, match="could not download 'cub200'"):
        data.download("cub200", tmp_path)
    assert not (tmp_path / "cub200" / "CUB_200_2011").exists()
    assert not (tmp_path / "cub200" / "CUB_200_2011.tgz").exists()  # deleted, not kept


@pytest.mark.parametrize("name", ["tinyimagenet", "stanford-dogs"])
def test_download_refetches_a_corrupt_transfer(name, tmp_path, monkeypatch):
    expected = WRITERS[name](tmp_path / "server", np.random.default_rng(0), monkeypatch)
    downloads = FakeDownloads(expected.served, corrupt_deliveries=1)
    monkeypatch.setattr(tv_utils, "download_url", downloads)
    root = tmp_path / "data"
    assert data.download(name, root) == root / name
    assert sorted(downloads.calls) == sorted(2 * list(expected.served))
    assert_loads_as(data.load(name, root), expected, name)
    downloads.calls.clear()
    data.download(name, root)
    assert downloads.calls == []


def test_undecodable_image_names_the_file(tmp_path, monkeypatch):
    written("stanford-dogs", tmp_path, monkeypatch)
    (path,) = (tmp_path / "stanford-dogs").rglob("n02085782_0.jpg")
    size = path.stat().st_size
    path.write_bytes(b"\0" * size)  # same size: passes the layout check, fails decoding
    with pytest.raises(DatasetError, match="n02085782_0.jpg") as info:
        data.load("stanford-dogs", tmp_path)
    assert "tradeoff download stanford-dogs" in str(info.value)


def test_tinyimagenet_c_is_not_a_training_set(tmp_path, monkeypatch):
    write_tinyimagenet_c(tmp_path / "tinyimagenet-c", np.random.default_rng(0), monkeypatch, per_class=1)
    data.download("tinyimagenet-c", tmp_path)
    with pytest.raises(DatasetError, match="load_corruptions"):
        data.load("tinyimagenet-c", tmp_path)


def test_load_corruptions_aligns_labels_with_tinyimagenet(tmp_path, monkeypatch):
    written("tinyimagenet", tmp_path, monkeypatch)
    expected = write_tinyimagenet_c(tmp_path / "tinyimagenet-c", np.random.default_rng(3), monkeypatch)
    data.download("tinyimagenet-c", tmp_path)
    sets = data.load_corruptions(tmp_path)
    assert list(sets) == [(c, s) for c in data.CORRUPTIONS for s in data.SEVERITIES] and len(sets) == 75
    assert sets.classes == data.load("tinyimagenet", tmp_path).classes
    for key in [("gaussian_noise", 1), ("gaussian_noise", 5), ("fog", 3), ("jpeg_compression", 2)]:
        x, y = sets[key]
        x_ref, y_ref = expected[key]
        assert x.shape == (6, 3, 64, 64) and x.dtype == torch.float32
        assert torch.equal(x, torch.from_numpy(x_ref).float() / 255)
        assert torch.equal(y, torch.from_numpy(y_ref))
    assert (tmp_path / "tinyimagenet-c" / "cache" / "fog-uint8.npz").is_file()
    with pytest.raises(KeyError):
        sets[("fog", 6)]


def test_load_corruptions_needs_tinyimagenet_and_checks_its_arguments(tmp_path, monkeypatch):
    write_tinyimagenet_c(tmp_path / "tinyimagenet-c", np.random.default_rng(0), monkeypatch, per_class=1)
    data.download("tinyimagenet-c", tmp_path)
    with pytest.raises(DatasetError, match=re.escape(f"run `tradeoff download tinyimagenet` (with the same --config "
                                                     f"files; it fetches into paths.data, here {tmp_path})")):
        data.load_corruptions(tmp_path)
    with pytest.raises(DatasetError, match="unknown corruptions"):
        data.load_corruptions(tmp_path, corruptions=["gaussian_blur"])
    with pytest.raises(DatasetError, match="severities"):
        data.load_corruptions(tmp_path, severities=[0])
