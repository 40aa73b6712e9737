"""CIFAR ResNets (He et al., 2016) in the form the adversarial-training papers' code uses.

A 3x3 stride-1 stem and no max-pool keep 32x32 inputs at full resolution in the first stage. Module names
follow kuangliu/pytorch-cifar, the code most of these papers build on, so its checkpoints load unchanged.

``bn_running_stats``: True (every BatchNorm keeps running statistics), False (none does: each normalises with the
batch's statistics in training and evaluation alike), or ``"blocks"``: the BatchNorms inside the residual blocks
(shortcut included) keep none while the stem's keeps them, as CA-AT's code builds its ResNet and as we read its
paper ("running mean and running variance in each Batch Normalization block" set to false).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff.models.registry import MODELS

Norm = Callable[[int], nn.Module]


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus an identity or 1x1-conv-BN shortcut, then ReLU."""

    def __init__(self, in_planes: int, planes: int, stride: int, norm: Norm) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = norm(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = norm(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            projection = nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)
            self.shortcut = nn.Sequential(projection, norm(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Four stages of basic blocks, widths 64-128-256-512, global average pooling and a linear classifier."""

    def __init__(
        self, blocks_per_stage: Sequence[int], num_classes: int, in_channels: int, norm: Norm,
        stem_norm: Norm | None = None,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = (stem_norm or norm)(64)
        in_planes = 64
        stages = []
        for stage, (planes, blocks) in enumerate(zip((64, 128, 256, 512), blocks_per_stage, strict=True)):
            layers = []
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(in_planes, planes, stride, norm))
                in_planes = planes
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        # Adaptive pooling equals the original 4x4 average pool on 32x32 inputs and also serves other sizes.
        return self.linear(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


BnRunningStats = bool | str  # True, False or "blocks"


def norms(bn_running_stats: BnRunningStats) -> tuple[Norm, Norm]:
    """(the residual blocks' BatchNorm, the BatchNorm outside them) for a ``bn_running_stats`` setting."""
    if bn_running_stats not in (True, False, "blocks"):
        raise ValueError(f"bn_running_stats must be true, false or 'blocks', got {bn_running_stats!r}")
    blocks = partial(nn.BatchNorm2d, track_running_stats=bn_running_stats is True)
    outside = partial(nn.BatchNorm2d, track_running_stats=bn_running_stats is not False)
    return blocks, outside


@MODELS.register(name="resnet18")
def resnet18(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: BnRunningStats = True
) -> ResNet:
    """CIFAR ResNet-18; ``image_size`` is not needed (global pooling)."""
    block_norm, stem_norm = norms(bn_running_stats)
    return ResNet((2, 2, 2, 2), num_classes, in_channels, block_norm, stem_norm)


@MODELS.register(name="resnet34")
def resnet34(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: BnRunningStats = True
) -> ResNet:
    """CIFAR ResNet-34; ``image_size`` is not needed (global pooling)."""
    block_norm, stem_norm = norms(bn_running_stats)
    return ResNet((3, 4, 6, 3), num_classes, in_channels, block_norm, stem_norm)
