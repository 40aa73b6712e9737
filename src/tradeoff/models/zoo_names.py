"""Other model zoos' names for what this pipeline has, as plain tables (no PyTorch): which checkpoint layouts each
registered architecture accepts (tradeoff.evaluation.external loads them), RobustBench's names of architectures, datasets and
threat models (tradeoff.report.robustbench writes them), and the normalisations a model may apply to its input.

RobustBench's names are those of its repository: the ``architecture``, ``dataset`` and ``eps`` fields of its
model-info files (``model_info/<dataset>/<threat model>/<model>.json``, e.g. ``model_info/cifar10/Linf/
Zhang2019Theoretically.json``: ``"architecture": "WideResNet-34-10"``), its ``BenchmarkDataset`` (``cifar10``,
``cifar100``, ``imagenet``) and ``ThreatModel`` (``Linf``, ``L2``, ``corruptions``) enums
(``robustbench/model_zoo/enums.py``).
"""

from __future__ import annotations

from typing import Any

from tradeoff.core.errors import ConfigError, unknown

# What a checkpoint file may look like (tradeoff.evaluation.external):
#   plain        a state dict with this pipeline's names (a `tradeoff train` model.pt's 'model' too)
#   robustbench  a RobustBench model-zoo file: {'state_dict': ...} (or the bare dict), keys that may carry
#                DataParallel's 'module.' and RobustBench's 'model.' prefixes, its WideResNet's unused 'sub_block1',
#                and the 'mu'/'sigma' input normalisation buffers of some of its models
#   torchvision  torchvision's names (ResNet: fc, downsample; ViT/Swin: the network without this pipeline's wrapper)
#   timm         timm's names (ResNet: as torchvision's; ViT/Swin: renamed as tradeoff.models.adapters renames them)
#   auto         the first of the architecture's layouts that fits exactly
FORMATS = ("auto", "plain", "robustbench", "torchvision", "timm")

# The layouts each registered architecture accepts, in the order `auto` tries them. WideResNets exist in no
# torchvision or timm version (torchvision's wide_resnet50_2 is a bottleneck ImageNet network): plain (TRADES' and
# RobustBench's names, which are this pipeline's) and RobustBench's file. The small models are this pipeline's own.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "linear": ("plain",),
    "small_cnn": ("plain",),
    "resnet18": ("plain", "robustbench", "torchvision", "timm"),
    "resnet34": ("plain", "robustbench", "torchvision", "timm"),
    "wrn-28-10": ("plain", "robustbench"),
    "wrn-32-10": ("plain", "robustbench"),
    "wrn-34-10": ("plain", "robustbench"),
    "vit_tiny": ("plain", "torchvision", "timm"),
    # the adapters exist in no other library: a whole model of these is this pipeline's, or torchvision's network
    # (adapters included, without this pipeline's wrapper)
    "vit_tiny_adapter": ("plain", "torchvision"),
    "vit_b16_adapter": ("plain", "torchvision"),
    "swin_t_adapter": ("plain", "torchvision"),
    "swin_s_adapter": ("plain", "torchvision"),
    "swin_b_adapter": ("plain", "torchvision"),
}

# RobustBench's architecture names (its model-info files' "architecture") of the registered architectures. Madry's
# WRN-32-10 is WRN-34-10 under another depth convention (tradeoff.models.wideresnet), the name RobustBench gives it.
ROBUSTBENCH_ARCHS: dict[str, str] = {
    "resnet18": "ResNet-18",
    "resnet34": "ResNet-34",
    "wrn-28-10": "WideResNet-28-10",
    "wrn-32-10": "WideResNet-34-10",
    "wrn-34-10": "WideResNet-34-10",
}

# RobustBench's own architecture names that --arch and `external.<id>.arch` also accept
ARCH_ALIASES: dict[str, str] = {"ResNet-18": "resnet18", "ResNet-34": "resnet34", "WideResNet-28-10": "wrn-28-10",
                                "WideResNet-34-10": "wrn-34-10", "WRN-28-10": "wrn-28-10", "WRN-34-10": "wrn-34-10"}

# RobustBench's BenchmarkDataset and ThreatModel values
ROBUSTBENCH_DATASETS = ("cifar10", "cifar100", "imagenet")
THREAT_MODELS = {"linf": "Linf", "l2": "L2"}
CORRUPTIONS_THREAT = "corruptions"

# Named input normalisations (--normalize NAME): ImageNet's (timm's IMAGENET_DEFAULT_*), and the CIFAR-10 statistics
# that RobustBench's CIFAR-10 models with a normalisation layer most often carry (e.g. Rice2020OverfittingNet's mu and
# sigma in robustbench/model_zoo/cifar10.py); CIFAR-100's as RobustBench's CIFAR-100 models carry them.
NORMALIZATIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}


def canonical_arch(name: Any, archs: list[str], key: str) -> str:
    """A registered architecture's name for ``name``: itself, or what a RobustBench name stands for (any case);
    ConfigError naming ``key`` with the closest names otherwise."""
    if name in archs:
        return name
    folded = {alias.lower(): arch for alias, arch in ARCH_ALIASES.items()}
    if isinstance(name, str) and folded.get(name.lower()) in archs:
        return folded[name.lower()]
    raise ConfigError(f"{key}: " + unknown("architecture", name, [*archs, *ARCH_ALIASES]))


def layouts(arch: str) -> tuple[str, ...]:
    return LAYOUTS.get(arch, ("plain",))


def parse_normalize(value: Any, channels: int, key: str) -> dict | None:
    """An input normalisation as the config or the CLI gives it, as ``{"mean": [c floats], "std": [c floats]}`` (or
    None): null; a name of NORMALIZATIONS; ``"MEAN,STD"`` (one number each, every channel) or ``"M1,...,Mc,S1,...,Sc"``
    (c means, then c standard deviations); or ``{mean: number or list, std: number or list}``."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if value in NORMALIZATIONS:
            mean, std = NORMALIZATIONS[value]
        else:
            try:
                numbers = [float(part) for part in value.split(",")]
            except ValueError:
                raise ConfigError(f"{key}: expected MEAN,STD (numbers; per channel: M1,...,M{channels},S1,...,"
                                  f"S{channels}) or a name of {sorted(NORMALIZATIONS)}, got {value!r}") from None
            if len(numbers) % 2:
                raise ConfigError(f"{key}: expected as many standard deviations as means (MEAN,STD or M1,...,"
                                  f"M{channels},S1,...,S{channels}), got {len(numbers)} numbers in {value!r}")
            mean, std = numbers[: len(numbers) // 2], numbers[len(numbers) // 2:]
    elif isinstance(value, dict) and set(value) == {"mean", "std"}:
        mean, std = value["mean"], value["std"]
    else:
        raise ConfigError(f"{key}: expected null, a name of {sorted(NORMALIZATIONS)}, \"MEAN,STD\" or {{mean: ..., "
                          f"std: ...}}, got {value!r}")
    out = {}
    for name, given in (("mean", mean), ("std", std)):
        values = list(given) if isinstance(given, (list, tuple)) else [given]
        if len(values) == 1:
            values = values * channels
        if len(values) != channels or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              for v in values):
            raise ConfigError(f"{key}: {name} needs one number or {channels} (one per channel of the dataset's "
                              f"images), got {given!r}")
        out[name] = [float(v) for v in values]
    if any(not s > 0 for s in out["std"]):
        raise ConfigError(f"{key}: every standard deviation must be > 0, got {out['std']}")
    return out
