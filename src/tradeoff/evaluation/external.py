"""Models this pipeline did not train: a checkpoint file of a registered architecture, loaded weights-only into it.

An external model (the config's ``external:`` section, or ``tradeoff evaluate --checkpoint FILE --arch A --dataset
D``) is evaluated exactly as a trained run's model.pt is: rebuilt bare (``tradeoff.models.create_model``, every
BatchNorm with running statistics), its state loaded strictly, in eval mode and fp32, on [0, 1] images. What it
measured is the file's SHA-256, which its metrics record and a report checks.

The file is read with ``torch.load(weights_only=True)`` (tradeoff.storage.checkpoint.load): a file that carries pickled code
is refused and nothing in it runs. Its tensors may sit in a container (``state_dict``, ``model``, ``model_state_dict``,
``net``, ``module``; RobustBench's ``last``) and carry DataParallel's ``module.`` prefix. Their names may be in one of
the layouts of tradeoff.models.zoo_names (``plain``, ``robustbench``, ``torchvision``, ``timm``; which each architecture accepts:
``zoo.LAYOUTS``); ``auto`` takes the first that fits exactly. A file that fits none is refused in one line naming the
missing, unexpected and misshapen keys of the closest layout.

Input normalisation (``normalize``, per channel) is applied inside the model, ``(x - mean) / std`` before the
network, so attacks still perturb [0, 1] images. A RobustBench file whose model normalises with ``mu``/``sigma``
buffers carries them: they are used, and a different ``normalize`` is refused.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tradeoff import models
from tradeoff.core.spec import ExternalSpec, thaw
from tradeoff.data.declared import DECLARED as DATASET_DECLARATIONS
from tradeoff.models import adapters
from tradeoff.models import zoo_names as zoo
from tradeoff.storage import checkpoint
from tradeoff.storage.atomic import sha256_file
from tradeoff.storage.checkpoint import CheckpointError

log = logging.getLogger(__name__)

# containers a checkpoint's state dict is found in (RobustBench: 'state_dict', and 'last' of
# Andriushchenko2020Understanding's and Kireev2021Effectiveness's files, robustbench/utils.py load_model)
CONTAINERS = ("state_dict", "model", "model_state_dict", "net", "module", "last")
# RobustBench's input normalisation buffers (e.g. Rice2020OverfittingNet in robustbench/model_zoo/cifar10.py)
NORMALIZE_KEYS = (("mu", "sigma"), ("normalize.mean", "normalize.std"))


class Normalized(nn.Module):
    """``model((x - mean) / std)``: a network trained on normalised inputs, taking [0, 1] images."""

    def __init__(self, model: nn.Module, mean: list[float], std: list[float]):
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean) / self.std)


def _tensors(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    """The state dict inside a loaded checkpoint: a dict of tensors, or one inside a container."""
    seen = obj
    for _ in range(4):
        if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return {str(k): v for k, v in obj.items()}
        inner = next((obj[k] for k in CONTAINERS if isinstance(obj, dict) and isinstance(obj.get(k), dict)), None)
        if inner is None:
            break
        obj = inner
    held = (f"top-level keys {sorted(map(str, seen))[:8]}" if isinstance(seen, dict) else f"a {type(seen).__name__}")
    raise CheckpointError(f"{path}: no state dict of tensors in it ({held}; a model's tensors are looked for at the "
                          f"top or under {', '.join(repr(c) for c in CONTAINERS)})")


def _strip(keys: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Keys without a prefix, where they have it (as RobustBench's load_model removes 'module.', then 'model.')."""
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in keys.items()}


def _resnet_from_torchvision(key: str) -> str:
    """torchvision's (and timm's) ResNet names -> this pipeline's (kuangliu's CIFAR ResNet, RobustBench's)."""
    key = re.sub(r"^fc\.", "linear.", key)
    return re.sub(r"\.downsample\.", ".shortcut.", key)


def _transformer_from_timm(arch: str, keys: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm's ViT / Swin names -> torchvision's, as tradeoff.models.adapters renames a pretrained backbone, the
    classifier ('head.') included."""
    family = "swin" if arch.startswith("swin") else "vit"
    old = any(re.match(r"layers\.0\.downsample\.", k) for k in keys)
    out = {}
    for key, value in keys.items():
        if key.startswith("head."):  # the classifier: timm's head (newer Swin: head.fc), torchvision's heads.head
            rest = key[len("head."):]
            rest = rest[len("fc."):] if rest.startswith("fc.") else rest
            out[("head." if family == "swin" else "heads.head.") + rest] = value
            continue
        new = adapters._swin_from_timm(key, old) if family == "swin" else adapters._vit_from_timm(key)
        if new is not adapters._IGNORED:
            out[str(new)] = value
    return out


def _renamed(layout: str, arch: str, raw: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str], dict]:
    """(the state in this pipeline's names, the file's keys deliberately left out, normalisation the file carries)
    of a checkpoint's tensors read in ``layout``."""
    keys = _strip(raw, "module.")
    ignored: list[str] = []
    carried: dict = {}
    transformer = arch.startswith(("vit", "swin"))
    if layout == "robustbench":
        keys = _strip(keys, "model.")
        for mean_key, std_key in NORMALIZE_KEYS:
            if mean_key in keys and std_key in keys:
                carried = {"mean": keys.pop(mean_key).flatten().tolist(), "std": keys.pop(std_key).flatten().tolist()}
                ignored += [mean_key, std_key]
        if arch.startswith("wrn"):  # RobustBench's WideResNet(sub_block1=True), as TRADES': built, never used
            ignored += [k for k in keys if k.startswith("sub_block1.")]
            keys = {k: v for k, v in keys.items() if not k.startswith("sub_block1.")}
    elif layout in ("torchvision", "timm") and arch.startswith("resnet"):
        keys = {_resnet_from_torchvision(k): v for k, v in keys.items()}
    elif layout == "timm" and transformer:
        keys = {f"net.{k}": v for k, v in _transformer_from_timm(arch, keys).items()}
    elif layout == "torchvision" and transformer:
        keys = {f"net.{k}": v for k, v in keys.items()}
    return keys, ignored, carried


def _examples(keys: list[str], n: int = 5) -> str:
    return "[" + ", ".join(keys[:n]) + (f", ... ({len(keys)} in all)" if len(keys) > n else "") + "]"


def _fit(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> tuple[list, list, list]:
    """(missing, unexpected, of another shape) keys of ``state`` against a model's own state; a BatchNorm's
    ``num_batches_tracked`` (a counter no evaluation reads, absent from older files) is not missing."""
    missing = sorted(k for k in set(expected) - set(state) if not k.endswith("num_batches_tracked"))
    unexpected = sorted(set(state) - set(expected))
    misfit = sorted(f"{k} {tuple(state[k].shape)} in the file, {tuple(expected[k].shape)} here"
                    for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    return missing, unexpected, misfit


def load(path: str | Path, spec: ExternalSpec, device: torch.device | str = "cpu", *,
         model_id: str = "external") -> tuple[nn.Module, dict]:
    """An external model, in eval mode and fp32, with metadata as a trained run's model.pt has it (``run``, ``spec``,
    ``num_classes``, ``in_channels``, ``image_size``) and ``external``: the file, its SHA-256, the layout that fitted
    and the normalisation applied. ``spec``: an external model's resolved settings (tradeoff.config: ``arch``,
    ``dataset``, ``normalize``, ``format``, ``sha256``), which the metadata's ``spec`` holds in their JSON form.
    CheckpointError (one line) for a file that cannot be read, carries pickled code, differs from its pinned SHA-256,
    or fits none of the architecture's layouts. Callers load it through tradeoff.evaluation.load.load_model (which
    gives a model of the user's own Python file, ``format`` python, to tradeoff.evaluation.user_model)."""
    path = Path(path)
    arch, fmt = spec.arch, spec.format or "auto"
    if not path.is_file():
        raise CheckpointError(f"cannot load checkpoint {path}: " + ("it is a folder" if path.is_dir()
                                                                   else "no such file"))
    sha = sha256_file(path)
    if spec.sha256 and spec.sha256 != sha:
        raise CheckpointError(f"{path}: its SHA-256 is {sha}, not the {spec.sha256} that its settings pin (another "
                              "file, or a changed one): refused")
    raw = _tensors(checkpoint.load(path), path)
    declared = DATASET_DECLARATIONS[spec.dataset]
    shape, num_classes = declared.image_shape, declared.num_classes
    model = models.create_model(arch, num_classes, in_channels=shape[0], image_size=shape[1])
    expected = model.state_dict()
    accepted = zoo.layouts(arch)
    if fmt != "auto" and fmt not in accepted:
        raise CheckpointError(f"{path}: architecture {arch!r} is not read in the {fmt} layout; it accepts "
                              f"{', '.join(accepted)} (or auto)")
    tried = accepted if fmt == "auto" else (fmt,)
    best = None
    for layout in tried:
        state, ignored, carried = _renamed(layout, arch, raw)
        problems = _fit(state, expected)
        if not any(problems):
            break
        if best is None or sum(map(len, problems)) < sum(map(len, best[1])):
            best = (layout, problems)
    else:
        layout, (missing, unexpected, misfit) = best
        found = "; ".join(f"{label} {_examples(keys)}" for label, keys in
                          (("missing", missing), ("unexpected", unexpected), ("of another shape", misfit)) if keys)
        how = (f"read in the {layout} layout" if fmt != "auto" else
               f"closest in the {layout} layout of those {arch!r} accepts, {', '.join(accepted)}")
        raise CheckpointError(f"{path}: its weights do not fit architecture {arch!r} for {spec.dataset} "
                              f"({num_classes} classes, {shape[0]} channels; {how}): {found}")
    for key in set(expected) - set(state):  # num_batches_tracked only (_fit)
        state[key] = expected[key]
    model.load_state_dict(state, strict=True)
    normalize = thaw(spec.normalize)  # plain lists: the metadata's record of it
    if carried:
        if len(carried["mean"]) != shape[0] or len(carried["std"]) != shape[0]:
            raise CheckpointError(f"{path}: its normalisation (mu, sigma) has {len(carried['mean'])} channels, the "
                                  f"dataset's images {shape[0]}")
        given = normalize
        if given is not None and any(abs(a - b) > 1e-6 for a, b in zip(given["mean"] + given["std"],
                                                                         carried["mean"] + carried["std"])):
            raise CheckpointError(f"{path}: the file carries its model's input normalisation (mean {carried['mean']}, "
                                  f"std {carried['std']}), but the settings give mean {given['mean']}, std "
                                  f"{given['std']}: leave `normalize` out (the file's is used) or make them agree")
        normalize = carried
    if normalize is not None:
        model = Normalized(model, normalize["mean"], normalize["std"])
    log.info("%s: %s on %s, %s layout (%d tensors%s)%s", path, arch, spec.dataset, layout, len(state),
             f", left out {_examples(ignored, 3)}" if ignored else "",
             f", normalised by mean {normalize['mean']} std {normalize['std']}" if normalize else "")
    meta = {"run": model_id, "spec": spec.as_dict(), "selected_epoch": None, "num_classes": num_classes,
            "in_channels": shape[0], "image_size": shape[1],
            "external": {"checkpoint": str(path), "sha256": sha, "layout": layout, "normalize": normalize,
                         "normalize_from": "file" if carried else ("settings" if normalize else None)}}
    return model.to(device).float().eval(), meta


def name_of(path: str | Path) -> str:
    """An id for a checkpoint evaluated from the command line without ``--name``: its file name's stem, in the
    characters of a run id."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", Path(path).stem.lower()).strip("-_")
    return stem if stem and stem[0].isalnum() else f"model-{stem}".rstrip("-")

