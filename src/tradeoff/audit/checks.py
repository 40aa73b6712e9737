"""The checks of an audit, on one model and a batch of test examples, each with its pass rule (docs/audit.md).

Every attack here runs through the evaluation's own path (:func:`tradeoff.evaluation.evaluate.run_attack`: fp32, eval mode,
seeded per batch, examples misclassified clean count as not robust), so a number of the audit is the number the
pipeline's tables would show for that attack. Two attacks are compared example by example: attack B is *stronger*
than attack A when B's robust accuracy is lower by more than ``tolerance`` (an accuracy gap the audit calls
material) and the examples that only A leaves robust outnumber those that only B leaves robust significantly (exact
one-sided McNemar test at ``significance``). A material gap that is not significant is a warning: more test
examples would decide it.

The checks fall in three groups, each with its own verdict (:data:`GROUPS`): ``masking`` (can the gradients be
trusted at all), ``convergence`` (is each reported column's attack strong enough: the column against the best known
per-example worst case, and the audit's own attack against stronger settings of it) and ``protocol`` (the authors'
attack against the strong one). Verdicts: ``pass``, ``warn``, ``fail``, and ``skip`` (shown as n/a) where a check
does not apply (no surrogate, no protocol) or its premise is gone (gradients unusable: the checks that vary a
gradient attack). Every non-pass carries a next step (``next``), one line.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, fields
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff.attacks.autoattack import STANDARD, CheckLog, model_checks
from tradeoff.attacks import from_spec, frozen
from tradeoff.attacks.base import project, random_start, steepest_step
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.core.spec import AttackSpec
from tradeoff.evaluation.evaluate import batch_seed, run_attack
from tradeoff.storage.layout import bits
from tradeoff.attacks.pgd import margin_loss
from tradeoff.attacks.autoattack import isolated_rng

SEVERITY = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}
WORD = {"skip": "n/a", "pass": "pass", "warn": "warn", "fail": "fail"}
#: which verdict each check counts towards (a reported column's check, ``column <name>``, is convergence's)
GROUPS = {
    "masking": ("graph", "outputs", "gradients", "consistency", "surface", "eps", "eps-l2", "black-box", "transfer",
                "bpda", "randomness", "autoattack"),
    "convergence": ("steps", "restarts", "losses", "targeted", "silent", "steps-l2"),
    "protocol": ("protocol",),
}
#: the checks that vary the audit's gradient attack itself: n/a when its gradients are unusable (their premise)
NEEDS_GRADIENTS = ("steps", "restarts", "silent", "steps-l2", "surface", "consistency")
#: the checks that only find something when an attack is stronger: a pass is n/a when the gradients are unusable
FINDS_ONLY = ("losses", "targeted")
#: attack types that use no gradient of the model (the white-box worst case leaves them out)
NOT_WHITE_BOX = ("clean", "square", "autoattack", "bpda")


def group_of(name: str) -> str:
    if name.startswith("column "):
        return "convergence"
    return next((g for g, names in GROUPS.items() if name in names), "masking")


@dataclass(frozen=True)
class Settings:
    """The audit's own settings (the config's ``audit:`` block, less what names the attacks and test examples)."""

    step_multipliers: tuple[int, ...] = (1, 10)  # APGD-CE at these multiples of the attack's steps (convergence)
    restarts: int = 5                            # most random restarts of the restart curve
    eps_multipliers: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)  # times the attack's budget, then the bounds' budgets
    eot_draws: int = 10                          # forward passes of a randomized model (spread, the least EOT draws)
    surface_examples: int = 8                    # examples whose loss is traced along two directions and PGD's steps
    surface_points: int = 11                     # points of each trace, from 0 to the budget
    tolerance: float = 0.02                      # accuracy gap (fraction) below which two attacks are as strong
    significance: float = 0.05                   # level of the one-sided exact McNemar test
    max_zero_gradients: float = 0.05             # fraction of examples with an all-zero input gradient: fail above
    top_accuracy: float = 0.02                   # robust accuracy at the whole-range budget: fail above
    consistency_examples: int = 64               # examples whose gradient is checked against the loss it predicts
    max_eot_draws: int = 80                      # EOT's draws, sized from the gradient's variance, at most

    @classmethod
    def from_config(cls, block: dict) -> "Settings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in block.items() if k in known})


def check(name: str, title: str, rule: str, source: str, verdict: str, summary: str, next_step: str = "",
          **numbers: Any) -> dict:
    return {"name": name, "group": group_of(name), "title": title, "rule": rule, "source": source,
            "verdict": verdict, "summary": summary, "next": next_step if verdict in ("warn", "fail") else "",
            "numbers": numbers}


def worst(verdicts) -> str:
    return max(verdicts, key=SEVERITY.__getitem__, default="skip")


def group_verdicts(checks: list[dict]) -> dict[str, str]:
    """The verdict of each group (:data:`GROUPS`): the worst of its checks'; n/a when none applies."""
    return {g: worst(c["verdict"] for c in checks if c.get("group", group_of(c["name"])) == g) for g in GROUPS}


def overall_line(groups: dict[str, str]) -> str:
    """``fail (convergence, protocol)``: the worst group verdict and the groups that give it."""
    top = worst(groups.values())
    named = [g for g, v in groups.items() if v == top and v in ("warn", "fail")]
    return WORD[top] + (f" ({', '.join(named)})" if named else "")


def accuracy(flags: str) -> float:
    return flags.count("1") / len(flags) if flags else float("nan")


def both(a: str, b: str) -> str:
    """Per example, robust under both."""
    return "".join("1" if p == "1" and q == "1" else "0" for p, q in zip(a, b))


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


def _apgd(spec: AttackSpec, steps: int) -> AttackSpec:
    """APGD-CE (the official pyautoattack code: a step size that halves when the loss stalls, so it does not cycle)
    at ``spec``'s budget."""
    return AttackSpec.from_dict({"type": "apgd-ce", "norm": spec.norm, "eps": spec.eps, "steps": int(steps),
                                 "restarts": 1})


def _steps_of(spec: AttackSpec) -> int:
    """The gradient steps of a (PGD-family) attack: its ``steps``, or its type's default."""
    return int(ATTACK_DECLARATIONS[spec.type].settings(spec).steps)


def grey_budget(norm: str, x: torch.Tensor) -> float:
    """The budget within which every image in [0, 1]^d lies of the mid-grey image (L-inf 0.5; L2 0.5 sqrt(d)): an
    attack can make every test image that one image, so a model gets right at most the test examples of the class
    it gives it (the mid-grey bound)."""
    return 0.5 if norm == "linf" else 0.5 * math.sqrt(x[0].numel())


def must_fail_budget(norm: str, x: torch.Tensor) -> float:
    """The budget at which every model must fail: the whole image range (L-inf 1; L2 sqrt(d)), within which any
    test image can be made any image, one of another class among them."""
    return 1.0 if norm == "linf" else math.sqrt(x[0].numel())


class BrokenGraph(RuntimeError):
    """The model's output has no gradient with respect to its input (a detached or no-grad forward)."""


def _is_probabilities(out: torch.Tensor) -> bool:
    return bool(out.numel()) and bool((out >= 0).all()) and bool(((out.sum(1) - 1).abs() < 1e-4).all())


class Auditor:
    """The checks on ``model`` (a ``torch.nn.Module`` taking images in [0, 1], returning logits) over test examples
    (x, y) with the white-box attack ``attack`` (a resolved PGD spec: its loss, steps, restarts and budget are
    varied), the black-box attack ``black_box`` (a resolved Square spec) and, where given: ``l2``, a resolved PGD
    spec at the dataset's L2 budget (the L2 checks); a ``surrogate`` model for the transfer attack; the authors'
    ``protocol`` pairs (label of the strong attack, its spec, label of the protocol's, its spec); ``reported``, the
    columns a table reports for the model, ``{name: {"spec": resolved spec, "flags": per-example robust flags on
    these examples}}`` (their convergence checks and the best known robust accuracy); ``no_surrogate`` says why
    there is no surrogate. Every measurement is kept, per example (``flags``), with its accuracy, for the page."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: AttackSpec,
                 black_box: AttackSpec | None, settings: Settings | None = None, seed: int = 0, batch_size: int = 500,
                 surrogate: nn.Module | None = None, no_surrogate: str | None = None,
                 protocol: list[tuple[str, AttackSpec, str, AttackSpec]] | None = None,
                 reported: dict[str, dict] | None = None, l2: AttackSpec | None = None,
                 log: Callable[[str], None] | None = None):
        self.model, self.x, self.y = model.eval(), x, y
        typed = lambda spec: None if spec is None else AttackSpec.from_dict(spec)  # noqa: E731  (its JSON form too)
        self.attack, self.black_box, self.settings = typed(attack), typed(black_box), settings or Settings()
        self.l2 = typed(l2)
        attack = self.attack
        #: the audit's attack's steps and step size (its type's default where it sets none: PGD's eps / 4)
        self.steps = _steps_of(attack)
        self.step = attack.step_size if attack.step_size is not None else \
            ATTACK_DECLARATIONS[attack.type].step_for(float(attack.eps), self.steps)
        self.seed, self.batch_size = seed, batch_size
        self.surrogate = surrogate
        self.protocol = [(s, typed(sp), p, typed(pp)) for s, sp, p, pp in protocol or []]
        self.reported = reported or {}
        self.no_surrogate = no_surrogate or "no surrogate: audit.surrogates names no other model of the catalog for " \
            "this dataset"
        self.flags: dict[str, str] = {}
        self.specs: dict[str, AttackSpec] = {}
        self.loss_trace: dict[str, Any] = {}
        self.usable = True          # the attack's gradients can be used (set by the graph and gradients checks)
        self.graph_broken = False
        self._verdicts: dict[str, str] = {}
        self.log = log or (lambda text: None)
        for name, col in self.reported.items():
            self.flags[f"column {name}"], self.specs[f"column {name}"] = col["flags"], AttackSpec.from_dict(col["spec"])

    # ------------------------------------------------------------------------------------------ measurements

    def measure(self, label: str, spec: AttackSpec, seed: int | None = None) -> str:
        """Per-example robust flags of the model under an attack spec (once per label; an attack already measured
        with the same spec and seed, e.g. a reported column, is not run again)."""
        if label not in self.flags and seed is None and self.seed == 0:
            same = next((lb for lb, sp in self.specs.items() if sp.as_dict() == spec.as_dict() and lb in self.flags),
                        None)
            if same is not None:
                self.flags[label], self.specs[label] = self.flags[same], spec
        if label not in self.flags:
            out = run_attack(self.model, self.x, self.y, spec, seed=self.seed if seed is None else seed,
                             batch_size=self.batch_size)
            self.flags[label], self.specs[label] = bits(out.robust_correct), spec
            self.log(f"{label}: {_pct(accuracy(self.flags[label]))} ({out.seconds:.1f} s)")
        return self.flags[label]

    def clean(self) -> str:
        return self.measure("clean", AttackSpec.from_dict({"type": "clean", "eps": 0.0, "norm": self.attack.norm}))

    def _at(self, spec: AttackSpec, white_box_only: bool) -> list[str]:
        return [label for label, s in self.specs.items() if label != "clean" and s.norm == spec.norm
                and s.eps == spec.eps and not (white_box_only and (s.type in NOT_WHITE_BOX
                                                                    or label.startswith("transfer")))]

    def _all_robust(self, labels: list[str]) -> str:
        n = len(self.y)
        out = self.clean()
        for label in labels:
            out = both(out, self.flags[label][:n])
        return out

    def white_box(self, spec: AttackSpec | None = None) -> str:
        """Per example, robust under every white-box attack measured at the attack's budget: the worst case of the
        gradient attacks (the audit's and the reported columns' of a white-box type)."""
        return self._all_robust(self._at(spec or self.attack, white_box_only=True))

    def best_known(self, spec: AttackSpec | None = None) -> tuple[str, list[str]]:
        """Per example, robust under every attack measured at the budget (white box, black box, transfer, the
        reported columns): the best known robust accuracy's flags, and the attacks it is the worst case of."""
        labels = self._at(spec or self.attack, white_box_only=False)
        return self._all_robust(labels), labels

    def _steps(self, m: int) -> str:
        return f"PGD-{self.steps * m}"

    def base(self) -> str:
        """The audit's attack as configured (PGD-k)."""
        return self.measure(self._steps(1), self.attack)

    # ---------------------------------------------------------------------------------------------- checks

    def run(self) -> list[dict]:
        """Every check, in order; a check that raises is a verdict (fail, with the error), never a traceback."""
        self.clean()
        order = [self.check_graph, self.check_outputs, self.check_gradients, self.check_consistency,
                 self.check_surface, self.check_steps, self.check_restarts, self.check_losses, self.check_targeted,
                 self.check_silent, self.check_eps, self.check_l2_steps, self.check_l2_eps, self.check_black_box,
                 self.check_transfer, self.check_bpda, self.check_randomness, self.check_autoattack,
                 self.check_protocol]
        found = [self._guarded(fn) for fn in order]
        found += self.check_columns()
        return found

    def _guarded(self, fn: Callable[[], dict]) -> dict:
        name = fn.__name__[len("check_"):].replace("_", "-")
        name = {"black-box": "black-box", "l2-steps": "steps-l2", "l2-eps": "eps-l2"}.get(name, name)
        if name in NEEDS_GRADIENTS and not self.usable:
            why = ("the model's graph is broken (no input gradient)" if self.graph_broken else
                   "the input gradients are unusable (the gradients check)")
            return check(name, name, "", "", "skip", f"n/a: {why}; the gradient-free checks decide")
        try:
            found = fn()
        except Exception as exc:  # a verdict, never a traceback
            self.log(f"{name}: {type(exc).__name__}: {exc}")
            if self.graph_broken:
                return check(name, name, "", "", "skip", f"n/a: the model's graph is broken ({type(exc).__name__})")
            return check(name, name, "the check must run on the model", "", "fail",
                         f"the check could not run: {type(exc).__name__}: {exc}",
                         "fix the model or the evaluation so that this check runs (the error is on the page)",
                         error="".join(traceback.format_exception_only(type(exc), exc)).strip())
        if found["name"] in FINDS_ONLY and not self.usable and found["verdict"] == "pass":
            found = {**found, "verdict": "skip", "summary": "n/a (the input gradients are unusable): "
                     + found["summary"]}
        self._verdicts[found["name"]] = found["verdict"]
        return found

    def check_graph(self) -> dict:
        """A forward pass on an input that requires a gradient must give an output that depends on it."""
        xb = self.x[: min(len(self.x), 8)].detach().clone().requires_grad_(True)
        rule = ("the model's output must depend on its input through autograd (else every gradient attack fails "
                "with an error or does nothing: a wrapper that detaches its input, a no-grad forward)")
        source = "Athalye et al. 2018, Sec. 4.1 (BPDA for parts without a gradient); Carlini et al. 2019, Sec. 5.5"
        with frozen(self.model):
            out = self.model(xb)
            ok = out.requires_grad
            if ok:
                (grad,) = torch.autograd.grad(out.float().sum(), xb, allow_unused=True)
                ok = grad is not None
        if not ok:
            self.graph_broken, self.usable = True, False
            return check("graph", "The model's computation graph", rule, source, "fail",
                         "the output does not depend on the input through autograd: no gradient attack can run",
                         "make the forward differentiable, or attack through BPDA (Athalye et al. 2018: the "
                         "non-differentiable part's backward as the identity); report Square and transfer meanwhile")
        return check("graph", "The model's computation graph", rule, source, "pass",
                     "the output has an input gradient")

    def check_outputs(self) -> dict:
        with torch.no_grad():
            out = self.model(self.x[:self.batch_size]).float()
        probs = _is_probabilities(out)
        return check("outputs", "Logits, not probabilities",
                     "the model's outputs must be logits: outputs that are probabilities (non-negative, summing to 1) "
                     "make the attacks' cross-entropy the log of a softmax of probabilities, whose gradients vanish",
                     "Carlini et al. 2019, Sec. 4.4; Croce & Hein 2020 (check_range_output)",
                     "fail" if probs else "pass",
                     "the outputs are probabilities (each row non-negative, summing to 1)" if probs else
                     "the outputs are not probabilities", "return the logits (or attack log(outputs) as the logits)",
                     probabilities=probs)

    def model_classes(self) -> int:
        with torch.no_grad():
            return int(self.model(self.x[:1]).shape[1])

    def gradients(self, x: torch.Tensor, y: torch.Tensor, create: bool = False) -> torch.Tensor:
        """The cross-entropy's input gradient per example (flattened), in batches, weights frozen."""
        out = []
        with frozen(self.model), torch.autocast(device_type=x.device.type, enabled=False):
            for start in range(0, len(x), self.batch_size):
                xb = x[start:start + self.batch_size].detach().clone().requires_grad_(True)
                loss = F.cross_entropy(self.model(xb).float(), y[start:start + self.batch_size], reduction="sum")
                (grad,) = torch.autograd.grad(loss, xb, allow_unused=True)
                out.append((torch.zeros_like(xb) if grad is None else grad).flatten(1))
        return torch.cat(out) if out else torch.zeros(0, self.x[0].numel(), device=x.device)

    def _correct(self) -> torch.Tensor:
        return torch.tensor([c == "1" for c in self.clean()], device=self.x.device)

    def check_gradients(self) -> dict:
        s = self.settings
        if self.graph_broken:
            return check("gradients", "Input gradients on the test points", "", "", "skip",
                         "n/a: the model's graph is broken (the graph check)")
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
        if verdict == "fail":
            self.usable = False
        return check("gradients", "Input gradients on the test points",
                     f"at most {_pct(s.max_zero_gradients)} of the correctly classified test points may have an "
                     "input gradient of the loss that is all zero (or not finite): PGD's L-inf step is its sign, so "
                     "such a point is never moved (shattered or vanishing gradients); any such point: warn",
                     "Athalye et al. 2018, Sec. 4 (shattered and vanishing gradients); Carlini et al. 2019, Sec. 5.5",
                     verdict, f"{_pct(zero_frac)} all-zero, {_pct(nonfinite)} not finite, median L2 norm "
                     f"{median:.3g} ({len(grads)} points)",
                     "find the part without a gradient (quantisation, saturation) and attack through BPDA or a "
                     "straight-through estimator; for saturated logits, the CW or DLR loss; report Square meanwhile",
                     zero_fraction=zero_frac, nonfinite_fraction=nonfinite, median_norm=median, points=len(grads))

    def check_consistency(self) -> dict:
        """Exploding or noisy gradients: the gradient must predict the loss one small step along it gives (first
        order), and stay pointed the same way under a much smaller input noise."""
        s, eps, norm = self.settings, self.attack.eps, self.attack.norm
        idx = self._correct().nonzero().squeeze(1)[:s.consistency_examples]
        x, y = self.x[idx], self.y[idx]
        grads = self.gradients(x, y).view_as(x)
        keep = (grads.flatten(1).abs().sum(1) > 0) & torch.isfinite(grads.flatten(1)).all(1)
        x, y, grads = x[keep], y[keep], grads[keep]
        if not len(x):
            return check("consistency", "Gradients that predict the loss", "", "", "skip",
                         "n/a: no correctly classified point with a non-zero gradient")
        t = eps / 10
        d = steepest_step(grads, norm)
        gen = torch.Generator(device=x.device).manual_seed(self.seed)
        noise = (torch.rand(x.shape, generator=gen, device=x.device, dtype=x.dtype) * 2 - 1) * (eps / 100)
        other = self.gradients((x + noise).clamp(0, 1), y).view_as(x)
        with torch.no_grad():
            before = F.cross_entropy(self.model(x).float(), y, reduction="none")
            after = F.cross_entropy(self.model((x + t * d).clamp(0, 1)).float(), y, reduction="none")
            predicted = t * (grads * d).flatten(1).sum(1)
            ratio = ((after - before) / predicted.clamp_min(1e-12))
            cosine = F.cosine_similarity(grads.flatten(1), other.flatten(1), dim=1)
        median_ratio, median_cos = float(ratio.median()), float(cosine.median())
        verdict = "fail" if median_ratio < 0.1 else "warn" if (median_ratio < 0.3 or median_cos < 0.5) else "pass"
        return check("consistency", "Gradients that predict the loss (exploding or noisy gradients)",
                     f"a step of eps/10 along the gradient's steepest-ascent direction must raise the loss by at least "
                     f"0.3x what the gradient predicts (first order; median over {len(x)} points; below 0.1: fail), "
                     f"and the gradient under uniform input noise of eps/100 must keep a median cosine of 0.5 with "
                     f"the gradient without it (else warn): a gradient far larger than the loss it moves, or one that "
                     f"turns under tiny noise, is exploding or noisy (a high-frequency wrapper)",
                     "Athalye et al. 2018, Sec. 4 (exploding, shattered gradients); Carlini et al. 2019, Sec. 5.5",
                     verdict, f"median realised/predicted loss rise {median_ratio:.2f}, median cosine under noise "
                     f"{median_cos:.2f} ({len(x)} points)",
                     "smooth the gradient: attack through BPDA of the noisy part, or EOT over input noise; "
                     "report Square and transfer beside the gradient attacks",
                     ratio=median_ratio, cosine=median_cos, points=len(x))

    def check_surface(self) -> dict:
        s, eps, norm = self.settings, self.attack.eps, self.attack.norm
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
                     f"the gradient direction ends higher on {wins} of {shown} examples",
                     "the gradient does not point uphill: attack through BPDA or EOT of the part that masks it; "
                     "report Square and transfer", t=ts, traces=traces, wins=wins, examples=shown)

    def check_steps(self) -> dict:
        return self._steps_check("steps", self.attack)

    def check_l2_steps(self) -> dict:
        if self.l2 is None:
            return check("steps-l2", "L2: the attack against APGD-L2", "", "", "skip", "no L2 budget for the dataset")
        return self._steps_check("steps-l2", self.l2)

    def _steps_check(self, name: str, spec: dict) -> dict:
        """The attack as configured against APGD-CE (a step size that decays, so more iterations do not cycle) at
        each multiple of its steps."""
        s, k, norm = self.settings, _steps_of(spec), spec.norm
        tag = "" if norm == self.attack.norm and spec is self.attack else f" {norm.upper()}"
        base_label = f"PGD-{k}{tag}"
        base = self.base() if spec is self.attack else self.measure(base_label, spec)
        curve = [(k * m, accuracy(self.measure(f"APGD-CE-{k * m}{tag}", _apgd(spec, k * m))))
                 for m in sorted(s.step_multipliers)]
        most = self.flags[f"APGD-CE-{k * max(s.step_multipliers)}{tag}"]
        fewest = self.flags[f"APGD-CE-{k * min(s.step_multipliers)}{tag}"]
        verdict, stats = compare(base, most, s.tolerance, s.significance)
        more, more_stats = compare(fewest, most, s.tolerance, s.significance)
        verdict = worst([verdict, "warn" if more != "pass" else "pass"])
        return check(name, f"PGD-{k}{tag} against APGD-CE for more iterations",
                     f"APGD-CE (the official code: its step halves when the loss stalls, so it does not cycle as "
                     f"sign-PGD at a fixed step does) at {max(s.step_multipliers)}x the steps may not lower robust "
                     f"accuracy by more than {_pct(s.tolerance)} below PGD-{k} (significantly: fail; not: warn); "
                     f"APGD at {max(s.step_multipliers)}x its fewest steps still falling: warn",
                     "Carlini et al. 2019, Sec. 5.2 (iterative attacks must converge); Croce & Hein 2020 (APGD)",
                     verdict, f"PGD-{k} {_pct(accuracy(base))}; " + ", ".join(
                         f"APGD-CE-{steps} {_pct(a)}" for steps, a in curve),
                     f"PGD-{k} has not converged: report APGD-CE (or AutoAttack) for this column, or run PGD with "
                     f"a decaying step for {k * max(s.step_multipliers)}+ steps",
                     pgd=accuracy(base), curve=curve, apgd_gap=more_stats["gap"], **stats)

    def check_restarts(self) -> dict:
        """The restart curve: PGD-k from fresh random starts, one after another (each its own seed), until a restart
        breaks no example twice in a row (it has flattened) or ``restarts`` are run."""
        s = self.settings
        k = self.steps
        one = self.base()
        current, curve, added = one, [(1, accuracy(one))], []
        for r in range(2, max(s.restarts, 1) + 1):
            flags = self.measure(f"PGD-{k} restart {r}", self.attack.replace(random_start=True),
                                 seed=self.seed + 7919 * (r - 1))
            new = both(current, flags)
            added.append(current.count("1") - new.count("1"))
            current = new
            curve.append((r, accuracy(current)))
            if len(added) >= 2 and added[-1] == 0 and added[-2] == 0:
                break
        self.flags[f"PGD-{k} x{len(curve)} restarts"] = current
        self.specs[f"PGD-{k} x{len(curve)} restarts"] = self.attack.replace(restarts=len(curve))
        flattened = len(added) >= 2 and added[-1] == 0 and added[-2] == 0
        verdict, stats = compare(one, current, s.tolerance, s.significance)
        still = bool(added) and added[-1] > s.tolerance / 4 * len(self.y)
        if verdict == "pass" and still:
            verdict = "warn"
        return check("restarts", "The restart curve",
                     f"PGD-{k} with up to {s.restarts} random restarts (run until two restarts in a row break no "
                     f"example) may not lower robust accuracy by more than {_pct(s.tolerance)} below one "
                     f"(significantly: fail); a curve still falling by more than {_pct(s.tolerance / 4)} at its last "
                     "restart: warn",
                     "Carlini et al. 2019, Sec. 5.2; Croce & Hein 2020 (restarts)", verdict,
                     ", ".join(f"{r} {_pct(a)}" for r, a in curve) + (" (flat)" if flattened else " (still falling)"
                                                                       if still else ""),
                     f"one PGD-{k} run does not find the worst case: report it with restarts until the curve is flat "
                     "(or APGD / AutoAttack)", curve=curve, flattened=flattened, added=added, **stats)

    def check_losses(self) -> dict:
        s = self.settings
        results = {"ce": accuracy(self.base())}
        classes = self.model_classes()
        for loss in ("cw", "dlr"):
            if loss == "dlr" and classes < 3:
                continue
            results[loss] = accuracy(self.measure(f"PGD-{self.steps} {loss.upper()}",
                                                  self.attack.replace(loss=loss)))
        loss = min((k for k in results if k != "ce"), key=results.get, default="ce")
        verdict, stats = (compare(self.base(), self.flags[f"PGD-{self.steps} {loss.upper()}"],
                                  s.tolerance, s.significance) if loss != "ce" else ("pass", {}))
        return check("losses", "The attack's loss against the margin (CW) and DLR losses",
                     f"PGD on the CW margin loss or the DLR loss may not lower robust accuracy by more than "
                     f"{_pct(s.tolerance)} below PGD on the cross-entropy (a saturated CE, e.g. logits scaled by a "
                     "large factor, has vanishing gradients where the margin and DLR losses still work)",
                     "Carlini et al. 2019, Sec. 4.4 and 5.2; Croce & Hein 2020 (DLR)", verdict,
                     ", ".join(f"{k.upper()} {_pct(v)}" for k, v in results.items()),
                     f"the CE is saturated or weak: report the {loss.upper()} loss's PGD (or APGD-DLR, AutoAttack)",
                     accuracies=results, strongest=loss, **stats)

    def check_targeted(self) -> dict:
        """The multi-targeted attack: PGD on the targeted margin towards each of the classes ranked next."""
        s, classes = self.settings, self.model_classes()
        if classes < 2:
            return check("targeted", "Multi-targeted PGD", "", "", "skip", "fewer than two classes")
        targets = min(9, classes - 1)
        spec = self.attack.replace(type="t-pgd", loss="cw", target_classes=targets).without(
            "momentum", "kappa", "clip_start", "start")
        flags = self.measure(f"T-PGD-{self.steps} x{targets} targets", spec)
        verdict, stats = compare(self.base(), flags, s.tolerance, s.significance)
        return check("targeted", "Multi-targeted PGD",
                     f"PGD on the targeted margin towards each of the {targets} classes ranked next (Gowal et al. "
                     f"2019's multi-targeted attack) may not lower robust accuracy by more than {_pct(s.tolerance)} "
                     f"below PGD-{self.steps}",
                     "Gowal et al. 2019 (multi-targeted); Croce & Hein 2020 (APGD-T)", verdict,
                     f"PGD-{self.steps} {_pct(accuracy(self.base()))}, multi-targeted "
                     f"{_pct(accuracy(flags))}",
                     "an untargeted attack misses what targets find: report APGD-T (or AutoAttack) for this column",
                     accuracy=accuracy(flags), **stats)

    def check_silent(self) -> dict:
        """Best-iterate PGD (the first misclassified iterate kept) against the last iterate; the loss trace kept."""
        s, a = self.settings, self.attack
        label = f"PGD-{self.steps} best iterate"
        base = self.base()
        clean = self._correct()
        robust, traces = [], []
        for b, start in enumerate(range(0, len(self.x), self.batch_size)):
            xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
            cb = clean[start:start + self.batch_size]
            out = cb.clone()
            if cb.any():
                atk = from_spec(a, self.model, seed=batch_seed(self.seed, b))
                atk.best_iterate, atk.keep_trace = True, True
                adv = atk.perturb(xb[cb], yb[cb])
                with torch.no_grad():
                    out[cb] = self.model(adv).argmax(1) == yb[cb]
                if len(traces) < s.surface_examples and getattr(atk, "loss_trace", None) is not None:
                    traces += atk.loss_trace.t().tolist()[: s.surface_examples - len(traces)]
            robust.append(out)
        flags = bits(torch.cat(robust)) if robust else ""
        self.flags[label], self.specs[label] = flags, a
        self.loss_trace = {"steps": list(range(1, self.steps + 1)), "losses": traces}
        silent = sum(1 for p, q in zip(base, flags) if p == "1" and q == "0")
        verdict, stats = compare(base, flags, s.tolerance, s.significance)
        return check("silent", "Silent success: best iterate against last iterate",
                     f"PGD-{self.steps} keeping, per example, the first iterate the model misclassifies may not "
                     f"lower robust accuracy by more than {_pct(s.tolerance)} below the last iterate PGD returns "
                     "(the attack found an adversarial example and left it: Pintor et al. 2022's silent success)",
                     "Pintor et al. 2022, Indicators of Attack Failure (silent success)", verdict,
                     f"last iterate {_pct(accuracy(base))}, best iterate {_pct(accuracy(flags))} ({silent} silent "
                     "successes)", "report the best iterate (the attack's first adversarial point) for this column, "
                     "or a smaller step", silent=silent, trace=self.loss_trace, **stats)

    def check_eps(self) -> dict:
        return self._eps_check("eps", self.attack)

    def check_l2_eps(self) -> dict:
        if self.l2 is None:
            return check("eps-l2", "L2: robust accuracy against the budget", "", "", "skip",
                         "no L2 budget for the dataset")
        return self._eps_check("eps-l2", self.l2)

    def _eps_check(self, name: str, spec: AttackSpec) -> dict:
        s, eps, norm = self.settings, spec.eps, spec.norm
        grey, top = grey_budget(norm, self.x), must_fail_budget(norm, self.x)
        budgets = sorted({eps * m for m in s.eps_multipliers if eps * m < grey} | {grey, top})
        tag = "" if spec is self.attack else f" {norm.upper()}"
        n = max(_steps_of(spec), 20)  # APGD's step starts at 2 eps and adapts: every budget reachable

        def label(b: float) -> str:
            return f"APGD-CE-{n}{tag}" + ("" if b == eps else f" at eps {b:.4g}")

        curve = [(b, accuracy(self.measure(label(b), _apgd(spec.replace(eps=b), n)))) for b in budgets]
        with torch.no_grad():
            grey_class = self.model(torch.full_like(self.x[:1], 0.5)).argmax(1).item()
        bound = float((self.y == grey_class).float().mean())
        at = dict(curve)
        rises = [(a, b) for (_, a), (_, b) in zip(curve, curve[1:]) if b > a + s.tolerance]
        over_grey = at[grey] > bound + s.tolerance
        verdict = "fail" if (at[top] > s.top_accuracy or over_grey) else ("warn" if rises else "pass")
        what = "L-inf 1, the whole image range" if norm == "linf" else f"L2 {top:.4g}, the whole image range"
        return check(name, f"{norm.upper()}: robust accuracy against the budget, up to one at which any model fails",
                     f"APGD-CE-{n} (its step starts at twice the budget and adapts, so every budget is reachable) at "
                     f"each budget: at {what} (any image can be made any other, one of another class among them) robust accuracy "
                     f"must be at most {_pct(s.top_accuracy)}; at {norm} eps {grey:.4g} (every image within it of the "
                     f"mid-grey image) at most the mid-grey bound {_pct(bound)} (the test examples of the class the "
                     f"model gives that image) plus {_pct(s.tolerance)}: above either, masked gradients or a bug "
                     "(fail); accuracy must not rise with the budget (warn)",
                     "Carlini et al. 2019, Sec. 5.3 (unbounded attacks must succeed); Athalye et al. 2018", verdict,
                     ", ".join(f"eps {b:.4g}: {_pct(a)}" for b, a in curve) + f" (mid-grey bound {_pct(bound)})",
                     "the attack cannot reach points any model gets wrong: the gradients are masked; attack "
                     "through BPDA/EOT and report Square", curve=curve, grey_bound=bound, grey_eps=grey,
                     must_fail_eps=top)

    def _against_white_box(self, name: str, title: str, label: str, flags: str, source: str, what: str,
                           next_step: str) -> dict:
        """An attack without the model's gradients against the white-box worst case: in aggregate (compare) and per
        example (the examples only it breaks: masking on a subset)."""
        s = self.settings
        wb = self.white_box()
        verdict, stats = compare(wb, flags, s.tolerance, s.significance)
        only = stats["only_base_robust"]
        share = only / max(len(flags), 1)
        per_example = "fail" if share > s.tolerance else "warn" if share > s.tolerance / 4 else "pass"
        return check(name, title, f"{what} may not lower robust accuracy by more than {_pct(s.tolerance)} below the "
                     f"worst case of the white-box attacks, nor break more than {_pct(s.tolerance)} of the examples "
                     f"every white-box attack leaves robust (per example: masking on a subset; more than "
                     f"{_pct(s.tolerance / 4)}: warn)", source, worst([verdict, per_example]),
                     f"{label} {_pct(accuracy(flags))}, white box (worst case) {_pct(accuracy(wb))}; {only} examples "
                     f"only {label} breaks", next_step, accuracy=accuracy(flags), white_box=accuracy(wb),
                     only_breaks=only, only_share=share, **stats)

    def check_black_box(self) -> dict:
        title = "Black-box (Square) against white-box attacks"
        if self.black_box is None:
            return check("black-box", title, "", "", "skip", "no black-box attack configured")
        flags = self.measure("Square", self.black_box)
        return self._against_white_box("black-box", title, "Square", flags,
                                       "Athalye et al. 2018, Sec. 3.1; Croce & Hein 2020 (Square in AutoAttack)",
                                       "a gradient-free attack (Square, at the same budget)",
                                       "the gradients are masked (on the examples Square alone breaks): report "
                                       "AutoAttack (Square included) and attack through BPDA/EOT")

    def check_transfer(self) -> dict:
        title = "Transfer from a surrogate against white-box attacks"
        if self.surrogate is None:
            return check("transfer", title, "", "", "skip", self.no_surrogate)
        label = f"transfer PGD-{self.steps}"
        if label not in self.flags:
            robust = []
            for b, start in enumerate(range(0, len(self.x), self.batch_size)):
                xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                adv = from_spec(self.attack, self.surrogate.eval(), seed=batch_seed(self.seed, b)).perturb(xb, yb)
                with torch.no_grad():
                    robust.append((self.model(xb).argmax(1) == yb) & (self.model(adv).argmax(1) == yb))
            self.flags[label] = bits(torch.cat(robust))
            self.specs[label] = self.attack
        return self._against_white_box("transfer", title, "transfer", self.flags[label],
                                       "Athalye et al. 2018, Sec. 3.1; Tramer et al. 2020",
                                       "adversarial examples of the same attack on the surrogate",
                                       "the model's own gradients are masked where the surrogate's are not: attack "
                                       "through BPDA/EOT, report the transfer attack's number beside the white box")

    def check_bpda(self) -> dict:
        """Where the gradients are unusable or do not predict the loss, a gradient-free estimate of the gradient (NES,
        antithetic Gaussian samples) in PGD's place: the straight-through probe of a part without a gradient, whatever
        that part is. A model that names its non-differentiable part (``model.preprocess`` and ``model.classifier``,
        forward = classifier(preprocess(x))) is attacked through BPDA with the identity for that part instead."""
        s, a = self.settings, self.attack
        title = "A part without a gradient (BPDA / straight-through probe)"
        staged = callable(getattr(self.model, "preprocess", None)) and callable(getattr(self.model, "classifier", None))
        suspect = (not self.usable) or staged or any(
            self._verdicts.get(n) in ("warn", "fail") for n in ("gradients", "consistency", "surface"))
        if not suspect:
            return check("bpda", title, "", "", "skip", "n/a: the gradients are usable and predict the loss")
        wb = self.white_box()
        flags = self._probe(staged)
        label = "BPDA-PGD" if staged else "NES-PGD"
        self.flags[label], self.specs[label] = flags, a.replace(type="bpda")
        verdict, stats = compare(wb, flags, s.tolerance, s.significance)
        return check("bpda", title,
                     f"PGD on a gradient that skips the non-differentiable part ({label}: "
                     + ("the model's preprocess as the identity in the backward pass" if staged else
                        "estimated from the margin loss at antithetic Gaussian samples of eps/2, NES") +
                     f") may not lower robust accuracy by more than {_pct(s.tolerance)} below the white-box worst case",
                     "Athalye et al. 2018, Sec. 4.1 (BPDA); Ilyas et al. 2018 (NES)", verdict,
                     f"{label} {_pct(accuracy(flags))}, white box (worst case) {_pct(accuracy(wb))}",
                     "a part of the model has no useful gradient: report the BPDA (or NES) attack's number and "
                     "attack through BPDA with a differentiable approximation of that part",
                     accuracy=accuracy(flags), white_box=accuracy(wb), **stats)

    def _probe(self, staged: bool, samples: int = 32) -> str:
        a = self.attack
        sigma = a.eps / 2
        out = []
        for b, start in enumerate(range(0, len(self.x), self.batch_size)):
            x, y = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
            gen = torch.Generator(device=x.device).manual_seed(batch_seed(self.seed, b))
            delta = random_start(x, a.eps, a.norm, gen)
            delta = (x + delta).clamp(0, 1) - x
            for _ in range(self.steps):
                if staged:
                    with frozen(self.model):
                        z = (x + delta).detach().requires_grad_(True)
                        pre = self.model.preprocess(z)
                        pre = z + (pre - z).detach()  # the identity in the backward pass
                        loss = F.cross_entropy(self.model.classifier(pre).float(), y, reduction="sum")
                        (grad,) = torch.autograd.grad(loss, z)
                else:
                    grad = torch.zeros_like(x)
                    with torch.no_grad():
                        for _ in range(samples // 2):
                            u = torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
                            up = margin_loss(self.model((x + delta + sigma * u).clamp(0, 1)).float(), y)
                            down = margin_loss(self.model((x + delta - sigma * u).clamp(0, 1)).float(), y)
                            grad += (up - down).view(-1, *([1] * (x.dim() - 1))) * u
                with torch.no_grad():
                    delta = project(delta + self.step * steepest_step(grad, a.norm), a.eps, a.norm)
                    delta = (x + delta).clamp(0, 1) - x
            with torch.no_grad():
                out.append((self.model(x).argmax(1) == y) & (self.model(x + delta).argmax(1) == y))
        return bits(torch.cat(out))

    def _draws(self, x: torch.Tensor, n: int) -> tuple[torch.Tensor, bool, bool]:
        """``n`` forward passes of x, each after seeding the global RNG anew (a model that draws from it varies);
        (the outputs, whether the model used the global RNG, whether it reseeded it: the state it leaves is the same
        whatever it was given)."""
        outs, used, afters = [], False, []
        with torch.no_grad(), isolated_rng(x.device):
            for i in range(n):
                torch.manual_seed(self.seed * 7 + 10007 + i)
                before = torch.get_rng_state()
                outs.append(torch.cat([self.model(x[j:j + self.batch_size]).float()
                                       for j in range(0, len(x), self.batch_size)]))
                after = torch.get_rng_state()
                used |= not torch.equal(before, after)
                afters.append(after)
        reseeded = used and n > 1 and all(torch.equal(afters[0], a) for a in afters[1:])
        return torch.stack(outs), used, reseeded

    def _gradient_draws(self, n: int) -> torch.Tensor:
        """``n`` draws of the CE's input gradient at (up to 32) correctly classified points."""
        idx = self._correct().nonzero().squeeze(1)[:32]
        out = []
        with isolated_rng(self.x.device):
            for i in range(n):
                torch.manual_seed(self.seed * 7 + 20011 + i)
                out.append(self.gradients(self.x[idx], self.y[idx]))
        return torch.stack(out)

    def check_randomness(self) -> dict:
        """Two halves: the spread of the predictions over draws, and EOT (with draws sized from the gradient's
        variance) against one draw; a model that reseeds the RNG in its forward (the same draw every pass) warns."""
        s = self.settings
        stacked, used, reseeded = self._draws(self.x, s.eot_draws)
        scale = 1.0 + float(stacked.abs().max()) if stacked.numel() else 1.0
        out_varies = float((stacked - stacked[0]).abs().max()) > 1e-4 * scale if stacked.numel() else False
        grads = self._gradient_draws(min(s.eot_draws, 8)) if not self.graph_broken else None
        grad_varies = grads is not None and grads.numel() > 0 and bool(
            (grads - grads[0]).abs().amax() > 1e-5 * (1 + float(grads.abs().amax())))
        preds = stacked.argmax(2)
        spread = float((preds != preds[0]).any(0).float().mean()) if preds.numel() else 0.0
        rule = (f"{s.eot_draws} forward passes of the same inputs (the global RNG seeded anew before each) must give "
                f"the same outputs and input gradients (else warn: a randomized model); its predictions may change on "
                f"at most {_pct(s.tolerance)} of the examples (first half), and PGD with EOT (each step's gradient the "
                f"mean over as many draws as the gradient's variance needs, at least {s.eot_draws}, at most "
                f"{s.max_eot_draws}) may not lower the robust accuracy (majority of the draws) by more than "
                f"{_pct(s.tolerance)} below PGD on one draw (second half; fail: one draw's evaluation does not "
                "measure it). A model that reseeds the RNG in its forward pass (every pass the same draw): warn")
        source = "Athalye et al. 2018, Sec. 4.2 (EOT); Tramer et al. 2020; Croce & Hein 2020 (check_randomized)"
        title = "Randomness in the forward pass (EOT)"
        if not (out_varies or grad_varies):
            if reseeded:
                return check("randomness", title, rule, source, "warn",
                             f"{s.eot_draws} forward passes give the same outputs, but the model reseeds the global "
                             "RNG in its forward pass: a random defence whose every pass draws the same randomness",
                             "remove the reseeding (or seed per pass) and audit again: one fixed draw's evaluation "
                             "does not measure the random defence; then EOT", varies=False, spread=0.0,
                             reseeded=True, rng_used=used)
            return check("randomness", title, rule, source, "pass",
                         f"{s.eot_draws} forward passes give the same outputs and gradients", varies=False,
                         spread=0.0, reseeded=False, rng_used=used)
        needed = s.eot_draws
        if grads is not None and grads.numel() and len(grads) > 1:
            # per point: the draws' variance (its trace) and the squared norm of the expected gradient (the mean's,
            # less the variance it carries); the draws that bring the mean's standard error to half that norm
            g = len(grads)
            mean = grads.mean(0)
            var = ((grads - mean) ** 2).sum(2).sum(0) / (g - 1)
            signal = ((mean ** 2).sum(1) - var / g).clamp_min(0)
            per = torch.where(signal > 0, var / (0.25 * signal).clamp_min(1e-30), torch.full_like(var, float("inf")))
            needed = int(min(max(math.ceil(min(float(per.median()), 1e9)), s.eot_draws), s.max_eot_draws))
        plain = self._majority_robust(eot=False, draws=s.eot_draws)
        eot = self._majority_robust(eot=True, draws=needed)
        verdict, stats = compare(plain, eot, s.tolerance, s.significance)
        halves = {"spread": "fail" if spread > s.tolerance else "pass", "eot": verdict}
        verdict = worst([*halves.values(), "warn"])
        return check("randomness", title, rule, source, verdict,
                     f"outputs {'vary' if out_varies else 'do not vary'}, gradients "
                     f"{'vary' if grad_varies else 'do not'} between passes; predictions change on {_pct(spread)} of the examples; PGD "
                     f"{_pct(accuracy(plain))}, EOT-PGD over {needed} draws {_pct(accuracy(eot))} (majority of "
                     f"{s.eot_draws} draws)",
                     f"a randomized model: report EOT-PGD over {needed} draws (or more) and the majority vote of the "
                     "draws, not one draw's evaluation", varies=True, spread=spread, pgd=accuracy(plain),
                     eot_pgd=accuracy(eot), eot_draws=needed, halves=halves, reseeded=reseeded, **stats)

    def _majority_robust(self, eot: bool, draws: int) -> str:
        """Per example, correct in most of ``eot_draws`` passes both clean and under PGD, whose gradient each step is
        one pass's (``eot`` false) or the mean over ``draws`` passes (Expectation over Transformation)."""
        a, votes_n = self.attack, self.settings.eot_draws
        gen = torch.Generator(device=self.x.device).manual_seed(self.seed)
        out = []
        with isolated_rng(self.x.device):
            torch.manual_seed(self.seed)
            for start in range(0, len(self.x), self.batch_size):
                x, y = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                delta = (random_start(x, a.eps, a.norm, gen) if ATTACK_DECLARATIONS[a.type].settings(a).random_start
                         else torch.zeros_like(x))
                delta = (x + delta).clamp(0, 1) - x
                with frozen(self.model):
                    for _ in range(self.steps):
                        delta.requires_grad_(True)
                        loss = sum(F.cross_entropy(self.model(x + delta).float(), y, reduction="sum")
                                   for _ in range(draws if eot else 1))
                        (grad,) = torch.autograd.grad(loss, delta)
                        with torch.no_grad():
                            delta = project(delta + self.step * steepest_step(grad, a.norm), a.eps,
                                            a.norm)
                            delta = (x + delta).clamp(0, 1) - x
                with torch.no_grad():
                    votes = lambda z: sum((self.model(z).argmax(1) == y).int() for _ in range(votes_n))  # noqa: E731
                    out.append((votes(x) * 2 > votes_n) & (votes(x + delta) * 2 > votes_n))
        return bits(torch.cat(out))

    def check_autoattack(self) -> dict:
        log = CheckLog()
        xb, yb = self.x[:self.batch_size], self.y[:self.batch_size]
        model_checks(self.model, xb, yb, STANDARD, 9, log)
        return check("autoattack", "AutoAttack's own checks of the defence",
                     "AutoAttack's checks (pyautoattack.checks: a randomized defence, outputs that are probabilities, "
                     "a dynamic defence, too few classes for the targeted attacks) must raise no warning (warn)",
                     "Croce & Hein 2020 (AutoAttack's checks)", "warn" if log.warnings else "pass",
                     "; ".join(log.warnings) or "no warning",
                     "read AutoAttack's warning: for a randomized defence its rand version (EOT), for probabilities "
                     "the logits", warnings=list(log.warnings))

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
        over = [p for p in shown if p["verdict"] != "pass"]
        return check("protocol", title,
                     f"the authors' attack may not leave robust accuracy higher than the strong attack it stands in "
                     f"for by more than {_pct(s.tolerance)} (it overstates robustness)",
                     "Carlini et al. 2019, Sec. 3 (state the threat model, use strong attacks); Tramer et al. 2020",
                     verdict, "; ".join(f"{p['protocol']} {_pct(p['protocol_accuracy'])} vs {p['strong']} "
                                        f"{_pct(p['strong_accuracy'])}" for p in shown[:4])
                     + (f"; {len(shown) - 4} more pairs" if len(shown) > 4 else ""),
                     "report the strong attack's number, not the authors' protocol's: "
                     + ", ".join(f"{p['strong']} for {p['protocol']}" for p in over[:3]), pairs=pairs)

    def check_columns(self) -> list[dict]:
        """Every reported column against the best known robust accuracy at its budget: the per-example worst case
        over every attack measured there (the columns, the audit's own, Square, transfer)."""
        s, out = self.settings, []
        for name in self.reported:
            label = f"column {name}"
            spec, flags = self.specs[label], self.flags[label]
            if spec.clean or len(flags) != len(self.y):
                continue
            best, labels = self.best_known(spec)
            verdict, stats = compare(flags, best, s.tolerance, s.significance)
            broken = {lb.removeprefix("column "): sum(1 for p, q in zip(flags, self.flags[lb])
                                                      if p == "1" and q == "0") for lb in labels if lb != label}
            beaten_by = sorted((lb for lb, k in broken.items() if k), key=lambda lb: -broken[lb])
            out.append(check(label, f"Reported column {name}",
                             f"the column may not stand more than {_pct(s.tolerance)} above the best known robust "
                             f"accuracy at its budget ({spec.norm} eps {spec.eps:.4g}: per example, "
                             f"robust under every attack measured there, the audit's and the table's), significantly "
                             "(exact one-sided McNemar test on the examples it leaves robust that another breaks)",
                             "Carlini et al. 2019, Sec. 5.2 (report the worst case over attacks); Croce & Hein 2020",
                             verdict, f"{name} {_pct(accuracy(flags))}, best known {_pct(accuracy(best))}: "
                             f"{100 * stats['gap']:+.1f} points, {stats['only_base_robust']} examples it leaves robust "
                             f"that another attack breaks (p = {stats['p']:.2g})",
                             f"the column overstates robustness: report the best known {_pct(accuracy(best))} (the "
                             f"per-example worst case) or add the attacks that beat it ({', '.join(beaten_by[:3])})",
                             column=name, accuracy=accuracy(flags), best_known=accuracy(best), attacks=labels,
                             beaten_by=beaten_by, **stats))
        return out

    def headline(self) -> dict:
        """The best known robust accuracy at the attack's budget (and the L2 one's): the page's headline."""
        found = {}
        for spec in [self.attack] + ([self.l2] if self.l2 else []):
            best, labels = self.best_known(spec)
            found[f"{spec.norm} {spec.eps:.4g}"] = {"norm": str(spec.norm), "eps": spec.eps,
                                                          "accuracy": accuracy(best), "attacks": labels}
        return found

    def curves(self) -> dict:
        """Accuracies by attack, for the page's table of measurements."""
        return {label: accuracy(f) for label, f in self.flags.items()}
