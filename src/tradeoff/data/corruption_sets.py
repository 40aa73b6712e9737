"""Datasets of corrupted test images (Hendrycks & Dietterich's common corruptions: Tiny-ImageNet-C, digits-c): the
base every such dataset extends, which ``tradeoff.data.load_corruptions`` reads as ``{(corruption, severity): (x,
y)}``, and :class:`CorruptionSets`, Tiny-ImageNet-C's sets decoded lazily, one corruption at a time.
:mod:`tradeoff.data.corruptions` measures a model's accuracy on them (NROB)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from tradeoff.data.cache import cached, fingerprint
from tradeoff.data.declared import DECLARED
from tradeoff.data.decode import decode
from tradeoff.data.fetch import download_command
from tradeoff.data.hendrycks import CORRUPTIONS
from tradeoff.data.registry import Data, DatasetError, label_tensor, unit_float


class CorruptedTestSets(ABC):
    """A dataset of corrupted test images only (Tiny-ImageNet-C, digits-c): ``load_corruptions`` reads it as
    ``{(corruption, severity): (x, y)}``; it has no training split, so ``load`` refuses it. Every set holds the test
    images of ``clean_dataset`` (whose models it evaluates), in one order."""

    name: str

    @property
    def clean_dataset(self) -> str:
        """The dataset whose test images it holds (its declaration's, tradeoff.data.declared)."""
        return DECLARED[self.name].clean_dataset

    @property
    def corruptions(self) -> tuple[str, ...]:
        """Its corruptions, in Hendrycks' order."""
        return CORRUPTIONS

    def read(self, folder: Path) -> Data:
        raise DatasetError(f"{self.name!r} holds corrupted test images only and has no training split; read it with "
                           "tradeoff.data.load_corruptions (or evaluate with tradeoff.data.corruptions.nrob)")

    @abstractmethod
    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> Mapping:
        """``(corruption, severity) -> (x, y)`` from the verified dataset under ``root``."""


class CorruptionSets(Mapping):
    """``(corruption, severity) -> (x, y)`` over Tiny-ImageNet-C, decoded lazily.

    ``x`` is float32 in [0, 1], N x 3 x 64 x 64; ``y`` holds Tiny ImageNet's label of each image (its class's
    position in ``load("tinyimagenet").classes``). Images are ordered by class, then file name. One corruption
    (all its severities, as uint8) is kept in memory at a time; each is cached as
    ``cache/<corruption>-uint8.npz`` in the dataset's folder. ``spec`` is Tiny-ImageNet-C's
    (:class:`tradeoff.data.archive_sets.TinyImageNetC`: its ``files`` are its archive's manifest).
    """

    def __init__(self, spec: CorruptedTestSets, folder: Path, classes: tuple[str, ...],
                 corruptions: Sequence[str], severities: Sequence[int]):
        self._spec, self._folder, self._classes = spec, folder, classes
        self._keys = [(corruption, int(severity)) for corruption in corruptions for severity in severities]
        self._files: dict[str, list[tuple[int, int, str, str]]] = {corruption: [] for corruption in corruptions}
        # Manifest entries end in <corruption>/<severity>/<wnid>/<file>, under whatever top folder the tar uses.
        for name in spec.files(folder):
            parts = name.split("/")
            if len(parts) >= 4 and parts[-4] in self._files and parts[-3].isdigit():
                self._files[parts[-4]].append((int(parts[-3]), 0, parts[-2], name))
        index = {wnid: i for i, wnid in enumerate(classes)}
        command = download_command(spec.name, folder.parent)
        for corruption, severity in self._keys:
            found = [entry for entry in self._files[corruption] if entry[0] == severity]
            if not found:
                raise DatasetError(f"{spec.name}: no images for {corruption} at severity {severity} in {folder}; "
                                   f"{command} to fetch it")
            unknown = {wnid for _, _, wnid, _ in found} - set(index)
            if unknown:
                raise DatasetError(f"{spec.name}: {corruption}/{severity} has classes that Tiny ImageNet lacks: "
                                   f"{sorted(unknown)[:5]}")
        for corruption, entries in self._files.items():
            self._files[corruption] = sorted(
                (severity, index[wnid], wnid, name) for severity, _, wnid, name in entries
                if severity in severities and wnid in index
            )
        self._loaded: tuple[str, dict[str, np.ndarray]] | None = None

    def __getitem__(self, key: tuple[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
        corruption, severity = key[0], int(key[1])
        if (corruption, severity) not in self._keys:
            raise KeyError(key)
        arrays = self._arrays(corruption)
        rows = arrays["severity"] == severity
        return unit_float(arrays["x"][rows]), label_tensor(arrays["y"][rows])

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def classes(self) -> tuple[str, ...]:
        return self._classes

    def _arrays(self, corruption: str) -> dict[str, np.ndarray]:
        if self._loaded is None or self._loaded[0] != corruption:
            self._loaded = None  # release the previous corruption before decoding the next
            entries = self._files[corruption]
            folder = self._folder
            params = f"{corruption}|{','.join(self._classes)}"
            stamp = fingerprint(folder, (name for *_, name in entries), params)

            def build() -> dict[str, np.ndarray]:
                command = download_command(self._spec.name, folder.parent)
                return {
                    "x": decode([folder / name for *_, name in entries], self._spec.image_shape, None, command),
                    "y": np.array([label for _, label, _, _ in entries], dtype=np.int64),
                    "severity": np.array([severity for severity, *_ in entries], dtype=np.int64),
                }

            self._loaded = (corruption, cached(folder / "cache" / f"{corruption}-uint8.npz", stamp, build))
        return self._loaded[1]
