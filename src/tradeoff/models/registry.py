"""The registries of architectures, which every model module joins with ``register`` (as methods, attacks and
figure kinds do): ``MODELS``, trained from scratch, and ``PRETRAINED_MODELS``, the adapter transformers that
fine-tune a pretrained checkpoint the config names (``pretrained.<name>``). tradeoff.models.create imports every
model module, so that both are complete there (and where tradeoff.models hands them out).

Every builder of ``MODELS`` takes (num_classes, in_channels=3, image_size=32, *, bn_running_stats=True), the last
True, False or "blocks" (tradeoff.models.resnet); those of ``PRETRAINED_MODELS`` also take ``pretrained``."""

from __future__ import annotations

from tradeoff.core.registry import Registry
from tradeoff.models.declared import FROM_SCRATCH, PRETRAINED

# each registers under a name tradeoff.models.declared declares
MODELS = Registry("architecture", declarations=dict.fromkeys(FROM_SCRATCH))
PRETRAINED_MODELS = Registry("pretrained architecture", declarations=PRETRAINED)
