"""Reading a trained run's model: its selected model, rebuilt from model.pt alone, in eval mode and fp32 (callers load
it through tradeoff.evaluation.load.load_model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tradeoff import models
from tradeoff.storage import checkpoint


def load(path: str | Path, device: torch.device | str = "cpu") -> tuple[nn.Module, dict]:
    """A trained run's selected model, in eval mode and fp32, with its metadata.

    model.pt holds every tensor of the model, so the architecture is rebuilt bare and the state loaded strictly: an
    adapter model's pretrained backbone file is not read (nor needed) here, only to start its training."""
    obj = checkpoint.load(path)
    if not isinstance(obj, dict) or not {"model", "meta"} <= set(obj):
        held = f"keys {sorted(map(str, obj))}" if isinstance(obj, dict) else f"a {type(obj).__name__}"
        raise checkpoint.CheckpointError(f"{path} is not a model written by `tradeoff train`: it holds {held}; a "
                                         "model.pt holds 'model' and 'meta' (evaluate another model's file with "
                                         "`tradeoff evaluate --checkpoint FILE --arch A --dataset D`)")
    try:
        meta: dict[str, Any] = json.loads(obj["meta"])
        # the run's settings as model.pt records them (RunSpec.as_dict(): JSON), read as the record they are: a file
        # of an older trainer, or one whose settings have since gained a field, still loads
        spec = meta["spec"]
        model = models.create_model(spec["arch"], meta["num_classes"], in_channels=meta["in_channels"],
                                    image_size=meta["image_size"], bn_running_stats=spec["bn_running_stats"])
    except (TypeError, ValueError, KeyError) as exc:
        raise checkpoint.CheckpointError(f"{path}: its metadata ('meta') is not that of a model written by "
                                         f"`tradeoff train` ({type(exc).__name__}: {exc})") from None
    weights = obj["model"]
    expected = model.state_dict()
    if not isinstance(weights, dict):
        raise checkpoint.CheckpointError(f"{path}: its 'model' is a {type(weights).__name__}, not a state dict")
    missing, unexpected = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    misfit = sorted(k for k in set(expected) & set(weights)
                    if not isinstance(weights[k], torch.Tensor) or weights[k].shape != expected[k].shape)
    if missing or unexpected or misfit:
        found = [f"{label} {keys[:3]}{' ...' if len(keys) > 3 else ''}" for label, keys in
                 (("missing", missing), ("unexpected", unexpected), ("of another shape", misfit)) if keys]
        raise checkpoint.CheckpointError(f"{path}: its weights do not fit its architecture {spec['arch']!r}: "
                                         + "; ".join(found))
    model.load_state_dict(weights, strict=True)
    return model.to(device).float().eval(), meta
