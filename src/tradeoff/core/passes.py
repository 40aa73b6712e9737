"""What one step of a method or one attack costs, counted in passes per example: forward passes (F), input-only
backward passes (Bi: an attack's gradient, the weights frozen) and training backward passes (Bw: the weights'
gradients). Each method and attack declares its own count beside its parameters (``passes``, torch-free: a function
of its settings); :mod:`tradeoff.pipeline.costs` prices the counts with each architecture's pass FLOPs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Passes:
    """Passes per example: forwards, input-only backwards (an attack's gradient) and training backwards."""

    f: float = 0.0
    bi: float = 0.0
    bw: float = 0.0

    def __add__(self, other: "Passes") -> "Passes":
        return Passes(self.f + other.f, self.bi + other.bi, self.bw + other.bw)

    def __mul__(self, k: float) -> "Passes":
        return Passes(self.f * k, self.bi * k, self.bw * k)

    __rmul__ = __mul__

    def flops(self, unit: dict) -> float:
        """FLOPs per example, given one architecture's pass costs (flops.json ``passes``)."""
        return self.f * unit["forward"] + self.bi * unit["input_backward"] + self.bw * unit["train_backward"]


NONE, F, BI, BW = Passes(), Passes(f=1), Passes(bi=1), Passes(bw=1)
G = F + BI  # one gradient step of an attack
TRAIN1 = F + BW  # one loss's training pass
TRAIN2 = 2 * F + 2 * BW  # a clean and an adversarial pass in one loss


class UnknownCost(LookupError):
    """No pass count for a method or attack (it declares none, or no declaration has its name), or no pass costs for
    an architecture or dataset."""
