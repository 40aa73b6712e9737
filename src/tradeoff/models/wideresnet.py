"""Pre-activation Wide ResNets (Zagoruyko & Komodakis, 2016) as in the TRADES and Madry-style PyTorch code.

WRN-d-k has (d - 4) / 6 blocks per stage and widths 16 -> 16k -> 32k -> 64k; dropout is 0 in all the
papers reproduced here and is left out. Module names and initialisation follow the TRADES code
(yaodongyu/TRADES, models/wideresnet.py), so its checkpoints load with ``strict=False``: TRADES also
builds a ``sub_block1`` that its forward pass never uses; it is omitted here and not counted.

``wrn-32-10`` (Madry et al.'s CIFAR-10 challenge network, used by FAT and Generalist) has the *same*
architecture as ``wrn-34-10``: 5 blocks per stage, widths 16-160-320-640, 46,160,474 parameters for 10
classes. Only the depth convention differs: FAT's PyTorch port (``Wide_ResNet_Madry``) takes depth = 6n + 2
(stem, 6n block convolutions, classifier) where WRN and TRADES take depth = 6n + 4; the port is otherwise
TRADES' network line for line. Madry's original TensorFlow model differs from both in ways none of the
PyTorch ports keep: parameter-free shortcuts (strided average pooling and zero-padded channels, hence
45,901,914 parameters) that in stages 2 and 3 take the un-activated input, leaky ReLU (slope 0.1), and
per-image standardisation of the input inside the model.

``bn_running_stats: "blocks"`` keeps running statistics only in the BatchNorm outside the residual blocks (the one
before the classifier), as tradeoff.models.resnet reads CA-AT's "each Batch Normalization block".
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff.models.registry import MODELS
from tradeoff.models.resnet import norms

Norm = Callable[[int], nn.Module]


class BasicBlock(nn.Module):
    """BN-ReLU-conv3x3-BN-ReLU-conv3x3 plus an identity or 1x1-conv shortcut."""

    def __init__(self, in_planes: int, out_planes: int, stride: int, norm: Norm) -> None:
        super().__init__()
        self.bn1 = norm(in_planes)
        self.conv1 = nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = norm(out_planes)
        self.conv2 = nn.Conv2d(out_planes, out_planes, 3, stride=1, padding=1, bias=False)
        self.convShortcut = None  # noqa: N815 (TRADES' name, kept for its checkpoints)
        if stride != 1 or in_planes != out_planes:
            self.convShortcut = nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = F.relu(self.bn1(x))
        # As in TRADES: a projection shortcut sees the activated input, an identity shortcut the raw one.
        shortcut = x if self.convShortcut is None else self.convShortcut(activated)
        out = self.conv2(F.relu(self.bn2(self.conv1(activated))))
        return out + shortcut


class NetworkBlock(nn.Module):
    """One stage: ``blocks`` basic blocks, the first of which changes width and stride."""

    def __init__(self, blocks: int, in_planes: int, out_planes: int, stride: int, norm: Norm) -> None:
        super().__init__()
        self.layer = nn.Sequential(
            BasicBlock(in_planes, out_planes, stride, norm),
            *(BasicBlock(out_planes, out_planes, 1, norm) for _ in range(blocks - 1)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class WideResNet(nn.Module):
    def __init__(
        self, blocks_per_stage: int, widen_factor: int, num_classes: int, in_channels: int, norm: Norm,
        head_norm: Norm | None = None,
    ) -> None:
        super().__init__()
        widths = (16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor)
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, stride=1, padding=1, bias=False)
        self.block1 = NetworkBlock(blocks_per_stage, widths[0], widths[1], 1, norm)
        self.block2 = NetworkBlock(blocks_per_stage, widths[1], widths[2], 2, norm)
        self.block3 = NetworkBlock(blocks_per_stage, widths[2], widths[3], 2, norm)
        self.bn1 = (head_norm or norm)(widths[3])
        self.fc = nn.Linear(widths[3], num_classes)

        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
                nn.init.normal_(module.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block3(self.block2(self.block1(self.conv1(x))))
        out = F.relu(self.bn1(out))
        # Adaptive pooling equals the original 8x8 average pool on 32x32 inputs and also serves other sizes.
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


def _wide_resnet(
    blocks_per_stage: int, num_classes: int, in_channels: int, bn_running_stats: bool | str
) -> WideResNet:
    block_norm, head_norm = norms(bn_running_stats)
    return WideResNet(blocks_per_stage, 10, num_classes, in_channels, block_norm, head_norm)


@MODELS.register(name="wrn-28-10")
def wrn_28_10(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool | str = True
) -> WideResNet:
    """WRN-28-10 (4 blocks per stage); ``image_size`` is not needed (global pooling)."""
    return _wide_resnet(4, num_classes, in_channels, bn_running_stats)


# Madry's WRN-32-10 is WRN-34-10 under another depth convention (see above)
@MODELS.register(name="wrn-34-10")
@MODELS.register(name="wrn-32-10")
def wrn_34_10(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, bn_running_stats: bool | str = True
) -> WideResNet:
    """WRN-34-10 (5 blocks per stage), also registered as wrn-32-10; ``image_size`` is not needed."""
    return _wide_resnet(5, num_classes, in_channels, bn_running_stats)
