"""Models: every architecture the experiments use, built by name (``create_model``), and the layouts an external
checkpoint's tensors may come in (``zoo_names``, tables only).

One module per thing: ``registry`` (the registries, ``MODELS`` and ``PRETRAINED_MODELS``, that each architecture
module joins), ``small``, ``resnet``, ``wideresnet`` (trained from scratch), ``adapters`` (the adapter transformers,
which fine-tune a pretrained checkpoint), ``create`` (``create_model``, ``model_names`` and the registries complete:
it imports every architecture module), ``zoo_names`` (the checkpoint layouts and RobustBench's names, torch-free).

Importing the package imports no PyTorch (a report job reads ``zoo_names`` without it): its names below are reached
in their module on first use, through the one table ``_NAMES``; reading any of them fills both registries.

May import: core, storage.
"""

from __future__ import annotations

import importlib

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: DVC's stages depend on the modules named here, tradeoff.pipeline.dvc_export)
_NAMES = dict.fromkeys(["MODELS", "PRETRAINED_MODELS", "create_model", "model_names"], "tradeoff.models.create")


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_NAMES])
