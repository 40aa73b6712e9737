"""Model registry: every architecture the experiments use, built by name.

Models take images in [0, 1]; none normalises its input (the papers' PyTorch code does not either), except the
adapter transformers, whose ImageNet-pretrained backbones expect ImageNet normalisation and apply it themselves.

The adapter transformers (``PRETRAINED_MODELS``, see tradeoff.models.adapters) fine-tune an adversarially
pretrained checkpoint that the user supplies: they need ``build_model(..., pretrained=PATH)`` and refuse to start
from random weights. ``build_architecture`` builds any model without a checkpoint, to load a complete saved state
into (a trained run's model.pt).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

import importlib
from tradeoff.models.resnet import resnet18, resnet34
from tradeoff.registry import Registry
from tradeoff.models.small import linear, small_cnn
from tradeoff.models.wideresnet import wrn_28_10, wrn_34_10


def _adapter_builder(name: str, registry: str = "PRETRAINED_MODELS") -> Callable[..., nn.Module]:
    """The transformers import torchvision's model zoo (seconds): only when one is built."""

    def build(*args, **kwargs):
        return getattr(importlib.import_module("tradeoff.models.adapters"), registry)[name](*args, **kwargs)

    return build


# Architectures that fine-tune a pretrained checkpoint the config names (``pretrained.<name>``)
PRETRAINED_MODELS = Registry("pretrained architecture")
for _name in ("swin_t_adapter", "swin_s_adapter", "swin_b_adapter", "vit_b16_adapter", "vit_tiny_adapter"):
    PRETRAINED_MODELS.register(_adapter_builder(_name), name=_name)

# Every builder takes (num_classes, in_channels=3, image_size=32, *, bn_running_stats=True), the last True, False or
# "blocks" (tradeoff.models.resnet).
MODELS = Registry("architecture")
MODELS.register(linear, name="linear")
MODELS.register(small_cnn, name="small_cnn")
MODELS.register(resnet18, name="resnet18")
MODELS.register(resnet34, name="resnet34")
MODELS.register(wrn_28_10, name="wrn-28-10")
# Madry's WRN-32-10 is WRN-34-10 under another depth convention; see tradeoff.models.wideresnet.
MODELS.register(wrn_34_10, name="wrn-32-10")
MODELS.register(wrn_34_10, name="wrn-34-10")
# the backbone of vit_tiny_adapter, trained from scratch (the demo and smoke scales' pretraining run)
MODELS.register(_adapter_builder("vit_tiny", "SCRATCH_MODELS"), name="vit_tiny")


def model_names() -> list[str]:
    return [*MODELS, *PRETRAINED_MODELS]


def build_model(
    name: str,
    num_classes: int,
    in_channels: int = 3,
    image_size: int = 32,
    *,
    bn_running_stats: bool | str = True,
    pretrained: str | None = None,
) -> nn.Module:
    """Build architecture ``name``.

    ``bn_running_stats=False`` makes every BatchNorm normalise with the current batch's statistics in
    training and evaluation alike (``track_running_stats=False``); ``"blocks"`` does so only inside the residual
    blocks (the ResNets' stem and the WRNs' last BatchNorm keep running statistics, as CA-AT's code); models
    without BatchNorm ignore it.

    ``pretrained`` is the checkpoint file of the models in ``PRETRAINED_MODELS`` (the config's
    ``pretrained.<name>``), which they require; the other models take no checkpoint and refuse one.
    """
    if name in PRETRAINED_MODELS:
        return PRETRAINED_MODELS[name](num_classes, in_channels, image_size, bn_running_stats=bn_running_stats,
                                       pretrained=pretrained)
    try:
        builder = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(model_names())}") from None
    if pretrained is not None:
        raise ValueError(f"model {name!r} is trained from scratch and takes no pretrained checkpoint; only "
                         f"{', '.join(PRETRAINED_MODELS)} do")
    return builder(num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)


def build_architecture(
    name: str, num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool | str = True
) -> nn.Module:
    """Architecture ``name`` with random weights, to load a complete saved state into (``strict``): a run's
    model.pt. Unlike ``build_model`` it builds the models of ``PRETRAINED_MODELS`` without their checkpoint, whose
    backbone tensors such a state already holds; never train what it returns."""
    if name in PRETRAINED_MODELS:
        from .adapters import build_architecture as bare

        return bare(name, num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)
    return build_model(name, num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)
