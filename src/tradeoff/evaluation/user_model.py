"""A model from the user's own Python file: ``FILE.py:FUNCTION`` (``tradeoff evaluate --model``, ``tradeoff audit
--model``), where FUNCTION() returns a ``torch.nn.Module`` that takes images in [0, 1] (N, C, H, W) and returns
logits, with whatever it needs inside: input normalisation, preprocessing, randomness, a detector.

The file is imported and FUNCTION called as ordinary Python: it is the user's own code and runs with the user's
rights (docs/external-models.md); nothing here sandboxes it. What is recorded of it is the file's SHA-256 (the code
that was measured; weights the function reads from elsewhere are the user's to pin).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import torch
from torch import nn

from tradeoff.core.errors import UserError
from tradeoff.core.spec import ExternalSpec, thaw
from tradeoff.data.declared import DECLARED as DATASET_DECLARATIONS
from tradeoff.evaluation.external import Normalized
from tradeoff.storage.atomic import sha256_file
from tradeoff.storage.checkpoint import CheckpointError


class UserModelError(UserError, ValueError):
    pass


def parse(reference: str) -> tuple[Path, str]:
    """``FILE.py:FUNCTION`` -> (the file, the function's name); one clear line for anything else."""
    file, sep, function = str(reference).rpartition(":")
    if not sep or not file or not function.isidentifier():
        raise UserModelError(f"--model {reference!r}: expected FILE.py:FUNCTION (a Python file and the name of a "
                             "function in it that returns a torch.nn.Module)")
    path = Path(file).expanduser().resolve()
    if path.suffix != ".py":
        raise UserModelError(f"--model {reference!r}: {path.name} is not a Python file (FILE.py:FUNCTION)")
    if not path.is_file():
        raise UserModelError(f"--model {reference!r}: {path}: no such file")
    return path, function


def arch_of(function: str) -> str:
    """The ``arch`` an external model from a Python file records: the function that builds it."""
    return f"python:{function}"


def build(path: str | Path, function: str, device: torch.device | str = "cpu") -> nn.Module:
    """Import ``path`` (the user's own code, run as such) and return ``function()``: a torch.nn.Module, in eval mode,
    fp32, on ``device``."""
    path = Path(path)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"tradeoff_user_model_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserModelError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UserModelError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    build = getattr(module, function, None)
    if not callable(build):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == name)
        raise UserModelError(f"{path}: no function {function!r} in it (its functions: {', '.join(found) or 'none'})")
    try:
        model = build()
    except Exception as exc:
        raise UserModelError(f"{path}:{function}() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise UserModelError(f"{path}:{function}() returned a {type(model).__name__}, not a torch.nn.Module")
    return model.to(device).float().eval()


#: the images of the forward pass that checks a user's model before any evaluation (check_forward)
CHECK_BATCH = 2


def check_forward(model: nn.Module, where: str, dataset: str, device: torch.device | str = "cpu") -> None:
    """One forward pass of ``model`` on a batch of ``dataset``'s shape (CHECK_BATCH seeded images in [0, 1]), before
    any evaluation: a model that does not take the dataset's images, or whose outputs are not the dataset's logits (a
    2-D tensor, one row per image and one column per class, finite), is refused in one line naming ``where`` (the
    file and function) and what was expected, instead of a PyTorch traceback or a silent evaluation of the wrong
    classes."""
    declared = DATASET_DECLARATIONS[dataset]
    shape, classes = tuple(declared.image_shape), declared.num_classes
    images = "×".join(map(str, shape))
    expected = f"logits of shape ({CHECK_BATCH}, {classes}) for {dataset}'s {classes} classes"
    generator = torch.Generator().manual_seed(0)
    x = torch.rand((CHECK_BATCH, *shape), generator=generator).to(device)
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as exc:  # noqa: BLE001 - whatever the user's code raises is the finding
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        raise UserModelError(f"{where}: a batch of {dataset}'s images ({CHECK_BATCH}×{images}, in [0, 1]) made it raise "
                             f"{type(exc).__name__}" + (f": {first}" if first else "") + f"; expected a model "
                             f"that takes {images} images and returns {expected}") from None
    if not isinstance(out, torch.Tensor):
        raise UserModelError(f"{where}: on a batch of {dataset}'s images it returned a {type(out).__name__}, not a "
                             f"tensor; expected {expected}")
    if out.dim() != 2 or out.shape[0] != CHECK_BATCH:
        raise UserModelError(f"{where}: on a batch of {CHECK_BATCH} {dataset} images ({images}) it returned a tensor "
                             f"of shape {tuple(out.shape)}; expected {expected}")
    if out.shape[1] != classes:
        raise UserModelError(f"{where}: it returns {out.shape[1]} outputs per image, but {dataset} has {classes} "
                             f"classes; expected {expected}")
    if not torch.isfinite(out).all():
        raise UserModelError(f"{where}: its outputs on a batch of {dataset}'s images ({CHECK_BATCH}×{images}, in "
                             f"[0, 1]) are not finite (NaN or infinite); expected finite {expected}")


def load(path: str | Path, spec: ExternalSpec, device: torch.device | str = "cpu", *,
         model_id: str = "external") -> tuple[nn.Module, dict]:
    """A model that FUNCTION() of the user's Python file returns (``arch`` ``python:FUNCTION``), checked by one
    forward pass on a batch of its dataset's shape (:func:`check_forward`), with the metadata an external model's
    load gives (tradeoff.evaluation.external.load); its SHA-256 is the file's. Callers load it through
    tradeoff.evaluation.load.load_model."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"cannot load model file {path}: no such file")
    sha = sha256_file(path)
    if spec.sha256 and spec.sha256 != sha:
        raise CheckpointError(f"{path}: its SHA-256 is {sha}, not the {spec.sha256} that its settings pin: refused")
    function = spec.arch.split(":", 1)[1]
    model = build(path, function, device)
    declared = DATASET_DECLARATIONS[spec.dataset]
    shape, num_classes = declared.image_shape, declared.num_classes
    normalize = thaw(spec.normalize)
    if normalize is not None:
        model = Normalized(model, normalize["mean"], normalize["std"]).to(device)
    check_forward(model, f"{path}:{function}()", spec.dataset, device)
    meta = {"run": model_id, "spec": spec.as_dict(), "selected_epoch": None, "num_classes": num_classes,
            "in_channels": shape[0], "image_size": shape[1],
            "external": {"checkpoint": str(path), "sha256": sha, "layout": "python", "function": function,
                         "normalize": normalize, "normalize_from": "settings" if normalize else None}}
    return model.float().eval(), meta
