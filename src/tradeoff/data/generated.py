"""Generated datasets in each dataset's real on-disk format, for the rehearsal scale (config/rehearsal.yaml).

The rehearsal runs the paper-scale catalog with its amounts capped, on a machine that cannot download the datasets
(or should not, for a rehearsal). ``write(name, folder)`` writes a small dataset in the very format the real
download leaves behind (CIFAR's python pickles, SVHN's ``.mat``, MNIST's gzipped idx files, the Tiny-ImageNet zip,
the Tiny-ImageNet-C tar, CUB-200-2011's tgz and Stanford Dogs' two tars), so that ``tradeoff.data``'s real readers,
extraction, manifests, decoding and caches run on it. Images are seeded noise around a colour and a stripe pattern
of their class, so that a model can learn something; labels cover every class.

The published checksums cannot match generated files, so ``write`` leaves ``GENERATED.json`` in the dataset's folder:
it says the files are generated, by what, and the md5 of every file that the reader verifies. ``tradeoff.data``
verifies generated files against it, and only under a ``GeneratedDataRoot`` (the data root of a scale whose
``scale_map.generated_data`` is true); any other root refuses a folder that holds the marker.

Sizes are small but not degenerate: enough training images for two steps of the catalog's largest batch (1024), and
every class present in both splits where the dataset has few images per class.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tradeoff.data.hendrycks import CORRUPTIONS, SEVERITIES
from tradeoff.data.roots import MARKER

VERSION = 1
SEED = 0

# Enough for two steps of the catalog's largest batch (CA-AT's 1024): the rehearsal's steps_per_epoch cap.
SMALL_TRAIN, SMALL_TEST = 2048, 512


def _images(rng: np.random.Generator, labels: np.ndarray, classes: int, shape: tuple[int, int, int]) -> np.ndarray:
    """uint8 N x H x W x C images: a class colour, a class stripe period, noise."""
    height, width, channels = shape
    colours = np.random.default_rng(SEED + classes).integers(40, 216, size=(classes, channels))
    periods = 2 + labels % 7
    ramp = (np.arange(width)[None, :] // periods[:, None]) % 2  # N x W stripes
    base = colours[labels][:, None, None, :] + 30 * ramp[:, None, :, None]
    noise = rng.normal(0, 25, size=(len(labels), height, width, channels))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _labels(rng: np.random.Generator, n: int, classes: int) -> np.ndarray:
    """Every class, then uniform draws, shuffled."""
    labels = np.concatenate([np.arange(min(n, classes)), rng.integers(0, classes, size=max(0, n - classes))])
    return rng.permutation(labels).astype(np.int64)


def md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _jpeg(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _tar(path: Path, members: dict[str, bytes]) -> None:
    """A tar (gzipped when the name ends in .tgz/.tar.gz) of ``members``, with fixed metadata."""
    mode = "w:gz" if path.name.endswith((".tgz", ".tar.gz")) else "w"
    with tarfile.open(path, mode) as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(payload), 0, 0o644
            tar.addfile(info, io.BytesIO(payload))


# ---------------------------------------------------------------------------------------------------------------
# One writer per format. Each returns the files (relative to the dataset's folder) that the reader verifies.


def _cifar(folder: Path, rng: np.random.Generator, *, classes: int) -> list[str]:
    """CIFAR's python release, extracted (torchvision verifies the extracted pickles, not the tar.gz)."""
    base = "cifar-10-batches-py" if classes == 10 else "cifar-100-python"
    (folder / base).mkdir(parents=True, exist_ok=True)
    label_key = "labels" if classes == 10 else "fine_labels"

    def batch(name: str, n: int) -> str:
        labels = _labels(rng, n, classes)
        images = _images(rng, labels, classes, (32, 32, 3))
        entry = {"batch_label": f"generated {name}", label_key: labels.tolist(),
                 "data": images.transpose(0, 3, 1, 2).reshape(n, 3072),
                 "filenames": [f"generated_{name}_{i}.png" for i in range(n)]}
        if classes == 100:
            entry["coarse_labels"] = (labels // 5).tolist()
        (folder / base / name).write_bytes(pickle.dumps(entry, protocol=2))
        return f"{base}/{name}"

    if classes == 10:
        files = [batch(f"data_batch_{i}", -(-SMALL_TRAIN // 5)) for i in range(1, 6)] + [batch("test_batch", SMALL_TEST)]
        meta, names = "batches.meta", {"label_names": [f"class{i}" for i in range(10)]}
    else:
        files = [batch("train", SMALL_TRAIN), batch("test", SMALL_TEST)]
        meta = "meta"
        names = {"fine_label_names": [f"class{i}" for i in range(100)],
                 "coarse_label_names": [f"superclass{i}" for i in range(20)]}
    (folder / base / meta).write_bytes(pickle.dumps(names, protocol=2))
    return [*files, f"{base}/{meta}"]


def _svhn(folder: Path, rng: np.random.Generator) -> list[str]:
    """SVHN's cropped digits: X is 32 x 32 x 3 x N, y is N x 1 with 10 for the digit 0."""
    from scipy.io import savemat

    files = []
    for name, n in (("train_32x32.mat", SMALL_TRAIN), ("test_32x32.mat", SMALL_TEST)):
        labels = _labels(rng, n, 10)
        images = _images(rng, labels, 10, (32, 32, 3))
        savemat(folder / name, {"X": images.transpose(1, 2, 3, 0), "y": np.where(labels == 0, 10, labels)[:, None]})
        files.append(name)
    return files


def _mnist(folder: Path, rng: np.random.Generator) -> list[str]:
    """MNIST's idx files, gzipped as distributed and extracted next to the archives (torchvision's raw folder)."""
    raw = folder / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    files = []
    for prefix, n in (("train", SMALL_TRAIN), ("t10k", SMALL_TEST)):
        labels = _labels(rng, n, 10)
        images = _images(rng, labels, 10, (28, 28, 1))[..., 0]
        for kind, payload in (("images-idx3-ubyte", struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes()),
                              ("labels-idx1-ubyte", struct.pack(">II", 2049, n) + labels.astype(np.uint8).tobytes())):
            name = f"{prefix}-{kind}"
            (raw / name).write_bytes(payload)
            (raw / f"{name}.gz").write_bytes(gzip.compress(payload, mtime=0))
            files.append(f"MNIST/raw/{name}.gz")
    return files


def _wnids(count: int) -> list[str]:
    return [f"n{90000000 + i:08d}" for i in range(count)]


def _tinyimagenet(folder: Path, rng: np.random.Generator, *, per_class: int = 6, val_per_class: int = 2) -> list[str]:
    """tiny-imagenet-200.zip: wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG and val_annotations.txt."""
    wnids, base, members = _wnids(200), "tiny-imagenet-200", {}
    members[f"{base}/wnids.txt"] = "".join(f"{w}\n" for w in wnids).encode()
    for label, wnid in enumerate(wnids):
        images = _images(rng, np.full(per_class, label), 200, (64, 64, 3))
        for i, pixels in enumerate(images):
            members[f"{base}/train/{wnid}/images/{wnid}_{i}.JPEG"] = _jpeg(pixels)
    val_labels = np.repeat(np.arange(200), val_per_class)
    annotations = []
    for i, (label, pixels) in enumerate(zip(val_labels, _images(rng, val_labels, 200, (64, 64, 3)))):
        members[f"{base}/val/images/val_{i}.JPEG"] = _jpeg(pixels)
        annotations.append(f"val_{i}.JPEG\t{wnids[label]}\t0\t0\t63\t63\n")
    members[f"{base}/val/val_annotations.txt"] = "".join(annotations).encode()
    with zipfile.ZipFile(folder / "tiny-imagenet-200.zip", "w") as archive:
        for name, payload in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), payload)
    return ["tiny-imagenet-200.zip"]


def _tinyimagenet_c(folder: Path, rng: np.random.Generator, *, classes: int = 20) -> list[str]:
    """Tiny-ImageNet-C.tar: Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG for every corruption and severity,
    one image of each of the first ``classes`` Tiny-ImageNet classes (the reader accepts a subset of the classes)."""
    wnids, members = _wnids(200)[:classes], {}
    labels = np.arange(classes)
    for corruption in CORRUPTIONS:
        for severity in SEVERITIES:
            for label, pixels in zip(labels, _images(rng, labels, 200, (64, 64, 3))):
                members[f"Tiny-ImageNet-C/{corruption}/{severity}/{wnids[label]}/img_{label}.JPEG"] = _jpeg(pixels)
    _tar(folder / "Tiny-ImageNet-C.tar", members)
    return ["Tiny-ImageNet-C.tar"]


# Fine-grained photos are larger than the 224 x 224 crop and not square: the reader resizes and crops them.
_PHOTO = (250, 300, 3)


def _cub(folder: Path, rng: np.random.Generator, *, train_per_class: int = 2, test_per_class: int = 1) -> list[str]:
    """CUB_200_2011.tgz: images.txt, image_class_labels.txt, train_test_split.txt, classes.txt, images/<class>/."""
    base, members = "CUB_200_2011", {}
    names = [f"{i + 1:03d}.Generated_bird_{i + 1}" for i in range(200)]
    images, labels, split = [], [], []
    for label in range(200):
        for j in range(train_per_class + test_per_class):
            path = f"{names[label]}/{names[label].split('.', 1)[1]}_{j}.jpg"
            images.append(path), labels.append(label), split.append(int(j < train_per_class))
    pixels = _images(rng, np.array(labels), 200, _PHOTO)
    for path, image in zip(images, pixels):
        members[f"{base}/images/{path}"] = _jpeg(image)

    def table(values) -> bytes:
        return "".join(f"{i + 1} {value}\n" for i, value in enumerate(values)).encode()

    members[f"{base}/images.txt"] = table(images)
    members[f"{base}/image_class_labels.txt"] = table(label + 1 for label in labels)
    members[f"{base}/train_test_split.txt"] = table(split)
    members[f"{base}/classes.txt"] = table(names)
    _tar(folder / "CUB_200_2011.tgz", members)
    return ["CUB_200_2011.tgz"]


def _stanford_dogs(folder: Path, rng: np.random.Generator, *, train_per_class: int = 3,
                   test_per_class: int = 1) -> list[str]:
    """images.tar (Images/<wnid>-<breed>/*.jpg) and lists.tar (train_list.mat, test_list.mat: file_list, labels)."""
    from scipy.io import savemat

    breeds = [f"n{2085000 + i:08d}-Generated_dog_{i + 1}" for i in range(120)]
    members, lists = {}, {"train": ([], []), "test": ([], [])}
    for label, breed in enumerate(breeds):
        pixels = _images(rng, np.full(train_per_class + test_per_class, label), 120, _PHOTO)
        for j, image in enumerate(pixels):
            name = f"{breed}/{breed.split('-')[0]}_{j}.jpg"
            members[f"Images/{name}"] = _jpeg(image)
            files, labels = lists["train" if j < train_per_class else "test"]
            files.append(name), labels.append(label + 1)
    _tar(folder / "images.tar", members)
    mats = {}
    for split, (files, labels) in lists.items():
        buffer = io.BytesIO()
        cells = np.empty((len(files), 1), dtype=object)
        for i, name in enumerate(files):
            cells[i, 0] = np.array([name])
        savemat(buffer, {"file_list": cells, "labels": np.array(labels, dtype=np.uint8)[:, None]})
        mats[f"{split}_list.mat"] = buffer.getvalue()
    _tar(folder / "lists.tar", mats)
    return ["images.tar", "lists.tar"]


WRITERS: dict[str, Callable[[Path, np.random.Generator], list[str]]] = {
    "cifar10": lambda folder, rng: _cifar(folder, rng, classes=10),
    "cifar100": lambda folder, rng: _cifar(folder, rng, classes=100),
    "svhn": _svhn,
    "mnist": _mnist,
    "tinyimagenet": _tinyimagenet,
    "tinyimagenet-c": _tinyimagenet_c,
    "cub200": _cub,
    "stanford-dogs": _stanford_dogs,
}


def write(name: str, folder: str | Path) -> dict[str, str]:
    """Write generated dataset ``name`` into ``folder`` in its real format and the marker naming its files as
    generated; returns {file relative to ``folder``: md5}. Deterministic (seeded by the dataset's name)."""
    if name not in WRITERS:
        raise KeyError(f"no generator for dataset {name!r}; generated: {', '.join(WRITERS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([SEED, *name.encode()])
    checksums = {relative: md5(folder / relative) for relative in WRITERS[name](folder, rng)}
    marker = {"generated": True, "dataset": name, "generator": "tradeoff.data.generated", "version": VERSION,
              "seed": SEED, "note": "generated files in the dataset's format for the rehearsal scale; not the dataset",
              "md5": checksums}
    (folder / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    return checksums


def checksums(folder: Path) -> dict[str, str] | None:
    """The md5 of every generated file of the dataset in ``folder``; None when it holds no generated dataset."""
    try:
        return dict(json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))["md5"])
    except FileNotFoundError:
        return None
