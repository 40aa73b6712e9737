"""Model registry: every architecture the experiments use, built by name.

Models take images in [0, 1]; none normalises its input (the papers' PyTorch code does not either), except the
adapter transformers, whose ImageNet-pretrained backbones expect ImageNet normalisation and apply it themselves.

The adapter transformers (``PRETRAINED_MODELS``, see tradeoff.models.adapters) fine-tune an adversarially
pretrained checkpoint that the user supplies: they need ``build_model(..., pretrained=PATH)`` and refuse to start
from random weights. ``build_architecture`` builds any model without a checkpoint, to load a complete saved state
into (a trained run's model.pt).

May import: core, storage.
"""

from __future__ import annotations

from torch import nn

# the model modules register their architectures (tradeoff.models.registry); the adapters import torchvision's model
# zoo only when a network is built, so importing them here is cheap
from tradeoff.models import small, resnet, wideresnet, adapters  # noqa: F401
from tradeoff.models.registry import MODELS, PRETRAINED_MODELS


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
        return adapters.build_architecture(name, num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)
    return build_model(name, num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)
