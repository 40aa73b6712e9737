"""AutoAttack (Croce & Hein 2020) and each of its attacks alone, run with the authors' code (``pyautoattack``,
the PyPI package of fra31/auto-attack: the same APGD, FAB and Square implementations).

Threat model (every attack here): ||x_adv - x|| <= eps in the attack's norm (L-inf or L2), x_adv in [0, 1].
APGD and FAB are white box (input gradients; the weights are frozen); Square is black box (scores only).

Every attack is built with the settings AutoAttack's ``standard`` version gives it (APGD: 100 iterations,
1 restart, rho 0.75; APGD-T and FAB-T: 9 target classes (fewer if the model has fewer than 10 classes);
FAB: 100 iterations, 1 restart; Square: 5000 queries, p_init 0.8), and with an explicit seed: evaluation
passes the per-batch seed; without one (inside training) a seed is drawn from the global torch generator,
so training stays reproducible. The library reseeds the global generator itself; every call here runs in
``torch.random.fork_rng`` so that the caller's random stream is untouched.

``autoattack`` is the standard ensemble: APGD-CE, then APGD-T, FAB-T and Square, each only on the examples
still robust, exactly as ``AutoAttack.run_standard_evaluation`` runs them (a test checks that the two agree
example by example). An example is robust under AA only if it survives all four: the per-example worst case.
Each component alone is the same attack on every (clean-correct) example: ``run_standard_evaluation_individual``.

Resume: :meth:`AutoAttack.robust` can save its progress after every component (the robust flags so far and
the components done) through a ``progress`` object, and continue from there: a component that was cut off is
rerun from its start on the same examples with the same seed, so a resumed evaluation gives the same answer
as an uninterrupted one. (pyautoattack 0.2.0's own state file cannot be restored: it writes the set of
attacks as its ``str()``, so every restore raises "different set of attacks", and past that
``run_standard_evaluation`` reads an unbound ``y_adv``. See README.)
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any, Iterator, Protocol

import torch

from tradeoff.attacks.base import (
    INVALID,
    Attack,
    AttackError,
    add_counts,
    classified,
    count_invalid,
    frozen,
    register,
    still_right,
)
from tradeoff.attacks.declared import autoattack as declared
from tradeoff.attacks.declared.autoattack import COMPONENTS, STANDARD
from tradeoff.core.progress import Bar

log = logging.getLogger("tradeoff.autoattack")

AA_NORM = {"linf": "Linf", "l2": "L2"}


class CheckLog:
    """Where the warnings of AutoAttack's own sanity checks (``pyautoattack.checks``: a randomised or dynamic defence,
    outputs that are probabilities, too few classes for the targeted attacks, zero gradients, a Square attack that
    beats the gradient attacks) and of the final check of the adversarial examples (the budget, NaN, the image range)
    go: each warning once to the log, and kept for the metrics file (``checks``). It stands in for the library's
    logger, which the checks call."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, msg: Any, *args: Any) -> None:
        text = str(msg) % args if args else str(msg)
        if text not in self.warnings:
            self.warnings.append(text)
            log.warning("AutoAttack check: %s", text)

    def info(self, msg: Any, *args: Any) -> None:
        log.info(msg, *args)

    def debug(self, msg: Any, *args: Any) -> None:
        log.debug(msg, *args)

    error = warning


class Progress(Protocol):
    """Where an attack keeps its partial results for one batch (see tradeoff.evaluation.state.EvalState)."""

    def load(self) -> dict | None: ...

    def save(self, data: dict) -> None: ...


@contextlib.contextmanager
def isolated_rng(device: torch.device) -> Iterator[None]:
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        yield


def _seed(seed: Any) -> int:
    if seed is not None:
        return int(seed)
    return int(torch.randint(0, 2**62, (1,)).item())  # from the global generator: reproducible in training


def _n_targets(model: torch.nn.Module, x: torch.Tensor, wanted: int) -> int:
    with torch.no_grad():
        classes = model(x[:1]).shape[1]
    return max(1, min(int(wanted), classes - 1))


def build_component(kind: str, model: torch.nn.Module, *, eps: float, norm: str, seed: int, device,
                    steps: int = 100, restarts: int = 1, target_classes: int = 9, queries: int = 5000,
                    p_init: float = 0.8, rho: float = 0.75, logger: Any = log):
    """One of AutoAttack's attack objects, configured as its ``standard`` version configures it."""
    from pyautoattack.autopgd_base import APGDAttack, APGDAttack_targeted
    from pyautoattack.fab_pt import FABAttack_PT
    from pyautoattack.square import SquareAttack

    aa_norm = AA_NORM[norm]
    if kind in ("apgd-ce", "apgd-dlr"):
        return APGDAttack(model, n_restarts=int(restarts), n_iter=int(steps), verbose=False, eps=eps,
                          norm=aa_norm, eot_iter=1, rho=rho, seed=seed, device=device, logger=logger,
                          loss="ce" if kind == "apgd-ce" else "dlr")
    if kind == "apgd-t":
        return APGDAttack_targeted(model, n_restarts=int(restarts), n_iter=int(steps), verbose=False, eps=eps,
                                   norm=aa_norm, eot_iter=1, rho=rho, seed=seed, device=device, logger=logger,
                                   n_target_classes=int(target_classes))
    if kind in ("fab", "fab-t"):
        return FABAttack_PT(model, n_restarts=int(restarts), n_iter=int(steps), eps=eps, seed=seed, norm=aa_norm,
                            verbose=False, device=device, targeted=kind == "fab-t",
                            n_target_classes=int(target_classes))
    if kind == "square":
        return SquareAttack(model, p_init=p_init, n_queries=int(queries), eps=eps, norm=aa_norm,
                            n_restarts=int(restarts), seed=seed, verbose=False, device=device,
                            resc_schedule=False)
    raise AttackError(f"unknown AutoAttack component {kind!r}; allowed: {list(COMPONENTS)}")


class _ContiguousGrad(torch.autograd.Function):
    """The identity, whose gradient is returned in the standard (contiguous) layout."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


class _StandardLayout(torch.nn.Module):
    """The model as AutoAttack's code needs it: it flattens gradients and images with ``.view``, which fails on the
    channels_last tensors that a channels_last model (tradeoff.evaluation.evaluate.channels_last) gives back for 3-channel
    images (never for 1-channel ones, where both layouts coincide: the digits scales did not see it)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(_ContiguousGrad.apply(x))


def run_component(kind: str, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float, norm: str,
                  seed: int, **settings: Any) -> torch.Tensor:
    """Adversarial examples of one component (x itself where it failed), as AutoAttack's loop calls it."""
    if kind in ("apgd-t", "fab-t"):
        settings["target_classes"] = _n_targets(model, x, settings.get("target_classes", 9))
    attack = build_component(kind, _StandardLayout(model), eps=eps, norm=norm, seed=seed, device=x.device,
                             **settings)
    with isolated_rng(x.device), torch.no_grad():
        return attack.perturb(x.contiguous(), y)


def model_checks(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, kinds: tuple[str, ...], target_classes: int,
                 checks: CheckLog) -> None:
    """AutoAttack's checks of the defence, as ``run_standard_evaluation`` runs them on its first batch (its standard
    version's: a randomised defence, logits that are probabilities, a dynamic defence, the number of classes for the
    targeted attacks), their warnings into ``checks``. The caller's random stream and trace function are untouched."""
    from pyautoattack import checks as aa_checks

    with isolated_rng(x.device), torch.no_grad():
        aa_checks.check_randomized(model, x, y, bs=len(x), logger=checks)
        n_classes = aa_checks.check_range_output(model, x, logger=checks)
    aa_checks.funcs.update({name: 0 for name in aa_checks.funcs})  # the library never resets its call counts
    tracer = sys.gettrace()
    try:
        with isolated_rng(x.device):
            aa_checks.check_dynamic(model, x, False, logger=checks)
    finally:
        sys.settrace(tracer)  # the library leaves none, which would stop a debugger's or coverage's tracing
    targets = max(1, min(target_classes, n_classes - 1))  # as the attacks here use them (_n_targets)
    aa_checks.check_n_classes(n_classes, list(kinds), targets, targets, logger=checks)


def final_check(x: torch.Tensor, x_adv: torch.Tensor, eps: float, norm: str, checks: CheckLog) -> None:
    """AutoAttack's final check of its adversarial examples: within the budget, no NaN, in the image range."""
    delta = (x_adv - x).flatten(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(dim=1)
    nans = int(torch.isnan(x_adv).sum())
    if nans:
        checks.warning(f"{nans} NaN values in the adversarial examples")
    if len(size) and float(size.max()) > eps * (1 + 1e-4) + 1e-6:
        checks.warning(f"an adversarial example is outside the budget: max {norm} perturbation "
                       f"{float(size.max()):.6g} > eps {eps:.6g}")
    if x_adv.numel() and (float(x_adv.min()) < -1e-6 or float(x_adv.max()) > 1 + 1e-6):
        checks.warning(f"adversarial examples outside [0, 1]: min {float(x_adv.min()):.6g}, max "
                       f"{float(x_adv.max()):.6g}")


class _AutoAttackBase(declared.AutoAttackFamily, Attack):
    #: set by ``prepare``: where the sanity checks' warnings go, and whether to log each component's progress
    checks: CheckLog | None = None
    report_progress: bool = False

    def _settings(self) -> dict:
        return {}

    def _component(self, kind: str, x: torch.Tensor, y: torch.Tensor, seed: int) -> torch.Tensor:
        extra = {"logger": self.checks} if self.checks is not None else {}
        adv = run_component(kind, self.model, x, y, eps=self.eps, norm=self.norm, seed=seed, **self._settings(),
                            **extra)
        if self.checks is not None:
            final_check(x, adv, self.eps, self.norm, self.checks)
        return adv

    def sequence(self) -> tuple[str, ...]:
        return (self.kind,)

    def model_checks(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """AutoAttack's checks of the defence on (a batch of) the test set, into ``self.checks``."""
        if self.checks is not None and len(x):
            model_checks(self.model, x, y, self.sequence(), int(self.params.get("target_classes", 9)), self.checks)

    sanity_checked = True

    def prepare(self, x: torch.Tensor, y: torch.Tensor, *, first: bool, show_progress: bool) -> None:
        """A fresh log of the sanity checks' warnings; on the first batch of an evaluation, the checks of the defence
        (as AutoAttack runs them on its first batch)."""
        self.checks, self.report_progress = CheckLog(), show_progress
        if first:
            self.model_checks(x, y)

    def warnings(self) -> list[str]:
        return list(self.checks.warnings) if self.checks is not None else []


class _Component(_AutoAttackBase):
    kind: str

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._component(self.kind, x, y, _seed(self.seed))


class _APGD(declared.APGDFamily, _Component):

    def _settings(self) -> dict:
        return {"steps": self.steps, "restarts": self.restarts, "rho": self.rho}

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not self.best_loss:
            return super()._perturb(x, y)
        # For training: the point of highest loss of every example (APGD's best_loss mode), not only the
        # successful adversarial examples. This mode draws its random starts from the generator seeded here.
        attack = build_component(self.kind, self.model, eps=self.eps, norm=self.norm, seed=_seed(self.seed),
                                 device=x.device, **self._settings())
        with isolated_rng(x.device):
            torch.manual_seed(attack.seed)
            return attack.perturb(x, y, best_loss=True)


@register
class APGDCE(declared.APGDCE, _APGD):
    """APGD-CE: AutoPGD on the cross-entropy loss (100 iterations, 1 restart, as in AutoAttack standard).
    Returns the adversarial example where one was found, x elsewhere; ``best_loss: true`` returns the point of
    highest loss for every example instead (for training). L-inf or L2 (APGD-L2). Also a training maximiser
    (``type: apgd-ce`` in train_attacks). Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    kind = "apgd-ce"


@register
class APGDDLR(declared.APGDDLR, _APGD):
    """APGD-DLR: AutoPGD on the DLR loss (untargeted; 100 iterations, 1 restart). Needs >= 3 classes. Also a
    training maximiser (``type: apgd-dlr``). Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    kind = "apgd-dlr"


@register
class APGDT(declared.APGDT, _Component):
    """APGD-T: AutoPGD on the targeted DLR loss towards each of the ``target_classes`` (9) classes ranked
    highest after the top one, 100 iterations each, on the examples not yet broken. Needs >= 4 classes.
    L-inf or L2 (T-APGD-L2). Also a training maximiser (``type: apgd-t``).
    Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    kind = "apgd-t"

    def _settings(self) -> dict:
        return {"steps": self.steps, "restarts": self.restarts, "target_classes": self.target_classes,
                "rho": self.rho}


@register
class FAB(declared.FAB, _Component):
    """FAB (untargeted): minimal-perturbation attack, 100 iterations, 1 restart (AutoAttack's setting);
    success counts only within eps. Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    kind = "fab"

    def _settings(self) -> dict:
        return {"steps": self.steps, "restarts": self.restarts}


@register
class FABT(declared.FABT, _Component):
    """FAB-T: targeted FAB towards each of the ``target_classes`` (9) classes ranked highest after the top one,
    100 iterations each. Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    kind = "fab-t"

    def _settings(self) -> dict:
        return {"steps": self.steps, "restarts": self.restarts, "target_classes": self.target_classes}


@register
class Square(declared.Square, _Component):
    """Square Attack: score-based black-box random search, 5000 queries, p_init 0.8 (AutoAttack's setting).
    Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]; only the model's outputs are used."""

    kind = "square"

    def _settings(self) -> dict:
        return {"queries": self.queries, "p_init": self.p_init, "restarts": self.restarts}


@register
class AutoAttack(declared.AutoAttack, _AutoAttackBase):
    """AutoAttack, standard version: APGD-CE, APGD-T, FAB-T, Square, each on the examples still robust
    (``components`` may name another sequence of COMPONENTS, each with its standard settings). An example is
    robust only if no component breaks it. Threat model: ||x_adv - x|| <= eps (L-inf or L2), x_adv in [0, 1]."""

    def _settings(self) -> dict:
        return {"steps": self.steps, "queries": self.queries}

    def sequence(self) -> tuple[str, ...]:
        seq = tuple(self.components) if self.components else STANDARD
        unknown = [c for c in seq if c not in COMPONENTS]
        if unknown:
            raise AttackError(f"autoattack: unknown component(s) {unknown}; allowed: {list(COMPONENTS)}")
        return seq

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x_adv, _ = self._chain(x, y, _seed(self.seed), None)
        return x_adv

    def trace(self) -> dict[str, int]:
        return dict(getattr(self, "breakdown", None) or {})

    @classmethod
    def whole_warnings(cls, clean: int, trace: dict[str, int], n: int) -> list[str]:
        """AutoAttack's check of Square's success against the gradient attacks before it, on a whole evaluation."""
        from pyautoattack.checks import check_square_sr

        checks = CheckLog()
        if n:
            check_square_sr({"clean": clean / n, **{k: v / n for k, v in trace.items()}}, logger=checks)
        return checks.warnings

    def robust(self, x: torch.Tensor, y: torch.Tensor, progress: Progress | None = None) -> torch.Tensor:
        if x.numel() == 0:
            return torch.zeros(0, dtype=torch.bool, device=x.device)
        with frozen(self.model):
            _, flags = self._chain(x.detach(), y, _seed(self.seed), progress)
        return flags

    def _chain(self, x: torch.Tensor, y: torch.Tensor, seed: int,
               progress: Progress | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The ensemble on one batch; returns (adversarial examples, robust flags). Each component's examples are
        judged as every attack's (tradeoff.attacks.base.still_right: an invalid one breaks nothing, non-finite logits
        are no class), their counts kept (``invalid()``). With ``progress`` the flags and those counts are saved after
        every component and restored from a previous, interrupted call: examples broken before the interruption keep
        x in the returned images (their flags are what counts)."""
        seq = self.sequence()
        x_adv = x.clone()
        with torch.no_grad():
            robust = classified(self.model(x), y)[0]
        done: list[str] = []
        after: dict[str, int] = {}
        invalid = dict.fromkeys(INVALID, 0)
        saved = progress.load() if progress is not None else None
        if saved:
            if saved.get("n") != len(x) or saved.get("components") != list(seq) or saved.get("seed") != seed:
                raise AttackError("autoattack: the saved progress belongs to another batch or setting")
            robust = torch.tensor([c == "1" for c in saved["robust"]], dtype=torch.bool, device=x.device)
            done, after = list(saved["done"]), dict(saved["after"])
            invalid = add_counts(invalid, saved.get("invalid"))
            log.info("autoattack: resuming a batch after %s (%d of %d robust)", ", ".join(done) or "the clean pass",
                     int(robust.sum()), len(x))
        bar = Bar(len(seq), "autoattack", unit="component", initial=len(done), leave=False) \
            if self.report_progress else None
        for kind in seq:
            if kind in done:
                continue
            idx = robust.nonzero().squeeze(1)
            t0 = time.perf_counter()
            if idx.numel():
                adv = self._component(kind, x[idx], y[idx], seed)
                correct, why, finite = still_right(self.model, x[idx], adv, y[idx], self.eps, self.norm)
                fooled = ~correct
                invalid = add_counts(invalid, count_invalid(why, finite))
                robust[idx[fooled]] = False
                x_adv[idx[fooled]] = adv[fooled]
            done.append(kind)
            after[kind] = int(robust.sum())
            if bar is not None:
                seconds = time.perf_counter() - t0
                bar.update(postfix=f"{kind} on {idx.numel()} points: {after[kind]} of {len(x)} still robust, "
                                   f"{seconds:.1f} s ({idx.numel() / seconds if seconds > 0 else 0.0:.1f} images/s)")
            if progress is not None:
                progress.save({"n": len(x), "components": list(seq), "seed": seed, "done": done, "after": after,
                               "robust": "".join("1" if v else "0" for v in robust.tolist()), "invalid": invalid})
        if bar is not None:
            bar.close()
        #: examples still robust after each component (the ensemble's trace, as AutoAttack logs it)
        self.breakdown = after
        self.found_invalid = invalid
        return x_adv, robust
