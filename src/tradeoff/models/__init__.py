"""Model registry: every architecture the experiments use, built by name.

Models take images in [0, 1]; none normalises its input (the papers' PyTorch code does not either).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from tradeoff.models.resnet import resnet18, resnet34
from tradeoff.models.small import linear, small_cnn
from tradeoff.models.wideresnet import wrn_28_10, wrn_34_10

# Every builder takes (num_classes, in_channels=3, image_size=32, *, bn_running_stats=True).
MODELS: dict[str, Callable[..., nn.Module]] = {
    "linear": linear,
    "small_cnn": small_cnn,
    "resnet18": resnet18,
    "resnet34": resnet34,
    "wrn-28-10": wrn_28_10,
    # Madry's WRN-32-10 is WRN-34-10 under another depth convention; see tradeoff.models.wideresnet.
    "wrn-32-10": wrn_34_10,
    "wrn-34-10": wrn_34_10,
}


def model_names() -> list[str]:
    return list(MODELS)


def build_model(
    name: str, num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool = True
) -> nn.Module:
    """Build architecture ``name``.

    ``bn_running_stats=False`` makes every BatchNorm normalise with the current batch's statistics in
    training and evaluation alike (``track_running_stats=False``); models without BatchNorm ignore it.
    """
    try:
        builder = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None
    return builder(num_classes, in_channels, image_size, bn_running_stats=bn_running_stats)
