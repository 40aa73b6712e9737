"""The datasets shipped as archives of image files, which torchvision does not ship: Tiny ImageNet, Tiny-ImageNet-C,
CUB-200-2011 and Stanford Dogs. Each archive is md5-checked before extraction and the extracted files against its
manifest (:mod:`tradeoff.data.archives`); the decoded images are cached next to the data
(:mod:`tradeoff.data.cache`), keyed by the size and modification time of every file of the manifests and the
preprocessing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.data.archives import Archive, extract, extraction_problems, manifest_path, read_manifest
from tradeoff.data.cache import cached, fingerprint
from tradeoff.data.corruption_sets import CorruptedTestSets, CorruptionSets
from tradeoff.data.decode import decode
from tradeoff.data.fetch import download_command, expected_md5, fetch_files, verified_folder
from tradeoff.data.registry import DATASETS, Data, DatasetError, DatasetSpec, dataset
from tradeoff.data.roots import MARKER as GENERATED_MARKER

tv_utils = LazyModule("torchvision.datasets.utils")
_scipy_io = LazyModule("scipy.io")


@dataclass(frozen=True)
class ArchiveImages(DatasetSpec):
    """A dataset of image files shipped in ``archives``, verified as described above."""

    archives: ClassVar[tuple[Archive, ...]] = ()

    def problems(self, folder: Path) -> list[Path]:
        return [path for archive in self.archives for path in extraction_problems(folder, archive)]

    def fetch(self, folder: Path) -> None:
        paths = fetch_files((archive.urls, folder, archive.filename, archive.md5) for archive in self.archives)
        for path, archive in zip(paths, self.archives):
            extract(path, folder, archive)

    def generate(self, folder: Path) -> None:
        super().generate(folder)
        for archive in self.archives:  # extracted as a download is: verified first, then with its manifest
            path = folder / archive.filename
            if not tv_utils.check_integrity(path, expected_md5(folder, archive.filename, archive.md5)):
                raise DatasetError(f"{path}: the generated archive fails the md5 in {GENERATED_MARKER}")
            extract(path, folder, archive)

    def files(self, folder: Path) -> list[str]:
        """Every file the archives hold (relative to ``folder``), in manifest order."""
        return [name for archive in self.archives for name, _ in read_manifest(manifest_path(folder, archive))]

    def _command(self, folder: Path) -> str:
        return download_command(self.name, folder.parent)

    def _cache_path(self, folder: Path) -> Path:
        _, height, width = self.image_shape
        return folder / f"{self.name}-{height}x{width}-uint8.npz"

    def _from_cache(self, folder: Path, params: str, build: Callable[[], dict[str, np.ndarray]]) -> Data:
        stamp = fingerprint(folder, self.files(folder), params)
        arrays = cached(self._cache_path(folder), stamp, build)
        classes = [str(name) for name in arrays["classes"]]
        return self._data(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], classes)


def _read_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataset("tinyimagenet")
@dataclass(frozen=True)
class TinyImageNet(ArchiveImages):
    """Tiny ImageNet (CS231n): 200 classes of 64x64 images, 500 per class for training, 50 per class in ``val``,
    which serves as the test split (the ``test`` folder has no labels).

    Classes are the WordNet ids of ``wnids.txt`` in sorted order (the order of torchvision's ``ImageFolder`` over
    ``train/`` and over the Tiny-ImageNet-C folders); training images are ordered by class, then file name, and
    validation images as listed in ``val/val_annotations.txt``.
    """

    archives: ClassVar[tuple[Archive, ...]] = (
        Archive("tiny-imagenet-200.zip", ("http://cs231n.stanford.edu/tiny-imagenet-200.zip",),
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
            "x_train": decode([folder / name for _, name in train], self.image_shape, None, command),
            "y_train": np.array([label for label, _ in train], dtype=np.int64),
            "x_test": decode([base / "val" / "images" / name for name, _ in val], self.image_shape, None, command),
            "y_test": np.array([index[wnid] for _, wnid in val], dtype=np.int64),
            "classes": np.array(classes),
        }


@dataset("tinyimagenet-c")
@dataclass(frozen=True)
class TinyImageNetC(CorruptedTestSets, ArchiveImages):
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

    archives: ClassVar[tuple[Archive, ...]] = (
        Archive("Tiny-ImageNet-C.tar",
                ("https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar?download=1",
                 "https://zenodo.org/records/8206060/files/Tiny-ImageNet-C.tar?download=1"),
                "f9c9a9dbdc11469f0b850190f7ad8be1"),
    )

    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> CorruptionSets:
        folder = verified_folder(self, root)
        clean = DATASETS[self.clean_dataset]
        assert isinstance(clean, TinyImageNet)
        classes = clean.classes(verified_folder(clean, root))
        return CorruptionSets(self, folder, classes, list(corruptions), [int(s) for s in severities])


# Fine-grained sets at the 224 x 224 resolution of the ImageNet-pretrained transformers (CA-AT, Sec. 5.1).
@dataset("cub200")
@dataclass(frozen=True)
class Cub(ArchiveImages):
    """Caltech-UCSD Birds-200-2011: 200 species, the official split (5,994 training and 5,794 test images).

    Preprocessing (fixed, so that the images fit in one tensor): every image is converted to RGB, its shorter
    side resized (bicubic) to round(S / 0.875) and the centre S x S square cut out, S being the spec's image size
    (224: resize to 256, crop 224, ARES's evaluation transform). Class names are ``classes.txt`` without the
    numeric prefix; images are ordered by their id in ``images.txt``.
    """

    archives: ClassVar[tuple[Archive, ...]] = (
        Archive("CUB_200_2011.tgz",
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
            "x_train": decode([base / "images" / images[i] for i in train], self.image_shape, size, command),
            "y_train": np.array([int(labels[i]) - 1 for i in train], dtype=np.int64),
            "x_test": decode([base / "images" / images[i] for i in test], self.image_shape, size, command),
            "y_test": np.array([int(labels[i]) - 1 for i in test], dtype=np.int64),
            "classes": np.array(classes),
        }


@dataset("stanford-dogs")
@dataclass(frozen=True)
class StanfordDogs(ArchiveImages):
    """Stanford Dogs: 120 breeds, the official split of ``lists.tar`` (``train_list.mat``, 100 images per class,
    12,000 in all; ``test_list.mat``, 8,580), images from ``images.tar`` (``Images/<wnid>-<breed>/*.jpg``).

    Same preprocessing as CUB-200-2011 (RGB, shorter side to round(S / 0.875) bicubic, centre S x S crop). Labels
    are those of the lists (1-based there); class names are the breed part of the folder names.
    """

    archives: ClassVar[tuple[Archive, ...]] = (
        Archive("images.tar", ("http://vision.stanford.edu/aditya86/ImageNetDogs/images.tar",),
                "1bb1f2a596ae7057f99d7d75860002ef"),
        Archive("lists.tar", ("http://vision.stanford.edu/aditya86/ImageNetDogs/lists.tar",),
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
            "x_train": decode([images / name for name in train_files], self.image_shape, size, command),
            "y_train": y_train,
            "x_test": decode([images / name for name in test_files], self.image_shape, size, command),
            "y_test": y_test,
            "classes": np.array([breeds[i] for i in range(self.num_classes)]),
        }
