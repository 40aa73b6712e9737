"""Every dataset, by name. Importing this module registers them all (importing the modules that define them, in
the order their names are listed: :mod:`~tradeoff.data.torchvision_sets`, :mod:`~tradeoff.data.archive_sets`,
:mod:`~tradeoff.data.digits_c`); its functions answer by name: :func:`download`, :func:`is_downloaded`,
:func:`load`, :func:`load_corruptions` and the queries of the registry.

Every dataset lives in its own folder ``ROOT/NAME``; nothing that fails its checksum is ever read: ``load`` refuses
it, ``download`` deletes it and fetches it again (:mod:`tradeoff.data.fetch`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

# the modules that define datasets register them on import (tests/test_data.py: every declared dataset, in order)
# isort: off
from tradeoff.data import torchvision_sets, archive_sets, digits_c  # noqa: F401  (this order: the registry's)
# isort: on
from tradeoff.data.corruption_sets import CorruptedTestSets
from tradeoff.data.declared import corruption_dataset_names, dataset_names
from tradeoff.data.fetch import ensure_downloaded, verified_folder
from tradeoff.data.hendrycks import SEVERITIES
from tradeoff.data.registry import DATASETS, Data, DatasetError, DatasetSpec, spec

__all__ = ["DATASETS", "Data", "DatasetError", "DatasetSpec", "corruption_dataset", "corruption_dataset_names",
           "dataset_names", "download", "is_downloaded", "load", "load_corruptions"]


def download(name: str, root: str | Path = "data") -> Path:
    """Fetch dataset ``name`` into ``root/name`` and verify it; returns that folder.

    Intact files are kept, so calling it again costs only the checksum pass. A corrupt or interrupted
    download is deleted and fetched again once before ``DatasetError`` is raised.
    """
    return ensure_downloaded(spec(name), root)


def is_downloaded(name: str, root: str | Path = "data") -> bool:
    """Whether every file ``load`` needs is present and passes its checksum."""
    found = spec(name)
    return not found.problems(found.folder(root))


def load(name: str, root: str | Path = "data", *, download: bool = False) -> Data:
    """Load dataset ``name`` from ``root/name`` into memory (fetching it first if ``download``)."""
    found = spec(name)
    if download:
        return found.read(ensure_downloaded(found, root))
    return found.read(verified_folder(found, root))


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
    found = corruption_dataset(dataset)
    corruptions = found.corruptions if corruptions is None else tuple(corruptions)
    unknown = [corruption for corruption in corruptions if corruption not in found.corruptions]
    if unknown:
        raise DatasetError(f"unknown corruptions {unknown}; {dataset} has: {', '.join(found.corruptions)}")
    bad_severities = [severity for severity in severities if severity not in SEVERITIES]
    if bad_severities:
        raise DatasetError(f"severities must be among {SEVERITIES}, got {bad_severities}")
    return found.sets(root, corruptions, severities)


def corruption_dataset(name: str) -> CorruptedTestSets:
    """The spec of a corruption dataset: its ``corruptions`` and ``clean_dataset``."""
    found = spec(name)
    if not isinstance(found, CorruptedTestSets):
        raise DatasetError(f"{name!r} is not a dataset of corrupted test images; those are: "
                           f"{', '.join(corruption_dataset_names())}")
    return found


