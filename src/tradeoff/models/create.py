"""``create_model``: any architecture of the registries, by name, and the registries complete (this module imports
every architecture module, so that each has registered its builders; tradeoff.models reaches its names here).

Models take images in [0, 1]; none normalises its input (the papers' PyTorch code does not either), except the
adapter transformers, whose ImageNet-pretrained backbones expect ImageNet normalisation and apply it themselves.

The adapter transformers (``PRETRAINED_MODELS``, see tradeoff.models.adapters) fine-tune an adversarially
pretrained checkpoint that the user supplies: ``create_model(..., pretrained=PATH)`` builds one to train, from that
checkpoint (refusing a path that is empty or not a file); without ``pretrained`` it is built with random weights and
no checkpoint, only to load a complete saved state into (a fine-tuned run's model.pt) or to count FLOPs: never train
what it returns. Training asks for the configured checkpoint first (tradeoff.training.train.model_factory).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

# the model modules register their architectures (tradeoff.models.registry); the adapters import torchvision's model
# zoo only when a network is built, so importing them here is cheap
# isort: off
from tradeoff.models import small, resnet, wideresnet, adapters  # noqa: F401  (this order: the registry's)
# isort: on
from tradeoff.models.declared import model_names
from tradeoff.models.registry import MODELS, PRETRAINED_MODELS


def create_model(
    name: str,
    num_classes: int,
    in_channels: int = 3,
    image_size: int = 32,
    *,
    bn_running_stats: bool | str = True,
    pretrained: str | Path | None = None,
) -> nn.Module:
    """Architecture ``name``.

    ``bn_running_stats=False`` makes every BatchNorm normalise with the current batch's statistics in
    training and evaluation alike (``track_running_stats=False``); ``"blocks"`` does so only inside the residual
    blocks (the ResNets' stem and the WRNs' last BatchNorm keep running statistics, as CA-AT's code); models
    without BatchNorm ignore it.

    ``pretrained``: the checkpoint file of a model of ``PRETRAINED_MODELS`` (the config's ``pretrained.<name>``),
    its backbone loaded, to train; None builds it with random weights, to load a complete saved state into. The
    other models take no checkpoint and refuse one.
    """
    if name in PRETRAINED_MODELS:
        if pretrained is None:
            return adapters.bare_network(name, num_classes, in_channels, image_size,
                                         bn_running_stats=bn_running_stats)
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
