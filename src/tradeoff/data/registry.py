"""The dataset registry: what a dataset is in memory (:class:`Data`), how one is fetched, verified and read
(:class:`DatasetSpec`), and ``DATASETS``, which every dataset joins with the :func:`dataset` decorator on its spec
class (the registry style of :mod:`tradeoff.core.registry`). The modules that define datasets are imported, in the
order their names are listed, by :mod:`tradeoff.data.datasets`, which answers by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tradeoff.core.errors import UserError
from tradeoff.core.registry import Registry
from tradeoff.data import generated
from tradeoff.data.declared import DECLARED


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
        generated.write(self.name, folder)

    def _data(
        self,
        x_train: np.ndarray,
        y_train: Iterable[int],
        x_test: np.ndarray,
        y_test: Iterable[int],
        classes: Sequence[str],
    ) -> Data:
        return Data(
            x_train=unit_float(x_train),
            y_train=label_tensor(y_train),
            x_test=unit_float(x_test),
            y_test=label_tensor(y_test),
            num_classes=self.num_classes,
            classes=tuple(classes),
            name=self.name,
        )


def unit_float(images: np.ndarray) -> torch.Tensor:
    """uint8 NCHW images (any strides) -> contiguous float32 tensor in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)).div_(255.0)


def label_tensor(labels: Iterable[int]) -> torch.Tensor:
    return torch.from_numpy(np.asarray(labels, dtype=np.int64).reshape(-1))


DATASETS = Registry("dataset")  # filled by the decorator below, which refuses an undeclared name


def dataset(name: str, **fields) -> Callable[[type], type]:
    """Class decorator: registers ``cls(name, image_shape, num_classes, **fields)`` as dataset ``name``, with the image
    shape and classes its declaration says (:mod:`tradeoff.data.declared`), and returns the class. A class that reads
    several datasets (CIFAR-10 and CIFAR-100) carries one decorator each; decorators apply from the bottom up, so the
    lowest is registered first."""
    def register(cls: type) -> type:
        if name not in DECLARED:
            raise TypeError(f"dataset {name!r} ({cls.__name__}): declare it in tradeoff.data.declared first")
        DATASETS.register(cls(name, DECLARED[name].image_shape, DECLARED[name].num_classes, **fields))
        return cls

    return register


def spec(name: str) -> DatasetSpec:
    """The registered spec of dataset ``name``; DatasetError listing the known ones if there is none."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None
