"""The adaptive attacks of the audit's BPDA check, where masking is suspected: the model with BPDA's identity for its
non-differentiable parts (:class:`StraightThrough`: its ``preprocess`` where it names one, else every rounding-like
operation, :class:`StraightThroughMode`), or with its input gradient estimated from its outputs (:class:`NES`), each
attacked with APGD (the official code) and judged on the model itself (:func:`adaptive`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff.attacks import frozen
from tradeoff.attacks.autoattack import run_component
from tradeoff.attacks.base import add_counts, judge
from tradeoff.attacks.loop import batch_seed
from tradeoff.audit.auditor import Auditor
from tradeoff.core.spec import AttackSpec
from tradeoff.storage.layout import bits

#: the operations without a useful gradient that the straight-through probe passes the gradient through unchanged
ROUNDING = ("round", "floor", "ceil", "trunc", "sign", "detach")


class _PassThrough(torch.autograd.Function):
    """``value`` forward (exactly the operation's result), the identity to ``x`` backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return value.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


class StraightThroughMode(torch.overrides.TorchFunctionMode):
    """While active, every rounding-like operation (:data:`ROUNDING`: round, floor, ceil, trunc, sign, detach) on a
    tensor that requires a gradient gives its exact result forward and the identity backward: BPDA with the identity
    (Athalye et al. 2018, Sec. 4.1) for the parts of any model that have no gradient, without naming them."""

    funcs = frozenset(f for name in ROUNDING for f in (getattr(torch, name, None), getattr(torch.Tensor, name, None))
                      if f is not None)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in self.funcs and args and isinstance(args[0], torch.Tensor) and args[0].requires_grad \
                and isinstance(out, torch.Tensor) and out.shape == args[0].shape and "out" not in kwargs:
            return _PassThrough.apply(args[0], out.detach())
        return out


class StraightThrough(nn.Module):
    """The model with BPDA's identity for its non-differentiable parts: ``preprocess`` where the model names it
    (forward = classifier(preprocess(x))), else every rounding-like operation (:class:`StraightThroughMode`)."""

    def __init__(self, model: nn.Module, staged: nn.Module | None = None):
        super().__init__()
        self.model, self.staged = model, staged

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.staged is not None:
            pre = self.staged.preprocess(x)
            return self.staged.classifier(_PassThrough.apply(x, pre.detach()) if x.requires_grad else pre)
        if not x.requires_grad:
            return self.model(x)
        with StraightThroughMode():
            return self.model(x)


class _NESBackward(torch.autograd.Function):
    """The model's output forward; backward, the vector-Jacobian product estimated from the outputs alone (NES:
    antithetic Gaussian samples, Ilyas et al. 2018), so that any gradient attack runs on a model without a gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, holder: "NES") -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.holder = holder
        with torch.no_grad():
            return holder.model(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        h = ctx.holder
        est = torch.zeros_like(x)
        shape = (-1, *([1] * (x.dim() - 1)))
        with torch.no_grad():
            for _ in range(max(h.samples // 2, 1)):
                u = torch.randn(x.shape, generator=h.gen, device=x.device, dtype=x.dtype)
                up = (h.model((x + h.sigma * u).clamp(0, 1)).float() * grad).sum(1)
                down = (h.model((x - h.sigma * u).clamp(0, 1)).float() * grad).sum(1)
                est += torch.nan_to_num(up - down, nan=0.0, posinf=0.0, neginf=0.0).view(shape) * u
        return est / (2 * max(h.samples // 2, 1) * h.sigma), None


class NES(nn.Module):
    """The model, its input gradient estimated by NES (:class:`_NESBackward`) at scale ``sigma``."""

    def __init__(self, model: nn.Module, sigma: float, samples: int, seed: int, device: torch.device):
        super().__init__()
        self.model, self.sigma, self.samples = model, sigma, samples
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.requires_grad:
            return self.model(x)
        return _NESBackward.apply(x, self)


def adaptive(audit: Auditor, spec: AttackSpec) -> tuple[dict[str, str], list[str]]:
    """The adaptive attacks' flags by label (each kept as a measurement), and notes on what did not run."""
    s, tag = audit.settings, audit.tag(spec)
    staged = audit.staged()
    bpda = StraightThrough(audit.model, staged)
    found, notes = {}, []
    grads = _wrapped_gradients(audit, bpda)
    usable = grads is not None and float(grads) <= s.max_zero_gradients
    runs = []
    if usable:
        runs += [(f"BPDA-APGD-CE x{s.adaptive_restarts}{tag}", bpda, "apgd-ce",
                  {"restarts": s.adaptive_restarts}),
                 (f"BPDA-APGD-T{tag}", bpda, "apgd-t", {"target_classes": 9})]
    else:
        notes.append("BPDA's gradients are unusable too: NES in their place")
        sigma = spec.eps / 2 if str(spec.norm) == "linf" else spec.eps / 2 / math.sqrt(audit.x[0].numel())
        nes = NES(audit.model, sigma, s.nes_samples, audit.seed + 31337, audit.x.device)
        runs += [(f"NES-APGD-DLR{tag}" if audit.model_classes() >= 3 else f"NES-APGD-CE{tag}", nes,
                  "apgd-dlr" if audit.model_classes() >= 3 else "apgd-ce", {"restarts": 1})]
    for label, wrapped, kind, extra in runs:
        try:
            found[label] = _attack_through(audit, label, wrapped, kind, spec, extra)
        except Exception as exc:  # one adaptive attack that cannot run leaves the others
            notes.append(f"{label} could not run ({type(exc).__name__}: {exc})")
            audit.errors[label] = f"{type(exc).__name__}: {exc}"
    return found, notes


def _wrapped_gradients(audit: Auditor, wrapped: nn.Module) -> float | None:
    """The share of correctly classified points (up to 64) whose CE input gradient through ``wrapped`` is all
    zero or not finite; None where it has no gradient at all."""
    idx = audit.correct().nonzero().squeeze(1)[:64]
    if not len(idx):
        return None
    x, y = audit.x[idx].detach().clone().requires_grad_(True), audit.y[idx]
    try:
        with frozen(audit.model):
            out = wrapped(x)
            if not out.requires_grad:
                return None
            (grad,) = torch.autograd.grad(F.cross_entropy(out.float(), y, reduction="sum"), x, allow_unused=True)
    except RuntimeError:
        return None
    if grad is None:
        return None
    flat = grad.flatten(1)
    bad = ~torch.isfinite(flat).all(1) | (flat == 0).all(1)
    return float(bad.float().mean())


def _attack_through(audit: Auditor, label: str, wrapped: nn.Module, kind: str, spec: AttackSpec, extra: dict) -> str:
    """APGD (the official code) on ``wrapped`` (BPDA or NES), its adversarial examples judged on the model."""
    settings = {"steps": audit.settings.adaptive_steps, "restarts": 1, "rho": 0.75, **extra}
    clean = audit.correct()
    robust, counts = [], {}
    with frozen(audit.model):
        for b, start in enumerate(range(0, len(audit.x), audit.batch_size)):
            xb, yb = audit.x[start:start + audit.batch_size], audit.y[start:start + audit.batch_size]
            cb = clean[start:start + audit.batch_size]
            out = cb.clone()
            if cb.any():
                adv = run_component(kind, wrapped, xb[cb], yb[cb], eps=float(spec.eps), norm=str(spec.norm),
                                    seed=batch_seed(audit.seed, b), **settings)
                out[cb], found = judge(audit.model, xb[cb], adv, yb[cb], spec.eps, spec.norm)
                counts = add_counts(counts, found)
            robust.append(out)
    return audit.keep(label, bits(torch.cat(robust)), spec.replace(type="bpda"), counts)
