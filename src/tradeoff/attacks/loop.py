"""Running an attack over a set of examples, the one path that evaluation, training's measurements, the benches and
the audit share: always in fp32 and eval mode, the model put back in the mode it was in.

Examples are split into fixed batches of the global index space; batch b's attack randomness is seeded with
``batch_seed(seed, b)``, so a result does not depend on which process attacks which batch (a shard of an evaluation
is a contiguous run of whole batches: tradeoff.evaluation.shards). :func:`run_attack` gives each example's outcome
(:class:`Outcome`: clean and robust, the validity counts of its adversarial examples, an ensemble's trace and an
attack's sanity checks); untargeted attacks only attack examples the model classifies correctly: the others count
as not robust. A :class:`ResumeState` (tradeoff.evaluation.state.EvalState) keeps finished batches and the progress
of the batch in hand, so that an interrupted call resumes and gives the same answer. :func:`adversarial`,
:func:`correct` and :func:`transfer_accuracy` make adversarial examples against one model and classify them with
another (a method's learners during training, Zipper Figure 6's t-SNE), seeded the same way.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from tradeoff.attacks.base import ATTACKS, INVALID, add_counts, classified, from_spec
from tradeoff.core.progress import Bar
from tradeoff.core.spec import AttackSpec

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    labels: torch.Tensor          # int64, per example
    clean_correct: torch.Tensor   # bool, per example
    robust_correct: torch.Tensor  # bool, per example
    seconds: float
    #: for ensembles: examples still robust after each component (AutoAttack's trace), summed over batches
    breakdown: dict[str, int] = field(default_factory=dict)
    #: for an attack with sanity checks of its own (Attack.sanity_checked): their warnings
    checks: list[str] = field(default_factory=list)
    #: the judge's counts (COUNTS): invalid adversarial examples (counted as not broken) and non-finite logits
    invalid: dict[str, int] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return int(self.robust_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")

    @property
    def clean_accuracy(self) -> float:
        return int(self.clean_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")


#: what an evaluation counts of its examples' validity, summed over batches and shards into the metrics file's
#: ``invalid``: the attack's (tradeoff.attacks.base.INVALID: adversarial examples that break the threat model, counted
#: as not broken, and valid ones with non-finite logits, counted as broken) and the clean pass's non-finite logits
#: (``non_finite_logits_clean``: those examples count as misclassified)
COUNTS = (*INVALID, "non_finite_logits_clean")


def batch_seed(seed: int, batch_index: int) -> int:
    return (int(seed) * 1_000_003 + int(batch_index)) % (2**63 - 1)


class ResumeState(Protocol):
    """Where :func:`run_attack` keeps what it has done, to resume from (tradeoff.evaluation.state.EvalState)."""

    def done(self, batch: int) -> dict | None:
        """A finished batch: ``clean`` and ``robust`` (bool tensors), ``seconds``, ``breakdown``, ``checks``,
        ``invalid``; None if not finished."""

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float,
               breakdown: dict[str, int], checks: list[str] | None = None,
               invalid: dict[str, int] | None = None) -> None:
        """Keep a finished batch."""

    def progress(self, batch: int) -> Any:
        """Where an attack keeps its partial results for the batch in hand (tradeoff.attacks.autoattack.Progress)."""


def run_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int, batch_size: int,
               first_batch: int = 0, state: ResumeState | None = None, progress: str | None = None,
               whole: bool = True) -> Outcome:
    """Evaluate ``model`` on (x, y) under a resolved attack spec. ``first_batch`` is the global index of the
    first batch (for shards); ``state`` keeps partial results so that an interrupted call can resume.
    ``progress``: a name (the attack job's) to show the progress under (tradeoff.core.progress: batches done, robust so
    far, images/s, ETA) and the attack's stages'; None shows nothing. An attack with sanity checks of its own
    (``Attack.sanity_checked``: AutoAttack and its components) reports their warnings per batch (Outcome.checks),
    and when (x, y) is the ``whole`` evaluation (not a shard), those of its checks of the whole evaluation."""
    was_training = model.training
    model.eval()
    kind = ATTACKS[spec.type]
    t0 = time.perf_counter()
    tally = _Tally(state, kind.sanity_checked)
    n_batches, timed = math.ceil(len(x) / batch_size), {"images": 0, "seconds": 0.0}
    bar = None
    if progress is not None:
        resumed = sum(state.done(first_batch + b) is not None for b in range(n_batches)) if state is not None else 0
        bar = Bar(n_batches, progress, unit="batch", initial=resumed)
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):  # fp32, whatever the caller's context
            for b, start in enumerate(range(0, len(x), batch_size)):
                gb = first_batch + b
                if tally.restore(gb, x.device):
                    continue
                tb = time.perf_counter()
                xb, yb = x[start:start + batch_size], y[start:start + batch_size]
                with torch.no_grad():
                    clean, finite = classified(model(xb), yb)  # non-finite logits name no class: misclassified
                attack = from_spec(spec, model, seed=batch_seed(seed, gb))
                attack.prepare(xb, yb, first=gb == 0, show_progress=progress is not None)
                robust = clean.clone()
                todo = clean if attack.skips_misclassified else torch.ones_like(clean)
                judged = {}
                if not spec.clean and todo.any():
                    saving = state.progress(gb) if state is not None else None
                    robust[todo] = attack.robust(xb[todo], yb[todo], saving)
                    judged = attack.invalid()
                if attack.skips_misclassified:
                    robust &= clean
                counts = add_counts(judged, {"non_finite_logits_clean": int((~finite).sum())})
                _say_invalid(progress or spec.type, gb, counts)
                tally.finish(gb, clean, robust, time.perf_counter() - tb, attack.trace(), attack.warnings(), counts)
                if progress is not None:
                    timed["images"] += len(xb)
                    timed["seconds"] += time.perf_counter() - tb
                    bar.update(postfix=_robust_so_far(tally.robust, timed))
        if whole:
            tally.add_warnings(kind.whole_warnings(int(sum(int(c.sum()) for c in tally.clean)), tally.breakdown,
                                                   len(x)))
    finally:
        model.train(was_training)
        if bar is not None:
            bar.close()
    cat = lambda parts: torch.cat(parts).cpu() if parts else torch.zeros(0, dtype=torch.bool)  # noqa: E731
    return Outcome(y.cpu(), cat(tally.clean), cat(tally.robust), time.perf_counter() - t0 + tally.resumed_seconds,
                   tally.breakdown, tally.warnings if tally.checked else [], tally.invalid)


def _say_invalid(name: str, batch: int, counts: dict[str, int]) -> None:
    """Log a batch's invalid adversarial examples and non-finite logits (the metrics file counts them)."""
    if not any(counts.get(k) for k in COUNTS):
        return
    log.warning("%s, batch %d: %d invalid adversarial example(s) counted as not broken (non-finite %d, outside the "
                "budget %d, outside [0, 1] %d); non-finite logits on %d valid adversarial and %d clean example(s), "
                "counted as misclassified", name, batch, counts.get("invalid_examples", 0), counts.get("non_finite", 0),
                counts.get("outside_budget", 0), counts.get("outside_range", 0), counts.get("non_finite_logits", 0),
                counts.get("non_finite_logits_clean", 0))


class _Tally:
    """What the batches of one run_attack call add up to, restored from the resume state or computed (``finish``,
    which also writes the batch into the state): per-example bits, seconds, the attack's trace and its warnings."""

    def __init__(self, state: ResumeState | None, checked: bool):
        self.state, self.checked = state, checked
        self.clean: list[torch.Tensor] = []
        self.robust: list[torch.Tensor] = []
        self.breakdown: dict[str, int] = {}
        self.warnings: list[str] = []
        self.invalid: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.resumed_seconds = 0.0

    def restore(self, batch: int, device: torch.device) -> bool:
        """Take a batch that the resume state holds; False if it holds none."""
        saved = self.state.done(batch) if self.state is not None else None
        if saved is None:
            return False
        self.clean.append(saved["clean"].to(device))
        self.robust.append(saved["robust"].to(device))
        self.resumed_seconds += saved["seconds"]
        self._add_trace(saved["breakdown"])
        self.add_warnings(saved.get("checks", []) if self.checked else [], log_them=True)
        self.invalid = add_counts(self.invalid, saved.get("invalid"))
        return True

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float, trace: dict[str, int],
               warnings: list[str], invalid: dict[str, int] | None = None) -> None:
        self._add_trace(trace)
        self.clean.append(clean)
        self.robust.append(robust)
        self.add_warnings(warnings)
        self.invalid = add_counts(self.invalid, invalid)
        if self.state is not None:
            self.state.finish(batch, clean, robust, seconds, trace, warnings if self.checked else None, invalid)

    def add_warnings(self, texts: list[str], log_them: bool = False) -> None:
        for text in texts:
            if text not in self.warnings:
                self.warnings.append(text)
                if log_them:  # a resumed batch's warnings, said again in this job's log
                    log.warning("sanity check of a resumed batch: %s", text)

    def _add_trace(self, trace: dict[str, int]) -> None:
        for k, v in trace.items():
            self.breakdown[k] = self.breakdown.get(k, 0) + v


def _robust_so_far(robust_parts: list, timed: dict) -> str:
    """An evaluation's progress besides its batches: robust so far, images/s of this process."""
    seen = sum(len(p) for p in robust_parts)
    robust = int(sum(int(p.sum()) for p in robust_parts))
    rate = timed["images"] / timed["seconds"] if timed["seconds"] > 0 else 0.0
    return f"{robust} of {seen} images robust so far ({100.0 * robust / max(seen, 1):.1f}%), {rate:.1f} images/s"


def accuracy_under(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int,
                   batch_size: int) -> float:
    return run_attack(model, x, y, spec, seed=seed, batch_size=batch_size).accuracy


def adversarial(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int,
                batch_size: int) -> torch.Tensor:
    """Adversarial examples of every (x, y) against ``model`` under a resolved attack spec (all examples, also
    those the model gets wrong), batch b of ``batch_size`` seeded with (seed, b)."""
    was_training = model.training
    model.eval()
    parts = []
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):
            for b, start in enumerate(range(0, len(x), batch_size)):
                attack = from_spec(spec, model, seed=batch_seed(seed, b))
                parts.append(attack.perturb(x[start:start + batch_size], y[start:start + batch_size]))
    finally:
        model.train(was_training)
    return torch.cat(parts) if parts else x.detach().clone()


@torch.no_grad()
def correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Per example: does ``model`` (eval mode, fp32) classify x correctly?"""
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return torch.cat([model(x[s:s + batch_size]).argmax(1) == y[s:s + batch_size]
                              for s in range(0, len(x), batch_size)])
    finally:
        model.train(was_training)


def transfer_accuracy(target: nn.Module, source: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *,
                      seed: int, batch_size: int) -> float:
    """Accuracy of ``target`` on adversarial examples made against ``source``; as for a white-box attack, an
    example counts as robust only if ``target`` also classifies it correctly clean."""
    x_adv = adversarial(source, x, y, spec, seed=seed, batch_size=batch_size)
    robust = correct(target, x, y, batch_size) & correct(target, x_adv, y, batch_size)
    return int(robust.sum()) / len(y) if len(y) else float("nan")
