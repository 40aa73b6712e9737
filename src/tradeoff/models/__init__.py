"""Models: every architecture the experiments use, built by name (``create_model``), and the layouts an external
checkpoint's tensors may come in (``zoo_names``, tables only).

One module per thing: ``declared`` (what every architecture is without building it: its name, whether it fine-tunes a
pretrained backbone and which checkpoint the config must name; torch-free, what the configuration reads),
``registry`` (the registries, ``MODELS`` and ``PRETRAINED_MODELS``, that each architecture
module joins), ``small``, ``resnet``, ``wideresnet`` (trained from scratch), ``adapters`` (the adapter transformers,
which fine-tune a pretrained checkpoint), ``create`` (``create_model`` and the registries complete:
it imports every architecture module), ``zoo_names`` (the checkpoint layouts and RobustBench's names, torch-free).

Importing the package imports no PyTorch (a report job reads ``zoo_names`` without it): its names below are reached
in their module on first use, through the one table ``_NAMES``; reading ``MODELS``, ``PRETRAINED_MODELS`` or
``create_model`` fills both registries.

May import: core, storage.
"""

from __future__ import annotations

from tradeoff.core.lazy_imports import lazy_package

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: DVC's stages depend on the modules named here, tradeoff.pipeline.dvc_export)
_NAMES = {**dict.fromkeys(["MODELS", "PRETRAINED_MODELS", "create_model"], "tradeoff.models.create"),
          **dict.fromkeys(["PRETRAINED", "model_names"], "tradeoff.models.declared")}


__getattr__, __dir__ = lazy_package(__name__, _NAMES)
