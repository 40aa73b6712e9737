"""The checks of an audit, on one model and a batch of test examples, each with its pass rule (docs/audit.md).

Every attack here runs through the evaluation's own path (:func:`tradeoff.evaluate.run_attack`: fp32, eval mode,
seeded per batch, examples misclassified clean count as not robust), so a number of the audit is the number the
pipeline's tables would show for that attack. Two attacks are compared example by example: attack B is *stronger*
than attack A when B's robust accuracy is lower by more than ``tolerance`` (an accuracy gap the audit calls
material) and the examples that only A leaves robust outnumber those that only B leaves robust significantly (exact
one-sided McNemar test at ``significance``). A material gap that is not significant is a warning: more test
examples would decide it.

Verdicts: ``pass``, ``warn``, ``fail``, and ``skip`` where a check does not apply (no surrogate, no protocol).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..attacks.autoattack import STANDARD, CheckLog, model_checks
from ..attacks.base import frozen, project, random_start, steepest_step
from ..evaluate import batch_seed, build_attack, run_attack
from ..results import bits

SEVERITY = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True)
class Settings:
    """The audit's own settings (the config's ``audit:`` block, less what names the attacks and test examples)."""

    step_multipliers: tuple[int, ...] = (1, 10)  # the attack's steps times each (the same step size)
    restarts: int = 5                            # random restarts compared with one
    eps_multipliers: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)  # times the attack's budget, then the must-fail one
    eot_draws: int = 10                          # forward passes of a randomized model (EOT, spread of predictions)
    surface_examples: int = 8                    # examples whose loss is traced along two directions
    surface_points: int = 11                     # points of each trace, from 0 to the budget
    tolerance: float = 0.02                      # accuracy gap (fraction) below which two attacks are as strong
    significance: float = 0.05                   # level of the one-sided exact McNemar test
    max_zero_gradients: float = 0.05             # fraction of examples with an all-zero input gradient: fail above
    top_accuracy: float = 0.02                   # robust accuracy at the must-fail budget: fail above

    @classmethod
    def from_config(cls, block: dict) -> "Settings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in block.items() if k in known})


def check(name: str, title: str, rule: str, source: str, verdict: str, summary: str, **numbers: Any) -> dict:
    return {"name": name, "title": title, "rule": rule, "source": source, "verdict": verdict, "summary": summary,
            "numbers": numbers}


def worst(verdicts) -> str:
    return max(verdicts, key=SEVERITY.__getitem__, default="skip")


def accuracy(flags: str) -> float:
    return flags.count("1") / len(flags) if flags else float("nan")


def compare(base: str, other: str, tolerance: float, significance: float) -> tuple[str, dict]:
    """Is attack ``other`` stronger than attack ``base`` (their per-example robust flags over the same examples)?
    ``fail``: its accuracy is lower by more than ``tolerance`` and significantly so; ``warn``: lower by more than
    ``tolerance``, not significantly; else ``pass``."""
    from scipy.stats import binomtest

    only_base = sum(1 for a, b in zip(base, other) if a == "1" and b == "0")  # robust under base, broken by other
    only_other = sum(1 for a, b in zip(base, other) if a == "0" and b == "1")
    p = (float(binomtest(only_base, only_base + only_other, 0.5, alternative="greater").pvalue)
         if only_base + only_other else 1.0)
    gap = accuracy(base) - accuracy(other)
    verdict = "pass" if gap <= tolerance else ("fail" if p < significance else "warn")
    return verdict, {"gap": gap, "p": p, "only_base_robust": only_base, "only_other_robust": only_other}


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _variant(spec: dict, **changes: Any) -> dict:
    """An attack spec with other settings; a new budget keeps the step's ratio to the budget."""
    out = {**spec, **changes}
    if "eps" in changes and spec.get("step_size") is not None and spec["eps"]:
        out["step_size"] = spec["step_size"] * changes["eps"] / spec["eps"]
    return out


def must_fail_budget(norm: str, x: torch.Tensor) -> float:
    """A budget at which any model must fail: every image in [0, 1]^d lies within it of the mid-grey image
    (L-inf 0.5; L2 0.5 sqrt(d)), so an attack can make every test image that one image, and a model then gets right
    at most the test examples of the class it gives it."""
    return 0.5 if norm == "linf" else 0.5 * math.sqrt(x[0].numel())


class Auditor:
    """The checks on ``model`` over test examples (x, y) with the white-box attack ``attack`` (a resolved PGD spec:
    its loss, steps, step, restarts and budget are varied), the black-box attack ``black_box`` (a resolved Square
    spec) and, where given, a ``surrogate`` model for the transfer attack and the authors' ``protocol`` pairs
    (label of the strong attack, its spec, label of the protocol's, its spec); ``no_surrogate`` says why there is no
    surrogate. Every measurement is kept, per example (``flags``), with its accuracy, for the page and its figure."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: dict, black_box: dict | None,
                 settings: Settings, seed: int = 0, batch_size: int = 500, surrogate: nn.Module | None = None,
                 no_surrogate: str | None = None, protocol: list[tuple[str, dict, str, dict]] | None = None,
                 log: Callable[[str], None] | None = None):
        self.model, self.x, self.y = model.eval(), x, y
        self.attack, self.black_box, self.settings = attack, black_box, settings
        self.seed, self.batch_size = seed, batch_size
        self.surrogate, self.protocol = surrogate, protocol or []
        self.no_surrogate = no_surrogate or "no surrogate: audit.surrogates names no other model of the catalog for " \
            "this dataset"
        self.flags: dict[str, str] = {}
        self.specs: dict[str, dict] = {}
        self.log = log or (lambda text: None)

    # ------------------------------------------------------------------------------------------ measurements

    def measure(self, label: str, spec: dict) -> str:
        """Per-example robust flags of the model under an attack spec (once per label)."""
        if label not in self.flags:
            out = run_attack(self.model, self.x, self.y, spec, seed=self.seed, batch_size=self.batch_size)
            self.flags[label], self.specs[label] = bits(out.robust_correct), spec
            self.log(f"{label}: {_pct(accuracy(self.flags[label]))} ({out.seconds:.1f} s)")
        return self.flags[label]

    def clean(self) -> str:
        return self.measure("clean", {"type": "clean", "eps": 0.0, "norm": self.attack["norm"]})

    def white_box(self) -> str:
        """Per example, robust under every white-box attack measured at the attack's budget: the worst case."""
        eps = self.attack["eps"]
        chosen = [f for label, f in self.flags.items() if label != "clean" and self.specs[label]["eps"] == eps
                  and self.specs[label]["type"] != "square" and not label.startswith(("transfer", "protocol"))]
        return "".join("1" if all(f[i] == "1" for f in chosen) else "0" for i in range(len(self.y)))

    def _steps(self, m: int) -> str:
        return f"PGD-{self.attack['steps'] * m}"

    # ---------------------------------------------------------------------------------------------- checks

    def run(self) -> list[dict]:
        self.clean()
        found = [self.check_steps(), self.check_restarts(), self.check_losses(), self.check_eps(),
                 self.check_black_box(), self.check_transfer(), self.check_gradients(), self.check_surface(),
                 self.check_randomness(), self.check_autoattack(), self.check_protocol()]
        return found

    def check_steps(self) -> dict:
        s = self.settings
        curve = [(self.attack["steps"] * m, accuracy(self.measure(self._steps(m), _variant(
            self.attack, steps=self.attack["steps"] * m)))) for m in sorted(s.step_multipliers)]
        base, most = self.flags[self._steps(min(s.step_multipliers))], self.flags[self._steps(max(s.step_multipliers))]
        verdict, stats = compare(base, most, s.tolerance, s.significance)
        return check("steps", "Robust accuracy against attack iterations",
                     f"PGD at {max(s.step_multipliers)}x the steps (the same step size) may not lower robust accuracy "
                     f"by more than {_pct(s.tolerance)} (significantly: fail; not significantly: warn)",
                     "Carlini et al. 2019, Sec. 5.2 (iterative attacks must converge)", verdict,
                     ", ".join(f"{steps} steps {_pct(a)}" for steps, a in curve), curve=curve, **stats)

    def check_restarts(self) -> dict:
        s = self.settings
        one = self.flags[self._steps(1)] if 1 in s.step_multipliers else self.measure(self._steps(1), self.attack)
        many = self.measure(f"PGD-{self.attack['steps']} x{s.restarts} restarts",
                            _variant(self.attack, restarts=s.restarts, random_start=True))
        verdict, stats = compare(one, many, s.tolerance, s.significance)
        curve = [(1, accuracy(one)), (s.restarts, accuracy(many))]
        return check("restarts", "Robust accuracy against random restarts",
                     f"{s.restarts} random restarts may not lower robust accuracy by more than {_pct(s.tolerance)} "
                     "against one", "Carlini et al. 2019, Sec. 5.2; Croce & Hein 2020", verdict,
                     f"1 restart {_pct(curve[0][1])}, {s.restarts} restarts {_pct(curve[1][1])}", curve=curve, **stats)

    def check_losses(self) -> dict:
        s = self.settings
        base = self.flags[self._steps(1)] if 1 in s.step_multipliers else self.measure(self._steps(1), self.attack)
        losses = ["cw"] + (["dlr"] if self.model_classes() >= 3 else [])
        own = self.attack.get("loss", "ce")
        results, verdicts = {own: accuracy(base)}, []
        for loss in (loss for loss in ["ce", *losses] if loss != own):
            flags = self.measure(f"PGD-{self.attack['steps']} ({loss.upper()} loss)", _variant(self.attack, loss=loss))
            verdict, stats = compare(base, flags, s.tolerance, s.significance)
            results[loss] = accuracy(flags)
            verdicts.append((verdict, loss, stats))
        verdict, loss, stats = max(verdicts, key=lambda v: (SEVERITY[v[0]], v[2]["gap"]))
        return check("losses", f"The attack's loss ({own.upper()}) against the margin (CW) and DLR losses",
                     f"PGD on another loss may not lower robust accuracy by more than {_pct(s.tolerance)} below PGD on "
                     f"{own.upper()} (vanishing or saturated {own.upper()} gradients, e.g. scaled logits)",
                     "Carlini et al. 2019, Sec. 4.4 and 5.2; Croce & Hein 2020 (DLR)", verdict,
                     ", ".join(f"{k.upper()} {_pct(v)}" for k, v in results.items()), accuracies=results,
                     strongest=loss, **stats)

    def check_eps(self) -> dict:
        s, eps = self.settings, self.attack["eps"]
        top = must_fail_budget(self.attack["norm"], self.x)
        budgets = sorted({eps * m for m in s.eps_multipliers if eps * m < top} | {top})
        curve = [(b, accuracy(self.measure(self._budget(b), _variant(self.attack, eps=b)))) for b in budgets]
        with torch.no_grad():
            grey = self.model(torch.full_like(self.x[:1], 0.5)).argmax(1).item()
        bound = float((self.y == grey).float().mean())
        rises = [(a, b) for (_, a), (_, b) in zip(curve, curve[1:]) if b > a + s.tolerance]
        at_top = curve[-1][1]
        verdict = "fail" if at_top > s.top_accuracy else ("warn" if rises else "pass")
        return check("eps", "Robust accuracy against the budget, up to one at which any model must fail",
                     f"at {self.attack['norm']} eps {top:.4g} (every image within it of the mid-grey image; a model "
                     f"can be right on at most the {_pct(bound)} of examples of the class it gives that image) robust "
                     f"accuracy must be at most {_pct(s.top_accuracy)}: a plateau above it means masked gradients or a "
                     "bug (fail); accuracy must not rise with the budget (warn)",
                     "Carlini et al. 2019, Sec. 5.3 (unbounded attacks must succeed); Athalye et al. 2018", verdict,
                     ", ".join(f"eps {b:.4g}: {_pct(a)}" for b, a in curve), curve=curve, grey_bound=bound,
                     must_fail_eps=top)

    def _budget(self, eps: float) -> str:
        return self._steps(1) if eps == self.attack["eps"] else f"PGD-{self.attack['steps']} at eps {eps:.4g}"

    def _against_white_box(self, name: str, title: str, label: str, flags: str, source: str, what: str) -> dict:
        s = self.settings
        wb = self.white_box()
        verdict, stats = compare(wb, flags, s.tolerance, s.significance)
        return check(name, title, f"{what} may not lower robust accuracy by more than {_pct(s.tolerance)} below the "
                     "worst case of the white-box attacks (gradient masking)", source, verdict,
                     f"{label} {_pct(accuracy(flags))}, white box (worst case) {_pct(accuracy(wb))}",
                     accuracy=accuracy(flags), white_box=accuracy(wb), **stats)

    def check_black_box(self) -> dict:
        title = "Black-box (Square) against white-box attacks"
        if self.black_box is None:
            return check("black-box", title, "", "", "skip", "no black-box attack configured")
        flags = self.measure("Square", self.black_box)
        return self._against_white_box("black-box", title, "Square", flags,
                                       "Athalye et al. 2018, Sec. 3.1; Croce & Hein 2020 (Square in AutoAttack)",
                                       "a gradient-free attack (Square, at the same budget)")

    def check_transfer(self) -> dict:
        title = "Transfer from a surrogate against white-box attacks"
        if self.surrogate is None:
            return check("transfer", title, "", "", "skip", self.no_surrogate)
        label = f"transfer PGD-{self.attack['steps']}"
        if label not in self.flags:
            robust = []
            for b, start in enumerate(range(0, len(self.x), self.batch_size)):
                xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                adv = build_attack(self.surrogate.eval(), self.attack, self.attack["eps"],
                                   batch_seed(self.seed, b)).perturb(xb, yb)
                with torch.no_grad():
                    robust.append((self.model(xb).argmax(1) == yb) & (self.model(adv).argmax(1) == yb))
            self.flags[label] = bits(torch.cat(robust))
            self.specs[label] = self.attack
        return self._against_white_box("transfer", title, "transfer", self.flags[label],
                                       "Athalye et al. 2018, Sec. 3.1; Tramer et al. 2020",
                                       "adversarial examples of the same attack on the surrogate")

    def model_classes(self) -> int:
        with torch.no_grad():
            return int(self.model(self.x[:1]).shape[1])

    def gradients(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The cross-entropy's input gradient per example (flattened), in batches, weights frozen."""
        out = []
        with frozen(self.model), torch.autocast(device_type=x.device.type, enabled=False):
            for start in range(0, len(x), self.batch_size):
                xb = x[start:start + self.batch_size].detach().clone().requires_grad_(True)
                loss = F.cross_entropy(self.model(xb).float(), y[start:start + self.batch_size], reduction="sum")
                (grad,) = torch.autograd.grad(loss, xb)
                out.append(grad.flatten(1))
        return torch.cat(out) if out else torch.zeros(0, self.x[0].numel(), device=x.device)

    def _correct(self) -> torch.Tensor:
        return torch.tensor([c == "1" for c in self.clean()], device=self.x.device)

    def check_gradients(self) -> dict:
        s = self.settings
        correct = self._correct()
        grads = self.gradients(self.x[correct], self.y[correct])
        finite = torch.isfinite(grads).all(1)
        zero = (grads == 0).all(1) & finite
        n = max(len(grads), 1)
        zero_frac, nonfinite = float(zero.sum()) / n, float((~finite).sum()) / n
        norms = grads[finite].norm(dim=1)
        median = float(norms.median()) if len(norms) else float("nan")
        verdict = ("fail" if zero_frac + nonfinite > s.max_zero_gradients else
                   "warn" if zero_frac + nonfinite > 0 else "pass")
        return check("gradients", "Input gradients on the test points",
                     f"at most {_pct(s.max_zero_gradients)} of the correctly classified test points may have an "
                     "input gradient of the loss that is all zero (or not finite): PGD's L-inf step is its sign, so "
                     "such a point is never moved (shattered or vanishing gradients); any such point: warn",
                     "Athalye et al. 2018, Sec. 4 (shattered and vanishing gradients); Carlini et al. 2019, Sec. 5.5",
                     verdict, f"{_pct(zero_frac)} all-zero, {_pct(nonfinite)} not finite, median L2 norm "
                     f"{median:.3g} ({len(grads)} points)", zero_fraction=zero_frac, nonfinite_fraction=nonfinite,
                     median_norm=median, points=len(grads))

    def check_surface(self) -> dict:
        s, eps, norm = self.settings, self.attack["eps"], self.attack["norm"]
        idx = self._correct().nonzero().squeeze(1)[:s.surface_examples]
        x, y = self.x[idx], self.y[idx]
        gen = torch.Generator(device=x.device).manual_seed(self.seed)
        toward = steepest_step(self.gradients(x, y).view_as(x), norm)
        noise = (torch.randint(0, 2, x.shape, generator=gen, device=x.device, dtype=x.dtype) * 2 - 1
                 if norm == "linf" else torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype))
        random_dir = steepest_step(noise, norm)
        ts = torch.linspace(0, eps, s.surface_points).tolist()
        traces: dict[str, list[list[float]]] = {"gradient": [], "random": []}
        with torch.no_grad():
            for name, d in (("gradient", toward), ("random", random_dir)):
                per_t = [F.cross_entropy(self.model((x + t * d).clamp(0, 1)).float(), y, reduction="none")
                         for t in ts]
                traces[name] = torch.stack(per_t, 1).tolist() if len(x) else []
        wins = sum(1 for g, r in zip(traces["gradient"], traces["random"]) if g[-1] > r[-1])
        shown = len(traces["gradient"])
        verdict = "skip" if not shown else ("fail" if wins < shown / 2 else "pass")
        return check("surface", "The loss along the gradient and along a random direction",
                     "a step of the full budget along the gradient's steepest-ascent direction must raise the loss "
                     "more than one along a random direction for at least half of the examples traced (else the "
                     "gradient does not point uphill: a masked or noisy loss surface)",
                     "Carlini et al. 2019, Sec. 5.5 (loss landscape); Athalye et al. 2018", verdict,
                     f"the gradient direction ends higher on {wins} of {shown} examples", t=ts, traces=traces,
                     wins=wins, examples=shown)

    def check_randomness(self) -> dict:
        s = self.settings
        with torch.no_grad():
            draws = [torch.cat([self.model(self.x[i:i + self.batch_size]).float()
                                for i in range(0, len(self.x), self.batch_size)]) for _ in range(s.eot_draws)]
        stacked = torch.stack(draws)
        scale = 1.0 + float(stacked.abs().max()) if stacked.numel() else 1.0
        varies = float((stacked - stacked[0]).abs().max()) > 1e-4 * scale if stacked.numel() else False
        preds = stacked.argmax(2)
        spread = float((preds != preds[0]).any(0).float().mean()) if preds.numel() else 0.0
        rule = (f"{s.eot_draws} forward passes of the same inputs must give the same outputs (else warn: a randomized "
                f"model); its predictions may change on at most {_pct(s.tolerance)} of the examples, and PGD with EOT "
                f"over {s.eot_draws} draws may not lower the robust accuracy (majority of {s.eot_draws} draws) by more "
                f"than {_pct(s.tolerance)} below PGD on one draw (fail: one draw's evaluation does not measure it)")
        source = "Athalye et al. 2018, Sec. 4.2 (EOT); Tramer et al. 2020; Croce & Hein 2020 (check_randomized)"
        if not varies:
            return check("randomness", "Randomness in the forward pass (EOT)", rule, source, "pass",
                         f"{s.eot_draws} forward passes give the same outputs", varies=False, spread=0.0)
        plain = self._majority_robust(eot=False)
        eot = self._majority_robust(eot=True)
        verdict, stats = compare(plain, eot, s.tolerance, s.significance)
        verdict = "fail" if spread > s.tolerance else worst([verdict, "warn"])
        return check("randomness", "Randomness in the forward pass (EOT)", rule, source, verdict,
                     f"outputs vary between passes; predictions change on {_pct(spread)} of the examples; PGD "
                     f"{_pct(accuracy(plain))}, EOT-PGD {_pct(accuracy(eot))} (majority of {s.eot_draws} draws)",
                     varies=True, spread=spread, pgd=accuracy(plain), eot_pgd=accuracy(eot), **stats)

    def _majority_robust(self, eot: bool) -> str:
        """Per example, correct in most of ``eot_draws`` passes both clean and under PGD, whose gradient each step is
        one pass's (``eot`` false) or the mean over ``eot_draws`` passes (Expectation over Transformation)."""
        a, draws = self.attack, self.settings.eot_draws
        gen = torch.Generator(device=self.x.device).manual_seed(self.seed)
        out = []
        for start in range(0, len(self.x), self.batch_size):
            x, y = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
            delta = random_start(x, a["eps"], a["norm"], gen) if a.get("random_start", True) else torch.zeros_like(x)
            delta = (x + delta).clamp(0, 1) - x
            with frozen(self.model):
                for _ in range(int(a["steps"])):
                    delta.requires_grad_(True)
                    loss = sum(F.cross_entropy(self.model(x + delta).float(), y, reduction="sum")
                               for _ in range(draws if eot else 1))
                    (grad,) = torch.autograd.grad(loss, delta)
                    with torch.no_grad():
                        delta = project(delta + a["step_size"] * steepest_step(grad, a["norm"]), a["eps"], a["norm"])
                        delta = (x + delta).clamp(0, 1) - x
            with torch.no_grad():
                votes = lambda z: sum((self.model(z).argmax(1) == y).int() for _ in range(draws))  # noqa: E731
                out.append((votes(x) * 2 > draws) & (votes(x + delta) * 2 > draws))
        return bits(torch.cat(out))

    def check_autoattack(self) -> dict:
        log = CheckLog()
        xb, yb = self.x[:self.batch_size], self.y[:self.batch_size]
        model_checks(self.model, xb, yb, STANDARD, 9, log)
        return check("autoattack", "AutoAttack's own checks of the defence",
                     "AutoAttack's checks (pyautoattack.checks: a randomized defence, outputs that are probabilities, "
                     "a dynamic defence, too few classes for the targeted attacks) must raise no warning (warn)",
                     "Croce & Hein 2020 (AutoAttack's checks)", "warn" if log.warnings else "pass",
                     "; ".join(log.warnings) or "no warning", warnings=list(log.warnings))

    def check_protocol(self) -> dict:
        s = self.settings
        title = "The authors' protocol beside the strong attacks"
        if not self.protocol:
            return check("protocol", title, "", "", "skip", "no authors' protocol for this model's tables")
        pairs, verdicts = [], []
        for strong_label, strong_spec, code_label, code_spec in self.protocol:
            strong = self.measure(f"protocol {strong_label}", strong_spec)
            code = self.measure(f"protocol {code_label}", code_spec)
            verdict, stats = compare(code, strong, s.tolerance, s.significance)
            verdicts.append(verdict)
            pairs.append({"strong": strong_label, "protocol": code_label, "strong_accuracy": accuracy(strong),
                          "protocol_accuracy": accuracy(code), "verdict": verdict, **stats})
        verdict = worst(verdicts)
        shown = sorted(pairs, key=lambda p: -p["gap"])
        return check("protocol", title,
                     f"the authors' attack may not leave robust accuracy higher than the strong attack it stands in "
                     f"for by more than {_pct(s.tolerance)} (it overstates robustness)",
                     "Carlini et al. 2019, Sec. 3 (state the threat model, use strong attacks); Tramer et al. 2020",
                     verdict, "; ".join(f"{p['protocol']} {_pct(p['protocol_accuracy'])} vs {p['strong']} "
                                        f"{_pct(p['strong_accuracy'])}" for p in shown[:4])
                     + (f"; {len(shown) - 4} more pairs" if len(shown) > 4 else ""), pairs=pairs)

    def curves(self) -> dict:
        """Accuracies by attack, for the page's table of measurements."""
        return {label: accuracy(f) for label, f in self.flags.items()}
