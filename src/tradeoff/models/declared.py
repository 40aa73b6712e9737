"""What every architecture is, known without building it (imports nothing: no PyTorch): its name, whether it trains
from scratch or fine-tunes a pretrained backbone, and for the latter what backbone and which checkpoint the config
must name (``pretrained.<arch>``). The configuration checks runs against these, before any job and without PyTorch;
an architecture's code (tradeoff.models.small, resnet, wideresnet, adapters) registers under a name declared here
(tests/test_models.py checks the registries against the declarations)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tradeoff.core.errors import UserError

# Config section that maps an architecture to its checkpoint file: ``pretrained: {swin_t_adapter: PATH, ...}``.
PRETRAINED_KEY = "pretrained"
ARES_URL = "https://ml.cs.tsinghua.edu.cn/~xiaoyang/aresbench/ckpt-imagenet/"

# The demo and smoke scales' miniature backbone: 8x8 digits as 4 patches of 4x4, two blocks of width 32. Patches of
# 2x2 (17 tokens) cost 1.7x more per step on the CPU, and PGD-AT at eps 0.3 left that ViT near chance in 12 epochs.
TINY_VIT = {"patch_size": 4, "num_layers": 2, "num_heads": 2, "hidden_dim": 32, "mlp_dim": 64, "resolution": 8}

#: the architectures trained from scratch (tradeoff.models.registry.MODELS), in the order of ``model_names()``
FROM_SCRATCH = ("small_cnn", "linear", "resnet18", "resnet34", "wrn-28-10", "wrn-32-10", "wrn-34-10", "vit_tiny")


class PretrainedError(UserError, ValueError):
    """A pretrained checkpoint is not configured, not found, or does not fit the backbone."""


@dataclass(frozen=True)
class Pretrained:
    """An adapter transformer that fine-tunes an adversarially pretrained backbone (tradeoff.models.adapters)."""

    family: str
    config: dict
    checkpoint: str  # what the configured file should be
    channels: int | None = 3  # input channels the backbone was pretrained on; None: the data's (the miniature)
    normalise: bool = True  # ImageNet normalisation, as ARES's backbones expect; the miniature was trained without


#: the architectures that fine-tune a pretrained backbone (tradeoff.models.registry.PRETRAINED_MODELS)
PRETRAINED = {
    "swin_t_adapter": Pretrained(
        "swin", {"embed_dim": 96, "depths": (2, 2, 6, 2), "num_heads": (3, 6, 12, 24)},
        "an adversarially trained Swin-T in timm's swin_tiny_patch4_window7_224 layout (ARES publishes no Swin-T; "
        "its smallest is Swin-S, for swin_s_adapter)"),
    "swin_s_adapter": Pretrained(
        "swin", {"embed_dim": 96, "depths": (2, 2, 18, 2), "num_heads": (3, 6, 12, 24)},
        f"ARES_Swin_small_patch4_window7_224_AT.pth from {ARES_URL}"),
    "swin_b_adapter": Pretrained(
        "swin", {"embed_dim": 128, "depths": (2, 2, 18, 2), "num_heads": (4, 8, 16, 32)},
        f"ARES_Swin_base_patch4_window7_224_AT.pth from {ARES_URL}"),
    "vit_b16_adapter": Pretrained(
        "vit", {"patch_size": 16, "num_layers": 12, "num_heads": 12, "hidden_dim": 768, "mlp_dim": 3072},
        f"ARES_ViT_base_patch16_224_AT.pth from {ARES_URL}"),
    "vit_tiny_adapter": Pretrained(
        "vit", dict(TINY_VIT),
        "results/checkpoints/<run>/model.pt of an adversarially trained `vit_tiny` run of this pipeline (the demo "
        "and smoke scales' pretraining run, see config/demo.yaml)",
        channels=None, normalise=False),
}


def model_names() -> list[str]:
    return [*FROM_SCRATCH, *PRETRAINED]


def pretrained_setting(arch: str, pretrained: str | Path | None) -> Path:
    """The checkpoint file configured for ``arch`` (``pretrained.<arch>``), not checked to exist (a workflow may
    have yet to write it), or PretrainedError naming the config key and the file expected when it is not set."""
    key, expected = f"{PRETRAINED_KEY}.{arch}", PRETRAINED[arch].checkpoint
    if pretrained is None or str(pretrained) == "":
        raise PretrainedError(
            f"model {arch!r} fine-tunes an adversarially pretrained backbone and never starts from random weights: "
            f"set `{key}` in the config to the checkpoint file ({expected})")
    return Path(pretrained)


def pretrained_checkpoint_path(arch: str, pretrained: str | Path | None) -> Path:
    """The configured checkpoint of ``arch``, or PretrainedError naming the config key and the expected file."""
    path = pretrained_setting(arch, pretrained)
    if not path.is_file():
        raise PretrainedError(f"model {arch!r}: `{PRETRAINED_KEY}.{arch}` is {str(pretrained)!r}, which is not a "
                              f"file; expected {PRETRAINED[arch].checkpoint}")
    return path
