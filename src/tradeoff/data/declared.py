"""What every dataset is, known without its data (imports nothing: no PyTorch, no dataset module): its name, the
shape of one image, its number of classes, its split sizes as published, and, for a dataset of corrupted test
images, the dataset whose test images it corrupts. A dataset's code (:mod:`tradeoff.data.registry`'s ``@dataset``)
registers under a name declared here and reads its shape and classes from it.

Wherever the data is at hand, its sizes are read from it (``len(data.x_train)``); they are declared here only for the
consumers that must know them before or without any data:

- the configuration's checks, made when the configuration is resolved, before any job runs and without PyTorch
  (dataset names, a run's image channels, ``validation.<dataset>``: it must hold out fewer images than the training
  split has, a corruption dataset's clean dataset);
- the cost plan (:mod:`tradeoff.pipeline.bench` copies the sizes into its ``flops.json``, from which
  :mod:`tradeoff.pipeline.costs` prices every job on a machine that holds no dataset and imports no PyTorch);
- Generalist's iterations per epoch, which turn its ``ema_horizon`` (in epochs) into a per-iteration decay: the
  published training split at every scale, so that the horizon is the paper's whatever subset a scale trains on.

Sizes are (training, test) images as published (digits: the fixed stratified 80/20 split of
:class:`tradeoff.data.torchvision_sets.Digits`). tests/test_data.py checks every registered dataset against its
declaration, and digits' sizes against the data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetDeclaration:
    image_shape: tuple[int, int, int]  # (channels, height, width) of one image
    num_classes: int
    sizes: tuple[int, int] | None = None  # (training, test) images as published; None: corrupted test images only
    clean_dataset: str | None = None  # a dataset of corrupted test images: the dataset whose test images it holds


#: name -> declaration, in the order of ``dataset_names()``
DECLARED: dict[str, DatasetDeclaration] = {
    "digits": DatasetDeclaration((1, 8, 8), 10, (1437, 360)),
    "mnist": DatasetDeclaration((1, 28, 28), 10, (60000, 10000)),
    "svhn": DatasetDeclaration((3, 32, 32), 10, (73257, 26032)),
    "cifar10": DatasetDeclaration((3, 32, 32), 10, (50000, 10000)),
    "cifar100": DatasetDeclaration((3, 32, 32), 100, (50000, 10000)),
    "tinyimagenet": DatasetDeclaration((3, 64, 64), 200, (100000, 10000)),
    "tinyimagenet-c": DatasetDeclaration((3, 64, 64), 200, clean_dataset="tinyimagenet"),
    "cub200": DatasetDeclaration((3, 224, 224), 200, (5994, 5794)),
    "stanford-dogs": DatasetDeclaration((3, 224, 224), 120, (12000, 8580)),
    "digits-c": DatasetDeclaration((1, 8, 8), 10, clean_dataset="digits"),
}

#: (training, test) sizes of every dataset with a training split
SPLIT_SIZES: dict[str, tuple[int, int]] = {name: d.sizes for name, d in DECLARED.items() if d.sizes is not None}


def dataset_names() -> list[str]:
    return list(DECLARED)


def corruption_dataset_names() -> list[str]:
    return [name for name, d in DECLARED.items() if d.clean_dataset is not None]
