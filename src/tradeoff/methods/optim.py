"""Optimizers and the papers' piecewise-linear schedules."""

from __future__ import annotations

from typing import Iterable, Sequence

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.spec import Optimizer

torch = LazyModule("torch")  # imported when an optimizer is built: the methods' classes are read without PyTorch


def piecewise_linear(t: float, epochs: Sequence[float], values: Sequence[float]) -> float:
    """Linear interpolation through (epochs[i], values[i]); constant before the first and after the last
    breakpoint (as numpy.interp, with which the Generalist code sets its learning rate).

    Not numpy.interp itself: numpy computes the slope first (``v0 + (v1 - v0) / (e1 - e0) * (t - e0)``), which
    differs in the last bit at about a third of the fractional epochs the catalog's schedules are read at, so every
    trained model would change; and at a repeated breakpoint (a step, ``[.., 40, 40, ..]``) it takes the value after
    the step where this takes the one before it."""
    if len(epochs) != len(values):
        raise ValueError(f"schedule has {len(epochs)} breakpoints but {len(values)} values")
    if t <= epochs[0]:
        return float(values[0])
    for (e0, v0), (e1, v1) in zip(zip(epochs, values), zip(epochs[1:], values[1:])):
        if t <= e1:
            return float(v0 + (v1 - v0) * (t - e0) / (e1 - e0))
    return float(values[-1])


def build_optimizer(params: Iterable[torch.nn.Parameter], cfg: Optimizer, lr: float) -> torch.optim.Optimizer:
    """The optimizer of ``cfg`` (a run's ``optimizer``, or Generalist's ``nt_optimizer`` as one) at ``lr``; a field
    left unset (None) is the optimizer's own default (momentum 0, weight decay 0, no Nesterov, betas (0.9, 0.999))."""
    weight_decay = 0.0 if cfg.weight_decay is None else cfg.weight_decay
    if cfg.name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.0 if cfg.momentum is None else cfg.momentum,
                               weight_decay=weight_decay, nesterov=False if cfg.nesterov is None else cfg.nesterov)
    if cfg.name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999) if cfg.betas is None else tuple(cfg.betas),
                                weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {cfg.name!r}; allowed: ['adam', 'sgd']")


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
