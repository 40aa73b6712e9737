"""Natural robustness (NROB) on a corruption dataset: Tiny-ImageNet-C as in Zipper's Table 4, or digits-c.

Following Hendrycks & Dietterich (ICLR 2019), a model's accuracy on one corruption is its mean accuracy over
the five severities, and NROB is the mean of that over the corruptions (Zipper, Appendix A.4: "the average
classification accuracy over all 15 corruptions"; digits-c has 13, see ``tradeoff.data.digits_c``). Every (corruption,
severity) set holds the same test images in the same order (checked), so this also equals the accuracy over all
corrupted images; it is computed as the mean of means all the same, the published definition.

Evaluation is in eval mode, fp32 (autocast off) and without gradients; the model's mode is restored afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from tradeoff.data.datasets import load_corruptions
from tradeoff.data.hendrycks import CORRUPTIONS, SEVERITIES
from tradeoff.data.registry import DatasetError
from tradeoff.data.splits import subset
from tradeoff.storage.layout import bits

__all__ = ["CORRUPTIONS", "SEVERITIES", "accuracy", "correct", "nrob"]


def correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int,
            device: str | torch.device) -> torch.Tensor:
    """Per example, whether ``model`` (already on ``device``, in the caller's mode) classifies it correctly, in fp32
    and without gradients: a bool tensor on the CPU."""
    device = torch.device(device)
    parts = []
    with torch.no_grad(), torch.autocast(device.type, enabled=False):
        for start in range(0, len(x), batch_size):
            xb = x[start:start + batch_size].to(device, torch.float32, non_blocking=True)
            yb = y[start:start + batch_size].to(device, non_blocking=True)
            parts.append((model(xb).argmax(dim=1) == yb).cpu())
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int,
             device: str | torch.device) -> float:
    """Top-1 accuracy of ``model`` (already on ``device``, in the caller's mode) on ``(x, y)``, in fp32."""
    if len(x) == 0:
        raise ValueError("accuracy of an empty set is undefined")
    return int(correct(model, x, y, batch_size=batch_size, device=device).sum()) / len(x)


def nrob(
    model: nn.Module,
    data_root: str | Path,
    *,
    batch_size: int,
    device: str | torch.device,
    dataset: str = "tinyimagenet-c",
    severities: Sequence[int] = SEVERITIES,
    corruptions: Sequence[str] | None = None,
    examples: int | None = None,
) -> dict:
    """Accuracy of ``model`` (already on ``device``) on the corruption dataset ``dataset`` in ``data_root``.

    Returns ``{"nrob": mean over corruptions, "corruptions": {name: mean over severities},
    "severities": {name: {severity: accuracy}}, "labels": the sets' labels, "correct": {name: {severity: "0110..."}}}``,
    accuracies as fractions in [0, 1] and per example whether it is classified correctly. ``corruptions`` (default:
    all of the dataset's) and ``severities`` exist for partial runs and tests; NROB as published uses all. With
    ``examples``, every set is cut to the first N of the fixed permutation that cuts a run's test set
    (``scale_map.test_examples``), so on digits-c a run is measured on the corrupted versions of its own test images.
    """
    if (corruptions is not None and not corruptions) or not severities:
        raise ValueError("nrob needs at least one corruption and one severity")
    sets = load_corruptions(data_root, dataset=dataset, corruptions=corruptions, severities=severities)
    was_training = model.training
    model.eval()
    per_severity: dict[str, dict[int, float]] = {}
    marks: dict[str, dict[int, str]] = {}
    labels = None
    try:
        for corruption, severity in sets:
            x, y = subset(*sets[(corruption, severity)], examples)
            if labels is None:
                labels = y
            elif not torch.equal(y, labels):
                raise DatasetError(f"{dataset}: {corruption} at severity {severity} holds other images than "
                                   f"{next(iter(sets))[0]} at severity {next(iter(sets))[1]}")
            if len(y) == 0:
                raise ValueError(f"{dataset}: {corruption} at severity {severity} is empty")
            right = correct(model, x, y, batch_size=batch_size, device=device)
            per_severity.setdefault(corruption, {})[int(severity)] = int(right.sum()) / len(right)
            marks.setdefault(corruption, {})[int(severity)] = bits(right)
    finally:
        model.train(was_training)
    per_corruption = {name: sum(accs.values()) / len(accs) for name, accs in per_severity.items()}
    return {
        "nrob": sum(per_corruption.values()) / len(per_corruption),
        "corruptions": per_corruption,
        "severities": per_severity,
        "labels": labels.tolist(),
        "correct": marks,
    }
