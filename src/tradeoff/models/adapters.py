"""Swin and ViT with bottleneck adapters, for adversarial parameter-efficient fine-tuning (CA-AT, Figs. 4 and 5).

CA-AT fine-tunes Swin Transformer and ViT backbones that ARES adversarially trained on ImageNet, "using Adapter
(Pfeiffer et al., 2020) ... inserting an adapter module subsequent to the MLP block at each layer with a
reduction factor of 8" (CA-AT, Sec. 5.1 and Appendix C). Here:

- the architectures are torchvision's (``swin_t``/``swin_s``/``swin_b``, ``vit_b_16``), built with random weights
  and never downloaded; the backbone weights come only from a checkpoint file the user supplies
  (``load_pretrained``);
- every transformer block's MLP ends with a ``BottleneckAdapter``: down-projection to dim/8, ReLU (the
  Pfeiffer adapter's non-linearity in AdapterHub), up-projection, residual connection. The up-projection starts
  at zero, so before fine-tuning the adapted network computes exactly the pretrained function (the near-identity
  initialisation of Houlsby et al., 2019);
- the backbone is frozen (``requires_grad=False``); only the adapters and the new classification head train;
- inputs are images in [0, 1] like every model of the registry: the model resizes them (bilinear) to the
  pretraining resolution when they differ (CIFAR's 32 x 32 for CA-AT's Fig. 4c-d) and normalises them with the
  ImageNet mean and std, which ARES's Swin and ViT AT checkpoints expect;
- stochastic depth and dropout are off: with a frozen backbone they would only make the adversarial examples
  depend on a random draw.

ARES publishes its checkpoints in timm's layout; ``load_pretrained`` maps timm's names to torchvision's (both the
timm < 0.9 and the current Swin layouts) and also accepts torchvision-layout state dicts.

The demo and smoke scales run a miniature of the same setup on the 8x8 digits: ``vit_tiny`` is a torchvision ViT
(``TINY_VIT``: image 8, patch 4, 2 layers, 2 heads, width 32, MLP 64) trained from scratch, adversarially, by a
run of the pipeline itself, and ``vit_tiny_adapter`` is the same backbone with adapters, fine-tuned from that run's
``model.pt`` through ``load_pretrained`` (torchvision layout) exactly as the paper-scale models are from ARES's
files. The miniature takes the data's channels (1 for digits: a 1-channel patch embedding, initialised as
torchvision initialises the 3-channel one) and normalises nothing, like every other from-scratch model.

``bare_network`` builds an adapter network with random weights and no checkpoint (``tradeoff.models.create_model``
without ``pretrained``). It exists to receive a complete saved state (``tradeoff.evaluation.load.load_model``: a
fine-tuned run's model.pt holds every tensor, backbone included) and to count FLOPs; training always goes through the
registry builders (``create_model`` with ``pretrained``), which load the checkpoint.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from tradeoff.models.declared import (
    PRETRAINED,
    TINY_VIT,
    PretrainedError,
    pretrained_checkpoint_path,
)
from tradeoff.models.registry import MODELS, PRETRAINED_MODELS
from tradeoff.storage import checkpoint

# torchvision's model zoo is imported where a network is built, not here (that import costs ~2.4 CPU-s).

_log = logging.getLogger(__name__)

# The normalisation of ARES's Swin and ViT adversarially trained ImageNet models (timm's IMAGENET_DEFAULT_*).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
REDUCTION = 8



class BottleneckAdapter(nn.Module):
    """h + up(ReLU(down(h))), with down: dim -> dim // reduction and a zero-initialised up-projection."""

    def __init__(self, dim: int, reduction: int = REDUCTION):
        super().__init__()
        hidden = max(1, dim // reduction)
        self.down = nn.Linear(dim, hidden)
        self.act = nn.ReLU()
        self.up = nn.Linear(hidden, dim)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.up(self.act(self.down(h)))


class ImageTransformer(nn.Module):
    """[0, 1] images -> resize to ``net``'s resolution -> normalisation (ImageNet's, or none) -> ``net``."""

    def __init__(self, net: nn.Module, family: str, resolution: int, normalise: bool = True):
        super().__init__()
        self.net = net
        self.family = family
        self.resolution = resolution
        self.normalise = normalise
        if normalise:
            self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
            self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.resolution, self.resolution):
            x = F.interpolate(x, size=(self.resolution, self.resolution), mode="bilinear", align_corners=False)
        return self.net((x - self.mean) / self.std if self.normalise else x)

    @property
    def head(self) -> nn.Linear:
        return self.net.head if self.family == "swin" else self.net.heads.head

    @property
    def head_prefix(self) -> str:
        """Prefix of the classification head's keys in ``net``'s state dict."""
        return "head." if self.family == "swin" else "heads."


class AdaptedTransformer(ImageTransformer):
    """An ImageTransformer whose ``net`` has an adapter in every block; only the adapters and the head train."""

    def adapters(self) -> list[BottleneckAdapter]:
        return [module for module in self.modules() if isinstance(module, BottleneckAdapter)]

    def is_trainable_key(self, key: str) -> bool:
        """Whether a key of ``net``'s state dict belongs to an adapter or the head (the trained parameters)."""
        return key.startswith(self.head_prefix) or ".adapter." in key


def _add_adapters(net: nn.Module, reduction: int) -> int:
    """Append an adapter to the MLP of every Swin or ViT block (as its last stage); returns how many."""
    from torchvision.models.swin_transformer import SwinTransformerBlock
    from torchvision.models.vision_transformer import EncoderBlock

    count = 0
    for block in net.modules():
        if isinstance(block, SwinTransformerBlock):
            dim = block.norm1.normalized_shape[0]
        elif isinstance(block, EncoderBlock):
            dim = block.ln_1.normalized_shape[0]
        else:
            continue
        # torchvision's MLPs are nn.Sequential: a named module added last runs after the MLP's output projection
        # (and its dropout), and the pretrained keys (mlp.0, mlp.3) keep their names.
        block.mlp.add_module("adapter", BottleneckAdapter(dim, reduction))
        count += 1
    return count


def _finish(net: nn.Module, family: str, resolution: int, reduction: int, normalise: bool = True
            ) -> AdaptedTransformer:
    if _add_adapters(net, reduction) == 0:
        raise AssertionError("no transformer blocks found")
    model = AdaptedTransformer(net, family, resolution, normalise)
    for key, parameter in net.named_parameters():
        parameter.requires_grad_(model.is_trainable_key(key))
    return model


def swin_adapter(
    num_classes: int,
    *,
    embed_dim: int,
    depths: tuple[int, ...],
    num_heads: tuple[int, ...],
    window_size: int = 7,
    patch_size: int = 4,
    resolution: int = 224,
    reduction: int = REDUCTION,
) -> AdaptedTransformer:
    """A torchvision Swin Transformer (v1) with adapters, RANDOMLY initialised: call ``load_pretrained`` next."""
    from torchvision.models.swin_transformer import SwinTransformer

    net = SwinTransformer(
        patch_size=[patch_size, patch_size], embed_dim=embed_dim, depths=list(depths), num_heads=list(num_heads),
        window_size=[window_size, window_size], stochastic_depth_prob=0.0, num_classes=num_classes,
    )
    return _finish(net, "swin", resolution, reduction)


def _vision_transformer(num_classes: int, in_channels: int, *, patch_size: int, num_layers: int, num_heads: int,
                        hidden_dim: int, mlp_dim: int, resolution: int) -> nn.Module:
    """torchvision's ViT (no dropout) with a patch embedding for ``in_channels`` channels."""
    from torchvision.models.vision_transformer import VisionTransformer

    net = VisionTransformer(
        image_size=resolution, patch_size=patch_size, num_layers=num_layers, num_heads=num_heads,
        hidden_dim=hidden_dim, mlp_dim=mlp_dim, num_classes=num_classes,
    )
    if in_channels != 3:
        # torchvision's stem is RGB only; this one is the same convolution on the data's channels, initialised as
        # torchvision initialises its own (truncated normal of std sqrt(1 / fan_in), zero bias)
        net.conv_proj = nn.Conv2d(in_channels, hidden_dim, kernel_size=patch_size, stride=patch_size)
        nn.init.trunc_normal_(net.conv_proj.weight, std=math.sqrt(1 / (in_channels * patch_size**2)))
        nn.init.zeros_(net.conv_proj.bias)
    return net


def vit_adapter(
    num_classes: int,
    *,
    patch_size: int,
    num_layers: int,
    num_heads: int,
    hidden_dim: int,
    mlp_dim: int,
    resolution: int = 224,
    reduction: int = REDUCTION,
    in_channels: int = 3,
    normalise: bool = True,
) -> AdaptedTransformer:
    """A torchvision ViT with adapters, RANDOMLY initialised: call ``load_pretrained`` next."""
    net = _vision_transformer(num_classes, in_channels, patch_size=patch_size, num_layers=num_layers,
                              num_heads=num_heads, hidden_dim=hidden_dim, mlp_dim=mlp_dim, resolution=resolution)
    return _finish(net, "vit", resolution, reduction, normalise)


# trained from scratch (the demo and smoke scales' pretraining run), defined here because it is vit_tiny_adapter's
# backbone
@MODELS.register(name="vit_tiny")
def vit_tiny(num_classes: int, in_channels: int = 3, image_size: int = 32, *,
             bn_running_stats: bool = True) -> ImageTransformer:
    """The miniature ViT (``TINY_VIT``) trained from scratch, every parameter trainable, no normalisation; inputs of
    another size are resized to 8. Its runs' model.pt is the backbone checkpoint of ``vit_tiny_adapter``.
    ``bn_running_stats``: it has LayerNorm only, so there is nothing to change."""
    net = _vision_transformer(num_classes, in_channels, **TINY_VIT)
    return ImageTransformer(net, "vit", TINY_VIT["resolution"], normalise=False)


# Checkpoint loading ---------------------------------------------------------------------------------------------
@dataclass
class LoadReport:
    """What ``load_pretrained`` did."""

    path: str
    layout: str  # "timm" or "torchvision"
    loaded: list[str]  # keys of the model's ``net`` set from the checkpoint
    kept: list[str]  # keys of ``net`` left as built: the adapters and the new head
    ignored: list[str] = field(default_factory=list)  # checkpoint keys deliberately unused (old head, masks, ...)


# One anchor tensor per family and layout locates the backbone inside any wrapper ("module.", "model.1.", ...).
_ANCHORS = {
    "swin": (("features.0.0.weight", "torchvision"), ("patch_embed.proj.weight", "timm")),
    "vit": (("conv_proj.weight", "torchvision"), ("patch_embed.proj.weight", "timm")),
}
_IGNORED = object()  # marks a checkpoint key that is not used on purpose


def _swin_from_timm(key: str, old_downsample: bool) -> object:
    """torchvision name of a timm Swin key (or _IGNORED). Unknown keys come back unchanged, so they show up as
    unexpected."""
    if key.startswith("head.") or key.endswith(".attn_mask"):
        return _IGNORED
    if m := re.fullmatch(r"patch_embed\.proj\.(weight|bias)", key):
        return f"features.0.0.{m[1]}"
    if m := re.fullmatch(r"patch_embed\.norm\.(weight|bias)", key):
        return f"features.0.2.{m[1]}"
    if m := re.fullmatch(r"layers\.(\d+)\.blocks\.(\d+)\.(.+)", key):
        rest = re.sub(r"^mlp\.fc1\.", "mlp.0.", re.sub(r"^mlp\.fc2\.", "mlp.3.", m[3]))
        return f"features.{2 * int(m[1]) + 1}.{m[2]}.{rest}"
    if m := re.fullmatch(r"layers\.(\d+)\.downsample\.(.+)", key):
        # timm < 0.9 merges patches at the end of stage i, later versions at the start of stage i + 1.
        stage = int(m[1])
        return f"features.{2 * stage + 2 if old_downsample else 2 * stage}.{m[2]}"
    return key


def _vit_from_timm(key: str) -> object:
    if key.startswith("head."):
        return _IGNORED
    fixed = {"cls_token": "class_token", "pos_embed": "encoder.pos_embedding"}
    if key in fixed:
        return fixed[key]
    if m := re.fullmatch(r"patch_embed\.proj\.(weight|bias)", key):
        return f"conv_proj.{m[1]}"
    if m := re.fullmatch(r"norm\.(weight|bias)", key):
        return f"encoder.ln.{m[1]}"
    if m := re.fullmatch(r"blocks\.(\d+)\.(.+)", key):
        block, rest = f"encoder.layers.encoder_layer_{m[1]}", m[2]
        renames = {"attn.qkv.weight": "self_attention.in_proj_weight", "attn.qkv.bias": "self_attention.in_proj_bias"}
        if rest in renames:
            return f"{block}.{renames[rest]}"
        for old, new in (("norm1.", "ln_1."), ("norm2.", "ln_2."), ("attn.proj.", "self_attention.out_proj."),
                         ("mlp.fc1.", "mlp.0."), ("mlp.fc2.", "mlp.3.")):
            if rest.startswith(old):
                return f"{block}.{new}{rest[len(old):]}"
    return key


def _state_dict(obj: object, path: Path) -> dict[str, torch.Tensor]:
    """The tensor dictionary inside a checkpoint (plain, or under 'state_dict'/'model'/'module'/'net')."""
    for _ in range(4):
        if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return obj
        if isinstance(obj, dict):
            inner = next((obj[k] for k in ("state_dict", "model", "module", "net") if isinstance(obj.get(k), dict)),
                         None)
            if inner is not None:
                obj = inner
                continue
        break
    raise PretrainedError(f"{path}: no state dict of tensors found (top-level keys: "
                          f"{sorted(obj)[:10] if isinstance(obj, dict) else type(obj).__name__})")


def _examples(keys, n: int = 5) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:n]) + (f", ... ({len(keys)} in all)" if len(keys) > n else "")


def load_pretrained(model: AdaptedTransformer, path: str | Path) -> LoadReport:
    """Load an (ARES) pretrained backbone into ``model`` from ``path``; the adapters and the head are kept.

    The file is read by ``tradeoff.storage.checkpoint.load``, as every weights file is (tensors and plain containers only; a
    damaged file, or one carrying pickled code, is refused in one line naming it). The backbone is found under any
    prefix ('module.', 'model.', ARES's 'model.1.' behind its normalisation layer, ...), in timm's or torchvision's
    layout. Every backbone tensor of ``model`` must be in the checkpoint with the same shape and
    the checkpoint must hold no other backbone tensors (a deeper or wider network); otherwise PretrainedError lists
    the missing, unexpected and mismatched keys and nothing is loaded. The checkpoint's own classifier, Swin's
    attention masks and the wrapper's extra entries are ignored (listed in the report).
    """
    path = Path(path)
    if not path.is_file():
        raise PretrainedError(f"pretrained checkpoint {path} does not exist")
    try:
        obj = checkpoint.load(path)
    except checkpoint.CheckpointError as err:
        raise PretrainedError(str(err)) from None
    raw = _state_dict(obj, path)

    family = model.family
    prefix, layout = _find_backbone(raw, family, path)
    ignored = [key for key in raw if not key.startswith(prefix)]
    keys = {key[len(prefix):]: value for key, value in raw.items() if key.startswith(prefix)}
    rename = _renamer(model, layout, keys)

    mapped: dict[str, torch.Tensor] = {}
    origin: dict[str, str] = {}  # torchvision key -> checkpoint key
    for key, value in keys.items():
        new = rename(key)
        if new is _IGNORED:
            ignored.append(prefix + key)
        else:
            mapped[str(new)] = value
            origin[str(new)] = prefix + key

    own = model.net.state_dict()
    # Swin's relative position index is a function of the window size, rebuilt by the model: newer timm does not
    # save it, older timm as a matrix. A saved one must agree with the model's, else the windows differ.
    for key in [key for key in mapped if key.endswith("relative_position_index")]:
        saved = mapped.pop(key)
        if key in own and not torch.equal(saved.flatten().to(own[key].dtype), own[key].flatten()):
            raise PretrainedError(f"{path}: {origin[key]} differs from this model's (another window size?); "
                                  "nothing was loaded")
        ignored.append(origin[key])
    problems = _misfits(mapped, own, {key for key in own if not model.is_trainable_key(key)})
    if problems:
        raise PretrainedError(f"{path} ({layout} layout, prefix {prefix!r}) does not fit this {family} backbone; "
                              f"nothing was loaded: {'; '.join(problems)}")

    result = model.net.load_state_dict(mapped, strict=False)
    assert not result.unexpected_keys
    report = LoadReport(str(path), layout, sorted(mapped), sorted(set(result.missing_keys)), sorted(ignored))
    _log.info("loaded %d backbone tensors from %s (%s layout); kept %d adapter/head tensors; ignored %s",
              len(report.loaded), path, layout, len(report.kept), _examples(report.ignored) or "nothing")
    return report


def _find_backbone(raw: dict[str, torch.Tensor], family: str, path: Path) -> tuple[str, str]:
    """The prefix under which a checkpoint holds a ``family`` backbone, and its layout: the first of the family's
    anchors that ends a key (the whole key, or after a dot) decides the layout; the shortest such prefix wins."""
    for anchor, layout in _ANCHORS[family]:
        prefixes = sorted((key[: -len(anchor)] for key in raw if key.endswith(anchor)
                           and (key == anchor or key[: -len(anchor)].endswith("."))), key=len)
        if prefixes:
            return prefixes[0], layout
    raise PretrainedError(f"{path}: no {family} backbone found (none of the keys ends in "
                          f"{' or '.join(a for a, _ in _ANCHORS[family])}); first keys: {_examples(raw)}")


def _renamer(model: AdaptedTransformer, layout: str, keys: dict[str, torch.Tensor]) -> Callable[[str], object]:
    """How a checkpoint key (its prefix removed) becomes the model's: timm's names translated (Swin's by the
    downsampling's place in ``keys``: an older timm's), torchvision's kept; _IGNORED for what is not the backbone's
    (the adapters, the head, Swin's attention masks)."""
    if layout == "timm":
        if model.family == "swin":
            old = any(re.match(r"layers\.0\.downsample\.", key) for key in keys)
            return partial(_swin_from_timm, old_downsample=old)
        return _vit_from_timm

    def rename(key: str) -> object:
        return _IGNORED if model.is_trainable_key(key) or key.endswith(".attn_mask") else key

    return rename


def _misfits(mapped: dict[str, torch.Tensor], own: dict[str, torch.Tensor], backbone: set[str]) -> list[str]:
    """Why the mapped checkpoint does not fit the model's ``backbone`` keys (``own``: the model's state): backbone
    tensors missing (the relative position index aside, which the model rebuilds), unexpected tensors, tensors of
    another shape; empty when it fits."""
    required = {key for key in backbone if not key.endswith("relative_position_index")}
    missing = required - mapped.keys()
    unexpected = mapped.keys() - backbone
    mismatched = {key: (tuple(mapped[key].shape), tuple(own[key].shape))
                  for key in mapped.keys() & backbone if mapped[key].shape != own[key].shape}
    problems = []
    if missing:
        problems.append(f"{len(missing)} backbone tensors missing: {_examples(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensors: {_examples(unexpected)}")
    if mismatched:
        shown = [f"{key} {a} vs {b}" for key, (a, b) in sorted(mismatched.items())[:5]]
        problems.append(f"{len(mismatched)} with another shape (checkpoint vs model): {', '.join(shown)}")
    return problems


# Registry builders ----------------------------------------------------------------------------------------------
def _check_channels(arch: str, in_channels: int) -> None:
    channels = PRETRAINED[arch].channels
    if channels is not None and in_channels != channels:
        raise ValueError(f"{arch} takes RGB images, not {in_channels} channels")


def bare_network(arch: str, num_classes: int, in_channels: int = 3, image_size: int = 224, *,
                 bn_running_stats: bool = True) -> AdaptedTransformer:
    """``arch`` with RANDOM weights and no checkpoint: only to load a complete saved state into (a fine-tuned run's
    model.pt, whose backbone tensors are the pretrained ones) or to count FLOPs and time steps. Training builds
    through ``PRETRAINED_MODELS``, which loads the configured backbone and never starts from random weights."""
    spec = PRETRAINED[arch]
    _check_channels(arch, in_channels)
    if spec.family == "swin":
        return swin_adapter(num_classes, **spec.config)
    return vit_adapter(num_classes, **spec.config, in_channels=in_channels, normalise=spec.normalise)


def _builder(arch: str) -> Callable[..., AdaptedTransformer]:
    spec = PRETRAINED[arch]

    def build(num_classes: int, in_channels: int = 3, image_size: int = 224, *, bn_running_stats: bool = True,
              pretrained: str | Path | None = None) -> AdaptedTransformer:
        # bn_running_stats: these networks use LayerNorm only, so it has nothing to change.
        _check_channels(arch, in_channels)
        path = pretrained_checkpoint_path(arch, pretrained)  # fails before the (slow) construction
        model = bare_network(arch, num_classes, in_channels, image_size)
        load_pretrained(model, path)
        return model

    resolution = spec.config.get("resolution", 224)
    build.__name__ = build.__qualname__ = arch
    build.__doc__ = (f"{arch}: {spec.family} with adapters from the checkpoint at ``pretrained`` ({spec.checkpoint}); "
                     f"inputs of any size are resized to {resolution}.")
    return build


# Every builder here needs the ``pretrained`` keyword of ``create_model``.
swin_t_adapter = PRETRAINED_MODELS.register(_builder("swin_t_adapter"), name="swin_t_adapter")
swin_s_adapter = PRETRAINED_MODELS.register(_builder("swin_s_adapter"), name="swin_s_adapter")
swin_b_adapter = PRETRAINED_MODELS.register(_builder("swin_b_adapter"), name="swin_b_adapter")
vit_b16_adapter = PRETRAINED_MODELS.register(_builder("vit_b16_adapter"), name="vit_b16_adapter")
vit_tiny_adapter = PRETRAINED_MODELS.register(_builder("vit_tiny_adapter"), name="vit_tiny_adapter")


def write_backbone(arch: str, path: str | Path) -> Path:
    """A generated backbone checkpoint for an adapter architecture (``pretrained.<arch>``), in torchvision's layout,
    which ``tradeoff.models.adapters.load_pretrained`` reads as it reads ARES's files: the architecture's whole
    backbone (no adapters, no head) with seeded random weights, under ``model`` as ARES's wrapper saves it, with a
    ``generated`` note beside it. Not a pretrained model: the rehearsal only needs the shapes and the loading."""
    torch.manual_seed(0)
    model = bare_network(arch, num_classes=1000)
    state = {key: value for key, value in model.net.state_dict().items() if not model.is_trainable_key(key)}
    path = Path(path)
    checkpoint.save({"model": state, "generated": f"tradeoff.models.adapters.write_backbone: seeded random weights of "
                     f"{arch}'s backbone, not a pretrained model"}, path)
    return path
