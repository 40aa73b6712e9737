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

#: the external-model format of a model from a Python file (tradeoff.evaluation.external.load_external dispatches on it)
PYTHON_FORMAT = "python"


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


def load(path: str | Path, function: str, device: torch.device | str = "cpu") -> nn.Module:
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
