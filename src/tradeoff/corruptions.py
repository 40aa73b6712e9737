"""Natural robustness (NROB) on Tiny-ImageNet-C, as in Zipper's Table 4.

Following Hendrycks & Dietterich (ICLR 2019), a model's accuracy on one corruption is its mean accuracy over
the five severities, and NROB is the mean of that over the 15 corruptions (Zipper, Appendix A.4: "the average
classification accuracy over all 15 corruptions"). Every (corruption, severity) set holds the same 10,000
images, so this also equals the accuracy over all 750,000 corrupted images; it is computed as the mean of means
all the same, which stays the published definition if a set were ever short.

Evaluation is in eval mode, fp32 (autocast off) and without gradients; the model's mode is restored afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from .data import CORRUPTIONS, SEVERITIES, load_corruptions

__all__ = ["CORRUPTIONS", "SEVERITIES", "accuracy", "nrob"]


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int,
             device: str | torch.device) -> float:
    """Top-1 accuracy of ``model`` (already on ``device``, in the caller's mode) on ``(x, y)``, in fp32."""
    if len(x) == 0:
        raise ValueError("accuracy of an empty set is undefined")
    device = torch.device(device)
    correct = 0
    with torch.no_grad(), torch.autocast(device.type, enabled=False):
        for start in range(0, len(x), batch_size):
            xb = x[start:start + batch_size].to(device, torch.float32, non_blocking=True)
            yb = y[start:start + batch_size].to(device, non_blocking=True)
            correct += int((model(xb).argmax(dim=1) == yb).sum())
    return correct / len(x)


def nrob(
    model: nn.Module,
    data_root: str | Path,
    *,
    batch_size: int,
    device: str | torch.device,
    severities: Sequence[int] = SEVERITIES,
    corruptions: Sequence[str] = CORRUPTIONS,
) -> dict:
    """Accuracy of ``model`` (already on ``device``) on Tiny-ImageNet-C in ``data_root``.

    Returns ``{"nrob": mean over corruptions, "corruptions": {name: mean over severities},
    "severities": {name: {severity: accuracy}}}``, accuracies as fractions in [0, 1]. ``corruptions`` exists for
    partial runs and tests; NROB as published uses all 15.
    """
    if not corruptions or not severities:
        raise ValueError("nrob needs at least one corruption and one severity")
    sets = load_corruptions(data_root, corruptions=corruptions, severities=severities)
    was_training = model.training
    model.eval()
    per_severity: dict[str, dict[int, float]] = {}
    try:
        for corruption in corruptions:
            per_severity[corruption] = {
                int(severity): accuracy(model, *sets[(corruption, severity)], batch_size=batch_size, device=device)
                for severity in severities
            }
    finally:
        model.train(was_training)
    per_corruption = {name: sum(accs.values()) / len(accs) for name, accs in per_severity.items()}
    return {
        "nrob": sum(per_corruption.values()) / len(per_corruption),
        "corruptions": per_corruption,
        "severities": per_severity,
    }
