"""A run's data: the dataset loaded (:func:`tradeoff.data.load`), its validation split held out of the training
split (a stratified draw with a fixed seed), the first N of a fixed permutation of what is left and of the test split
(:func:`subset`), and the images a run's per-epoch selection measures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tradeoff.core.spec import RunSpec
from tradeoff.data.datasets import load
from tradeoff.data.registry import Data, DatasetError


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
