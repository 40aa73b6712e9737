"""Small models for the 8x8 digits and for exact-attack and binary experiments."""

from __future__ import annotations

import torch
from torch import nn

from tradeoff.models.registry import MODELS


class SmallCNN(nn.Module):
    """conv3x3(16)-BN-ReLU-conv3x3(32)-BN-ReLU-maxpool2-fc64-ReLU-fc; padding keeps 8x8 digits usable.

    The demo and CI scales train and attack this network thousands of times on the CPU, so its width is the
    demo's time budget: at half DESIGN.md's widths (32, 64, 128) a PGD step on a batch of 64 digits costs a third
    of the wider net's. It has BatchNorm after each convolution, as the papers' ResNets do, so that what depends on
    it means at the demo scale what it means at paper scale: an attack made in train or eval mode (PGD-AT, RST,
    TRADES' eval-mode maximiser), the two BatchNorm passes of AT(β=½) against RST's one, CA-AT's BatchNorm without
    running statistics (``bn_running_stats=False``).
    """

    def __init__(self, num_classes: int, in_channels: int, image_size: int, bn_running_stats: bool = True) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16, track_running_stats=bn_running_stats),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32, track_running_stats=bn_running_stats),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(32 * (image_size // 2) ** 2, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class LinearClassifier(nn.Module):
    """Multinomial logistic regression on raw pixels: logits = W flatten(x) + b.

    Its worst case under an l_p budget has a closed form, which makes it the reference for attack tests.
    """

    def __init__(self, num_classes: int, in_channels: int, image_size: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_channels * image_size**2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(x, 1))


@MODELS.register(name="small_cnn")
def small_cnn(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool = True
) -> SmallCNN:
    """The small CNN; ``bn_running_stats=False`` makes its BatchNorms normalise with the batch's statistics in
    training and evaluation alike."""
    return SmallCNN(num_classes, in_channels, image_size, bn_running_stats)


@MODELS.register(name="linear")
def linear(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool = True
) -> LinearClassifier:
    """The linear model; it has no BatchNorm, so ``bn_running_stats`` has nothing to change."""
    return LinearClassifier(num_classes, in_channels, image_size)
