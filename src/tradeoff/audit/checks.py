"""The checks of an audit, on one model and a batch of test examples, each with its pass rule (docs/audit.md).

Every attack here runs through the evaluation's own path (:func:`tradeoff.attacks.loop.run_attack`: fp32, eval mode,
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

from tradeoff.attacks.autoattack import STANDARD, CheckLog, model_checks, run_component
from tradeoff.attacks import from_spec, frozen
from tradeoff.attacks.base import add_counts, judge, project, random_start, steepest_step
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.core.spec import AttackSpec
from tradeoff.attacks.loop import batch_seed, run_attack
from tradeoff.storage.layout import bits
from tradeoff.attacks.pgd import margin_loss
from tradeoff.attacks.autoattack import isolated_rng

SEVERITY = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}
WORD = {"skip": "n/a", "pass": "pass", "warn": "warn", "fail": "fail"}
#: which verdict each check counts towards (a reported column's check, ``column <name>``, is convergence's)
GROUPS = {
    "masking": ("graph", "outputs", "gradients", "consistency", "surface", "fgsm", "eps", "eps-l2", "autoattack",
                "black-box", "black-box-l2", "transfer", "transfer-l2", "random", "random-l2", "decision", "bpda",
                "bpda-l2", "randomness", "finite"),
    "convergence": ("steps", "restarts", "losses", "targeted", "silent", "steps-l2", "losses-l2", "targeted-l2"),
    "protocol": ("protocol",),
}
#: the checks in the order the audit runs them (those that compare with the white-box worst case after it is measured)
ORDER = ("graph", "outputs", "gradients", "consistency", "surface", "steps", "restarts", "losses", "targeted", "silent",
         "fgsm", "eps", "steps-l2", "losses-l2", "targeted-l2", "eps-l2", "autoattack", "black-box", "black-box-l2",
         "transfer", "transfer-l2", "random", "random-l2", "decision", "bpda", "bpda-l2", "randomness", "finite",
         "protocol")
#: the checks that vary the audit's gradient attack itself: n/a when its gradients are unusable (their premise)
NEEDS_GRADIENTS = ("steps", "restarts", "silent", "steps-l2", "surface", "consistency", "fgsm")
#: the checks that only find something when an attack is stronger: a pass is n/a when the gradients are unusable
FINDS_ONLY = ("losses", "targeted", "losses-l2", "targeted-l2")
#: attack types that use no gradient of the model, or not the model's own (the white-box worst case leaves them out):
#: ``random`` (sampling in the ball), ``rays`` (decisions only), ``bpda`` (an adaptive gradient: BPDA, NES), ``eot``
#: (a randomized model's majority vote)
NOT_WHITE_BOX = ("clean", "square", "autoattack", "bpda", "random", "rays", "eot")
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
    random_samples: int = 64                     # uniform points of the eps-ball per example (random sampling)
    decision_queries: int = 1000                 # the decision-based attack's (RayS's) decisions per example
    adaptive_steps: int = 100                    # the adaptive attacks' (BPDA / NES with APGD) iterations
    adaptive_restarts: int = 3                   # BPDA-APGD-CE's restarts
    nes_samples: int = 32                        # NES: model evaluations per gradient estimate (antithetic pairs)

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


class Guarded(nn.Module):
    """The audited model as every probe and attack of the audit calls it: a batch of one image is run as a batch of
    two (the image twice; the first output kept), so that a model that refuses batch size 1 is not told its
    gradients are masked; and every finite input on which the model's logits are not finite is counted (on the
    device: no sync per call), a finding of its own (the ``finite`` check)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.seen = 0
        self.nonfinite: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        single = len(x) == 1
        out = self.model(torch.cat([x, x]) if single else x)
        out = out[:1] if single else out
        with torch.no_grad():
            bad = (torch.isfinite(x.flatten(1)).all(1) & ~torch.isfinite(out.flatten(1)).all(1)).sum()
            self.nonfinite = bad if self.nonfinite is None else self.nonfinite + bad
        self.seen += len(x)
        return out

    def nonfinite_count(self) -> int:
        return 0 if self.nonfinite is None else int(self.nonfinite)


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
                 autoattack: AttackSpec | dict | str | None = "standard", autoattack_l2: AttackSpec | None = None,
                 log: Callable[[str], None] | None = None):
        #: the model as given (its ``preprocess`` and ``classifier``, where it names them), and as the audit calls it
        self.original = model.eval()
        self.model, self.x, self.y = Guarded(self.original).eval(), x, y
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
        #: AutoAttack in the audit's suite (the official code): the standard version at the attack's budget unless
        #: given (a resolved spec), None: left out (the page says so); at the L2 budget likewise
        if autoattack == "standard":
            autoattack = AttackSpec.from_dict({"type": "autoattack", "norm": str(self.attack.norm),
                                               "eps": self.attack.eps})
        self.autoattack = typed(autoattack)
        self.autoattack_l2 = typed(autoattack_l2) if autoattack_l2 is not None else (
            self.autoattack.replace(norm="l2", eps=self.l2.eps) if self.autoattack is not None and self.l2 else None)
        self.warnings: dict[str, list[str]] = {}      # per measurement: the attack's own checks' warnings
        self.invalid: dict[str, dict[str, int]] = {}  # per measurement: the judge's counts (tradeoff.attacks.base.INVALID)
        self.votes: list[str] = []                    # measurements judged by the majority of a randomized model's draws
        self.randomized = False                       # the model's predictions vary between passes
        self.errors: dict[str, str] = {}              # measurements that could not run, and why
        for name, col in self.reported.items():
            self.flags[f"column {name}"], self.specs[f"column {name}"] = col["flags"], AttackSpec.from_dict(col["spec"])

    # ------------------------------------------------------------------------------------------ measurements

    def measure(self, label: str, spec: AttackSpec, seed: int | None = None) -> str:
        """Per-example robust flags of the model under an attack spec (once per label; an attack already measured
        with the same spec and seed, e.g. a reported column, is not run again), its own checks' warnings and the
        judge's counts of invalid examples kept per label."""
        if label not in self.flags and seed is None and self.seed == 0:
            same = next((lb for lb, sp in self.specs.items() if sp.as_dict() == spec.as_dict() and lb in self.flags),
                        None)
            if same is not None:
                self.flags[label], self.specs[label] = self.flags[same], spec
                for kept in (self.warnings, self.invalid):
                    if same in kept:
                        kept[label] = kept[same]
        if label not in self.flags:
            out = run_attack(self.model, self.x, self.y, spec, seed=self.seed if seed is None else seed,
                             batch_size=self.batch_size)
            self.flags[label], self.specs[label] = bits(out.robust_correct), spec
            if out.checks:
                self.warnings[label] = list(out.checks)
            counts = out.invalid  # the evaluation's judge (tradeoff.attacks.base.judge)
            if counts:
                self.invalid[label] = add_counts({}, counts)
            self.log(f"{label}: {_pct(accuracy(self.flags[label]))} ({out.seconds:.1f} s)")
        return self.flags[label]

    def keep(self, label: str, flags: str, spec: AttackSpec, invalid: dict[str, int] | None = None) -> str:
        """A measurement of the audit's own loops (not run_attack's), kept as ``measure`` keeps one."""
        self.flags[label], self.specs[label] = flags, spec
        if invalid is not None:
            self.invalid[label] = add_counts({}, invalid)
        self.log(f"{label}: {_pct(accuracy(flags))}")
        return flags

    def clean(self) -> str:
        return self.measure("clean", AttackSpec.from_dict({"type": "clean", "eps": 0.0, "norm": self.attack.norm}))

    def _at(self, spec: AttackSpec, white_box_only: bool) -> list[str]:
        return [label for label, s in self.specs.items() if label != "clean" and s.norm == spec.norm
                and s.eps == spec.eps and not (white_box_only and (s.type in NOT_WHITE_BOX
                                                                    or label.startswith("transfer")))]

    def _all_robust(self, labels: list[str]) -> str:
        """Per example, robust under every measurement named (the clean one among them where it is named)."""
        n = len(self.y)
        out = "1" * n
        for label in labels:
            out = both(out, self.flags[label][:n])
        return out

    def white_box(self, spec: AttackSpec | None = None) -> str:
        """Per example, correct clean and robust under every white-box attack measured at the budget: the worst case
        of the gradient attacks (the audit's and the reported columns' of a white-box type)."""
        return self._all_robust(["clean", *self._at(spec or self.attack, white_box_only=True)])

    def best_known(self, spec: AttackSpec | None = None) -> tuple[str, list[str]]:
        """Per example, robust under every attack measured at the budget (white box, black box, transfer, sampling,
        decisions, adaptive attacks, the reported columns): the best known robust accuracy's flags, and the
        measurements it is the worst case of, ``clean`` first. For a model whose predictions vary between passes, only
        the measurements judged by the majority of its draws (EOT's): one draw's outcome is not the model's."""
        labels = self._at(spec or self.attack, white_box_only=False)
        if self.randomized:
            labels = [lb for lb in labels if lb in self.votes]
            return self._all_robust(labels), labels
        return self._all_robust(["clean", *labels]), ["clean", *labels]

    def measured_at(self, spec: AttackSpec) -> bool:
        """Whether any attack was measured at the budget (else its robust accuracy is not measured: never the clean
        accuracy)."""
        labels = self._at(spec, white_box_only=False)
        return bool([lb for lb in labels if lb in self.votes] if self.randomized else labels)

    def _steps(self, m: int) -> str:
        return f"PGD-{self.steps * m}"

    def base(self) -> str:
        """The audit's attack as configured (PGD-k)."""
        return self.measure(self._steps(1), self.attack)

    # ---------------------------------------------------------------------------------------------- checks

    def run(self) -> list[dict]:
        """Every check, in order (:data:`ORDER`); a check that raises is a verdict (fail, with the error), never a
        traceback."""
        self.clean()
        found = [self.run_check(name) for name in ORDER]
        found += self.check_columns()
        self.findings = found
        return found

    def run_check(self, name: str) -> dict:
        """One check by its name (``steps-l2``), guarded as ``run`` guards it."""
        method = {"steps-l2": self.check_l2_steps, "eps-l2": self.check_l2_eps}.get(name) or getattr(
            self, "check_" + name.replace("-", "_"))
        return self._guarded(method, name)

    def _guarded(self, fn: Callable[[], dict], name: str | None = None) -> dict:
        if name is None:
            name = fn.__name__[len("check_"):].replace("_", "-")
            name = {"l2-steps": "steps-l2", "l2-eps": "eps-l2"}.get(name, name)
        if name in NEEDS_GRADIENTS and not self.usable:
            why = ("the model's graph is broken (no input gradient)" if self.graph_broken else
                   "the input gradients are unusable (the gradients check)")
            return self._note(check(name, name, "", "", "skip", f"n/a: {why}; the gradient-free checks decide"))
        try:
            found = fn()
        except Exception as exc:  # a verdict, never a traceback
            self.log(f"{name}: {type(exc).__name__}: {exc}")
            if self.graph_broken:
                return self._note(check(name, name, "", "", "skip",
                                        f"n/a: the model's graph is broken ({type(exc).__name__})"))
            return self._note(check(name, name, "the check must run on the model", "", "fail",
                                    f"the check could not run: {type(exc).__name__}: {exc}",
                                    "fix the model or the evaluation so that this check runs (the error is on the "
                                    "page)", error="".join(traceback.format_exception_only(type(exc), exc)).strip()))
        if found["name"] in FINDS_ONLY and not self.usable and found["verdict"] == "pass":
            found = {**found, "verdict": "skip", "summary": "n/a (the input gradients are unusable): "
                     + found["summary"]}
        return self._note(found)

    def _note(self, found: dict) -> dict:
        self._verdicts[found["name"]] = found["verdict"]
        return found

    def masking(self) -> str:
        """The masking group's verdict over the checks run so far."""
        return worst(v for n, v in self._verdicts.items() if group_of(n) == "masking")

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
            return int(self.model(self.x[:2]).shape[1])

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

    def _tag(self, spec: AttackSpec) -> str:
        return "" if spec is self.attack else f" {str(spec.norm).upper()}"

    def base_of(self, spec: AttackSpec) -> str:
        """The audit's attack (PGD-k) at a budget: the configured one, or the same at the L2 budget."""
        if spec is self.attack:
            return self.base()
        return self.measure(f"PGD-{_steps_of(spec)}{self._tag(spec)}", spec)

    def check_losses(self) -> dict:
        return self._losses_check("losses", self.attack)

    def check_losses_l2(self) -> dict:
        if self.l2 is None:
            return check("losses-l2", "L2: the loss", "", "", "skip", "no L2 budget for the dataset")
        return self._losses_check("losses-l2", self.l2)

    def _losses_check(self, name: str, spec: AttackSpec) -> dict:
        s, tag, k = self.settings, self._tag(spec), _steps_of(spec)
        base = self.base_of(spec)
        results = {"ce": accuracy(base)}
        classes = self.model_classes()
        for loss in ("cw", "dlr"):
            if loss == "dlr" and classes < 3:
                continue
            results[loss] = accuracy(self.measure(f"PGD-{k} {loss.upper()}{tag}", spec.replace(loss=loss)))
        loss = min((key for key in results if key != "ce"), key=results.get, default="ce")
        verdict, stats = (compare(base, self.flags[f"PGD-{k} {loss.upper()}{tag}"], s.tolerance, s.significance)
                          if loss != "ce" else ("pass", {}))
        return check(name, f"The attack's loss against the margin (CW) and DLR losses{tag}",
                     f"PGD on the CW margin loss or the DLR loss may not lower robust accuracy by more than "
                     f"{_pct(s.tolerance)} below PGD on the cross-entropy (a saturated CE, e.g. logits scaled by a "
                     "large factor, has vanishing gradients where the margin and DLR losses still work)",
                     "Carlini et al. 2019, Sec. 4.4 and 5.2; Croce & Hein 2020 (DLR)", verdict,
                     ", ".join(f"{key.upper()} {_pct(v)}" for key, v in results.items()),
                     f"the CE is saturated or weak: report the {loss.upper()} loss's PGD (or APGD-DLR, AutoAttack)",
                     accuracies=results, strongest=loss, **stats)

    def check_targeted(self) -> dict:
        return self._targeted_check("targeted", self.attack)

    def check_targeted_l2(self) -> dict:
        if self.l2 is None:
            return check("targeted-l2", "L2: multi-targeted PGD", "", "", "skip", "no L2 budget for the dataset")
        return self._targeted_check("targeted-l2", self.l2)

    def _targeted_check(self, name: str, spec: AttackSpec) -> dict:
        """The multi-targeted attack: PGD on the targeted margin towards each of the classes ranked next."""
        s, classes, tag, k = self.settings, self.model_classes(), self._tag(spec), _steps_of(spec)
        title = f"Multi-targeted PGD{tag}"
        if classes < 2:
            return check(name, title, "", "", "skip", "fewer than two classes")
        targets = min(9, classes - 1)
        t_spec = spec.replace(type="t-pgd", loss="cw", target_classes=targets).without(
            "momentum", "kappa", "clip_start", "start")
        flags = self.measure(f"T-PGD-{k} x{targets} targets{tag}", t_spec)
        base = self.base_of(spec)
        verdict, stats = compare(base, flags, s.tolerance, s.significance)
        return check(name, title,
                     f"PGD on the targeted margin towards each of the {targets} classes ranked next (Gowal et al. "
                     f"2019's multi-targeted attack) may not lower robust accuracy by more than {_pct(s.tolerance)} "
                     f"below PGD-{k}",
                     "Gowal et al. 2019 (multi-targeted); Croce & Hein 2020 (APGD-T)", verdict,
                     f"PGD-{k}{tag} {_pct(accuracy(base))}, multi-targeted {_pct(accuracy(flags))}",
                     "an untargeted attack misses what targets find: report APGD-T (or AutoAttack) for this column",
                     accuracy=accuracy(flags), **stats)

    def check_silent(self) -> dict:
        """Best-iterate PGD (the first misclassified iterate kept) against the last iterate; the loss trace kept."""
        s, a = self.settings, self.attack
        label = f"PGD-{self.steps} best iterate"
        base = self.base()
        clean = self._correct()
        robust, traces, counts = [], [], {}
        for b, start in enumerate(range(0, len(self.x), self.batch_size)):
            xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
            cb = clean[start:start + self.batch_size]
            out = cb.clone()
            if cb.any():
                atk = from_spec(a, self.model, seed=batch_seed(self.seed, b))
                atk.best_iterate, atk.keep_trace = True, True
                adv = atk.perturb(xb[cb], yb[cb])
                out[cb], found = judge(self.model, xb[cb], adv, yb[cb], a.eps, a.norm)
                counts = add_counts(counts, found)
                if len(traces) < s.surface_examples and getattr(atk, "loss_trace", None) is not None:
                    traces += atk.loss_trace.t().tolist()[: s.surface_examples - len(traces)]
            robust.append(out)
        flags = self.keep(label, bits(torch.cat(robust)) if robust else "", a, counts)
        self.loss_trace = {"steps": list(range(1, self.steps + 1)), "losses": traces}
        # per example: the attack passed through an adversarial point and returned one the model classifies right
        silent_at = [i for i, (p, q) in enumerate(zip(base, flags)) if p == "1" and q == "0"]
        silent = len(silent_at)
        verdict, stats = compare(base, flags, s.tolerance, s.significance)
        share = silent / max(len(flags), 1)
        verdict = worst([verdict, "fail" if share > s.tolerance else "warn" if silent else "pass"])
        return check("silent", "Silent success: best iterate against last iterate, per example",
                     f"per example, PGD-{self.steps} may not return a point the model classifies right after passing "
                     "through one it misclassifies (Pintor et al. 2022's silent success: the attack found an "
                     "adversarial example and left it): any such example warns, more than "
                     f"{_pct(s.tolerance)} of the examples, or the best iterate lowering robust accuracy by more than "
                     f"{_pct(s.tolerance)} significantly, fails",
                     "Pintor et al. 2022, Indicators of Attack Failure (silent success)", verdict,
                     f"last iterate {_pct(accuracy(base))}, best iterate {_pct(accuracy(flags))}: {silent} silent "
                     f"successes" + (f" (examples {', '.join(map(str, silent_at[:8]))}"
                                     + (", ..." if silent > 8 else "") + ")" if silent else ""),
                     "report the best iterate (the attack's first adversarial point) for this column, "
                     "or a smaller step", silent=silent, silent_examples=silent_at, trace=self.loss_trace, **stats)

    def check_fgsm(self) -> dict:
        """FGSM (one step of the whole budget from x) against the audit's iterative attack."""
        s, a = self.settings, self.attack
        spec = AttackSpec.from_dict({"type": "fgsm", "norm": str(a.norm), "eps": a.eps})
        self.base()
        iterative = [lb for lb in self._at(a, white_box_only=True) if lb != "FGSM"]
        fgsm = self.measure("FGSM", spec)
        base = self._all_robust(["clean", *iterative])
        verdict, stats = compare(base, fgsm, s.tolerance, s.significance)
        return check("fgsm", "A single step (FGSM) against the iterative attacks",
                     f"FGSM may not lower robust accuracy by more than {_pct(s.tolerance)} below the worst case of "
                     f"the iterative white-box attacks measured so far (PGD-{self.steps}, APGD, restarts, other "
                     "losses, targets; significantly: fail; not: warn): iterative attacks that a single step beats "
                     "are led astray by the gradients they follow (masked or misleading gradients near the input; "
                     "one weak attack alone is the steps check's finding)",
                     "Carlini et al. 2019, Sec. 5.2 (iterative attacks should beat single-step ones); Athalye et al. "
                     "2018 (the checklist)", verdict,
                     f"iterative white box (worst case of {len(iterative)}) {_pct(accuracy(base))}, FGSM "
                     f"{_pct(accuracy(fgsm))}",
                     "the iterative attack's gradients mislead it away from the input: attack through BPDA/EOT, "
                     "report the worst case with FGSM and gradient-free attacks", accuracy=accuracy(fgsm),
                     pgd=accuracy(base), **stats)

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
            grey_class = self.model(torch.full((2, *self.x.shape[1:]), 0.5, device=self.x.device,
                                                  dtype=self.x.dtype)).argmax(1)[0].item()
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
                           next_step: str, spec: AttackSpec | None = None) -> dict:
        """An attack without the model's gradients against the white-box worst case at the budget: in aggregate
        (compare) and per example (the examples only it breaks: masking on a subset)."""
        s = self.settings
        wb = self.white_box(spec)
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
        return self._black_box_check("black-box", self.black_box, self.attack)

    def check_black_box_l2(self) -> dict:
        if self.l2 is None:
            return check("black-box-l2", "L2: black-box (Square)", "", "", "skip", "no L2 budget for the dataset")
        spec = None if self.black_box is None else self.black_box.replace(norm="l2", eps=self.l2.eps)
        return self._black_box_check("black-box-l2", spec, self.l2)

    def _black_box_check(self, name: str, square: AttackSpec | None, at: AttackSpec) -> dict:
        tag = self._tag(at)
        title = f"Black-box (Square) against white-box attacks{tag}"
        if square is None:
            return check(name, title, "", "", "skip", "no black-box attack configured")
        flags = self.measure(f"Square{tag}", square)
        return self._against_white_box(name, title, f"Square{tag}", flags,
                                       "Athalye et al. 2018, Sec. 3.1; Croce & Hein 2020 (Square in AutoAttack)",
                                       "a gradient-free attack (Square, at the same budget)",
                                       "the gradients are masked (on the examples Square alone breaks): report "
                                       "AutoAttack (Square included) and attack through BPDA/EOT", at)

    def check_transfer(self) -> dict:
        return self._transfer_check("transfer", self.attack)

    def check_transfer_l2(self) -> dict:
        if self.l2 is None:
            return check("transfer-l2", "L2: transfer", "", "", "skip", "no L2 budget for the dataset")
        return self._transfer_check("transfer-l2", self.l2)

    def _transfer_check(self, name: str, spec: AttackSpec) -> dict:
        tag = self._tag(spec)
        title = f"Transfer from a surrogate against white-box attacks{tag}"
        if self.surrogate is None:
            return check(name, title, "", "", "skip", self.no_surrogate)
        label = f"transfer PGD-{_steps_of(spec)}{tag}"
        if label not in self.flags:
            robust, counts = [], {}
            for b, start in enumerate(range(0, len(self.x), self.batch_size)):
                xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                adv = from_spec(spec, self.surrogate.eval(), seed=batch_seed(self.seed, b)).perturb(xb, yb)
                right, found = judge(self.model, xb, adv, yb, spec.eps, spec.norm)
                with torch.no_grad():
                    robust.append((self.model(xb).argmax(1) == yb) & right)
                counts = add_counts(counts, found)
            self.keep(label, bits(torch.cat(robust)), spec, counts)
        return self._against_white_box(name, title, "transfer", self.flags[label],
                                       "Athalye et al. 2018, Sec. 3.1; Tramer et al. 2020",
                                       "adversarial examples of the same attack on the surrogate",
                                       "the model's own gradients are masked where the surrogate's are not: attack "
                                       "through BPDA/EOT, report the transfer attack's number beside the white box",
                                       spec)

    def check_random(self) -> dict:
        return self._random_check("random", self.attack)

    def check_random_l2(self) -> dict:
        if self.l2 is None:
            return check("random-l2", "L2: random sampling", "", "", "skip", "no L2 budget for the dataset")
        return self._random_check("random-l2", self.l2)

    def _random_check(self, name: str, spec: AttackSpec) -> dict:
        """``random_samples`` points drawn uniformly in the eps-ball of each example (clipped to [0, 1]): an example
        any of them breaks is broken. Against the white-box worst case per example: random points that find what
        gradient attacks missed mean the gradients mislead (Athalye et al. 2018's checklist)."""
        n, tag = self.settings.random_samples, self._tag(spec)
        label = f"random sampling x{n}{tag}"
        if label not in self.flags:
            robust = []
            for b, start in enumerate(range(0, len(self.x), self.batch_size)):
                xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                gen = torch.Generator(device=xb.device).manual_seed(batch_seed(self.seed + 104729, b))
                with torch.no_grad():
                    out = torch.isfinite(logits := self.model(xb)).all(1) & (logits.argmax(1) == yb)
                    for _ in range(n):
                        point = (xb + random_start(xb, spec.eps, spec.norm, gen)).clamp(0, 1)
                        logits = self.model(point)
                        out &= torch.isfinite(logits).all(1) & (logits.argmax(1) == yb)
                robust.append(out)
            self.keep(label, bits(torch.cat(robust)), spec.replace(type="random"))
        return self._against_white_box(
            name, f"Random sampling in the eps-ball against white-box attacks{tag}", "random sampling",
            self.flags[label], "Athalye et al. 2018, Sec. 3.1 and 5 (random sampling finds what gradient descent "
            "misses); Carlini et al. 2019, Sec. 5.5 (brute-force random search)",
            f"{n} points drawn uniformly in each example's eps-ball", "the gradient attacks miss examples that "
            "random noise breaks: their gradients are masked there; attack through BPDA/EOT, report the worst case "
            "with gradient-free attacks", spec)

    def check_decision(self) -> dict:
        """RayS (a decision-based attack: the model's predicted class only) at the L-inf budget."""
        title = "A decision-based (hard-label) attack against white-box attacks"
        at = self.attack if str(self.attack.norm) == "linf" else None
        if at is None:
            return check("decision", title, "", "", "skip", "RayS is an L-inf attack; the audit's attack is not")
        spec = AttackSpec.from_dict({"type": "rays", "norm": "linf", "eps": at.eps,
                                     "queries": self.settings.decision_queries})
        flags = self.measure(f"RayS x{self.settings.decision_queries} queries", spec)
        return self._against_white_box("decision", title, "RayS", flags,
                                       "Chen & Gu 2020 (RayS); Brendel et al. 2018 (decision-based attacks); "
                                       "Carlini et al. 2019, Sec. 5.4 (gradient-free attacks)",
                                       f"RayS ({self.settings.decision_queries} decisions per example)",
                                       "the gradient attacks miss what an attack on the decisions alone finds: "
                                       "their gradients are masked; attack through BPDA/EOT", at)

    def check_bpda(self) -> dict:
        return self._bpda_check("bpda", self.attack)

    def check_bpda_l2(self) -> dict:
        if self.l2 is None:
            return check("bpda-l2", "L2: BPDA", "", "", "skip", "no L2 budget for the dataset")
        return self._bpda_check("bpda-l2", self.l2)

    def _staged(self) -> nn.Module | None:
        m = self.original
        return m if callable(getattr(m, "preprocess", None)) and callable(getattr(m, "classifier", None)) else None

    def _bpda_check(self, name: str, spec: AttackSpec) -> dict:
        """Where masking is suspected (the gradients unusable or not predicting the loss, a check of the masking
        group not passing so far, or a model that names a ``preprocess``), the adaptive attacks: BPDA (the identity
        backward for the model's ``preprocess``, else for every rounding-like operation) with APGD-CE and its
        restarts and APGD-T (its targets); where BPDA's gradients are unusable too, NES (the gradient estimated from
        the outputs) with APGD-DLR. Judged on the model itself; the per-example worst case enters the best known
        robust accuracy (an upper bound where masking fails)."""
        s, tag = self.settings, self._tag(spec)
        title = f"Adaptive attacks: BPDA / straight-through and NES with APGD{tag}"
        staged = self._staged()
        suspect = (not self.usable) or staged is not None or any(
            v == "fail" for n, v in self._verdicts.items() if group_of(n) == "masking") or any(
            self._verdicts.get(n) == "warn" for n in ("gradients", "consistency", "surface"))
        if not suspect:
            return check(name, title, "", "", "skip", "n/a: no sign of masking (the gradients are usable and predict "
                                                     "the loss; no masking check so far fails)")
        wb = self.white_box(spec)
        found, parts = self._adaptive(spec)
        label = f"adaptive{tag}"
        flags = self.keep(label, self._all_robust(list(found)) if found else self.clean(), spec.replace(type="bpda"))
        verdict, stats = compare(wb, flags, s.tolerance, s.significance)
        return check(name, title,
                     "the adaptive attacks (BPDA: " + ("the model's preprocess as the identity in the backward pass"
                                                       if staged is not None else "every rounding-like operation "
                                                       f"({', '.join(ROUNDING)}) as the identity backward") +
                     f", with APGD-CE ({s.adaptive_restarts} restarts) and APGD-T; NES with APGD-DLR where BPDA's "
                     f"gradients are unusable too) may not lower robust accuracy by more than {_pct(s.tolerance)} "
                     "below the white-box worst case",
                     "Athalye et al. 2018, Sec. 4.1 (BPDA); Tramer et al. 2020 (adaptive attacks); Ilyas et al. "
                     "2018 (NES)", verdict,
                     "; ".join(f"{lb} {_pct(accuracy(f))}" for lb, f in found.items()) + (", " if found else "")
                     + f"worst case {_pct(accuracy(flags))}, white box (worst case) {_pct(accuracy(wb))}"
                     + ("; " + "; ".join(parts) if parts else ""),
                     "a part of the model has no useful gradient: report the adaptive attacks' worst case (an upper "
                     "bound) and attack through BPDA with a differentiable approximation of that part",
                     accuracy=accuracy(flags), white_box=accuracy(wb), attacks=list(found), notes=parts, **stats)

    def _adaptive(self, spec: AttackSpec) -> tuple[dict[str, str], list[str]]:
        """The adaptive attacks' flags by label (each kept as a measurement), and notes on what did not run."""
        s, tag = self.settings, self._tag(spec)
        staged = self._staged()
        bpda = StraightThrough(self.model, staged)
        found, notes = {}, []
        grads = self._wrapped_gradients(bpda)
        usable = grads is not None and float(grads) <= s.max_zero_gradients
        runs = []
        if usable:
            runs += [(f"BPDA-APGD-CE x{s.adaptive_restarts}{tag}", bpda, "apgd-ce",
                      {"restarts": s.adaptive_restarts}),
                     (f"BPDA-APGD-T{tag}", bpda, "apgd-t", {"target_classes": 9})]
        else:
            notes.append("BPDA's gradients are unusable too: NES in their place")
            sigma = spec.eps / 2 if str(spec.norm) == "linf" else spec.eps / 2 / math.sqrt(self.x[0].numel())
            nes = NES(self.model, sigma, s.nes_samples, self.seed + 31337, self.x.device)
            runs += [(f"NES-APGD-DLR{tag}" if self.model_classes() >= 3 else f"NES-APGD-CE{tag}", nes,
                      "apgd-dlr" if self.model_classes() >= 3 else "apgd-ce", {"restarts": 1})]
        for label, wrapped, kind, extra in runs:
            try:
                found[label] = self._attack_through(label, wrapped, kind, spec, extra)
            except Exception as exc:  # one adaptive attack that cannot run leaves the others
                notes.append(f"{label} could not run ({type(exc).__name__}: {exc})")
                self.errors[label] = f"{type(exc).__name__}: {exc}"
        return found, notes

    def _wrapped_gradients(self, wrapped: nn.Module) -> float | None:
        """The share of correctly classified points (up to 64) whose CE input gradient through ``wrapped`` is all
        zero or not finite; None where it has no gradient at all."""
        idx = self._correct().nonzero().squeeze(1)[:64]
        if not len(idx):
            return None
        x, y = self.x[idx].detach().clone().requires_grad_(True), self.y[idx]
        try:
            with frozen(self.model):
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

    def _attack_through(self, label: str, wrapped: nn.Module, kind: str, spec: AttackSpec, extra: dict) -> str:
        """APGD (the official code) on ``wrapped`` (BPDA or NES), its adversarial examples judged on the model."""
        settings = {"steps": self.settings.adaptive_steps, "restarts": 1, "rho": 0.75, **extra}
        clean = self._correct()
        robust, counts = [], {}
        with frozen(self.model):
            for b, start in enumerate(range(0, len(self.x), self.batch_size)):
                xb, yb = self.x[start:start + self.batch_size], self.y[start:start + self.batch_size]
                cb = clean[start:start + self.batch_size]
                out = cb.clone()
                if cb.any():
                    adv = run_component(kind, wrapped, xb[cb], yb[cb], eps=float(spec.eps), norm=str(spec.norm),
                                        seed=batch_seed(self.seed, b), **settings)
                    out[cb], found = judge(self.model, xb[cb], adv, yb[cb], spec.eps, spec.norm)
                    counts = add_counts(counts, found)
                robust.append(out)
        return self.keep(label, bits(torch.cat(robust)), spec.replace(type="bpda"), counts)

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
        self.randomized = out_varies
        plain = self._majority_robust(self.attack, eot=False, draws=s.eot_draws)
        eot = self._majority_robust(self.attack, eot=True, draws=needed)
        if self.l2 is not None:  # the L2 budget's figure, judged by the majority too
            self._majority_robust(self.l2, eot=True, draws=needed)
        verdict, stats = compare(plain, eot, s.tolerance, s.significance)
        halves = {"spread": "fail" if spread > s.tolerance else "pass", "eot": verdict}
        verdict = worst([*halves.values(), "warn"])
        return check("randomness", title, rule, source, verdict,
                     f"outputs {'vary' if out_varies else 'do not vary'}, gradients "
                     f"{'vary' if grad_varies else 'do not'} between passes; predictions change on {_pct(spread)} of "
                     f"the examples; PGD {_pct(accuracy(plain))}, EOT-PGD over {needed} draws {_pct(accuracy(eot))} "
                     f"(majority of {s.eot_draws} draws)" + ("; the best known robust accuracy is taken over the "
                                                             "majority-vote measurements only" if out_varies else ""),
                     f"a randomized model: report EOT-PGD over {needed} draws (or more) and the majority vote of the "
                     "draws, not one draw's evaluation", varies=True, spread=spread, pgd=accuracy(plain),
                     eot_pgd=accuracy(eot), eot_draws=needed, halves=halves, reseeded=reseeded, **stats)

    def _majority_robust(self, spec: AttackSpec, eot: bool, draws: int) -> str:
        """Per example, correct in most of ``eot_draws`` passes both clean and under PGD at ``spec``'s budget, whose
        gradient each step is one pass's (``eot`` false) or the mean over ``draws`` passes (Expectation over
        Transformation, Athalye et al. 2018); kept as a measurement judged by the majority vote."""
        a, votes_n = spec, self.settings.eot_draws
        steps = _steps_of(spec)
        step = spec.step_size if spec.step_size is not None else \
            ATTACK_DECLARATIONS[spec.type].step_for(float(spec.eps), steps)
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
                    for _ in range(steps):
                        delta.requires_grad_(True)
                        loss = sum(F.cross_entropy(self.model(x + delta).float(), y, reduction="sum")
                                   for _ in range(draws if eot else 1))
                        (grad,) = torch.autograd.grad(loss, delta)
                        with torch.no_grad():
                            delta = project(delta + step * steepest_step(torch.nan_to_num(grad), a.norm), a.eps,
                                            a.norm)
                            delta = (x + delta).clamp(0, 1) - x
                with torch.no_grad():
                    def votes(z):
                        return sum((torch.isfinite(o := self.model(z)).all(1) & (o.argmax(1) == y)).int()
                                   for _ in range(votes_n))
                    out.append((votes(x) * 2 > votes_n) & (votes(x + delta) * 2 > votes_n))
        tag = self._tag(spec)
        label = (f"EOT-PGD-{steps} ({draws} draws){tag}, majority of {votes_n}" if eot else
                 f"PGD-{steps} (one draw){tag}, majority of {votes_n}")
        if label not in self.votes:
            self.votes.append(label)
        return self.keep(label, bits(torch.cat(out)), spec.replace(type="eot"))

    def check_autoattack(self) -> dict:
        """AutoAttack's own checks of the defence, and AutoAttack itself (the official code) at the attack's budget
        and the L2 one: part of the audit's suite, so that its best known robust accuracy is never above AutoAttack's;
        its warnings (its checks, and the final check of its adversarial examples: NaN values, the budget, the range)
        kept with the measurement."""
        log = CheckLog()
        xb, yb = self.x[:self.batch_size], self.y[:self.batch_size]
        model_checks(self.model, xb, yb, STANDARD, 9, log)
        warned = list(log.warnings)
        ran, notes = {}, []
        for spec in (self.autoattack, self.autoattack_l2):
            if spec is None:
                continue
            label = "AutoAttack" + ("" if str(spec.norm) == str(self.attack.norm) else f" {str(spec.norm).upper()}")
            try:
                ran[label] = accuracy(self.measure(label, spec))
            except Exception as exc:  # e.g. a graph without gradients: the other attacks stand in
                self.errors[label] = f"{type(exc).__name__}: {exc}"
                notes.append(f"{label} could not run ({type(exc).__name__}: {exc})")
                continue
            warned += [f"{label}: {w}" for w in self.warnings.get(label, []) if w not in log.warnings]
        suite = (", ".join(f"{lb} {_pct(a)}" for lb, a in ran.items()) or "AutoAttack not run") + (
            "" if self.autoattack is not None else " (left out of the suite: autoattack is null)")
        return check("autoattack", "AutoAttack, and its own checks of the defence",
                     "AutoAttack (the official code) runs at the attack's budget and the L2 one as part of the suite; "
                     "its checks (pyautoattack.checks: a randomized defence, outputs that are probabilities, a dynamic "
                     "defence, too few classes for the targeted attacks) and the final check of its adversarial "
                     "examples (NaN values, the budget, the image range) must raise no warning (warn)",
                     "Croce & Hein 2020 (AutoAttack and its checks)", "warn" if warned or notes else "pass",
                     suite + "; " + ("; ".join(warned + notes) or "no warning"),
                     "read AutoAttack's warning: for a randomized defence its rand version (EOT), for probabilities "
                     "the logits, for NaN values the model's gradient", warnings=warned, accuracies=ran, notes=notes)

    def check_finite(self) -> dict:
        """Non-finite logits on any finite input the audit gave the model (test images, attack points, random points
        of the ball), and on a few more: the mid-grey, black and white images and uniform noise."""
        shape = self.x.shape[1:]
        gen = torch.Generator(device=self.x.device).manual_seed(self.seed + 17)
        extra = torch.cat([torch.full((2, *shape), v, device=self.x.device, dtype=self.x.dtype)
                           for v in (0.0, 0.5, 1.0)]
                          + [torch.rand((16, *shape), generator=gen, device=self.x.device, dtype=self.x.dtype)])
        with torch.no_grad():
            self.model(extra)
        bad, seen = self.model.nonfinite_count(), self.model.seen
        per_attack = {lb: c["non_finite_logits"] for lb, c in self.invalid.items() if c.get("non_finite_logits")}
        verdict = "fail" if bad or per_attack else "pass"
        return check("finite", "Finite logits on every input",
                     "the model's logits must be finite on every finite input the audit gives it (the test images, "
                     "every attack's points, random points of the ball, the mid-grey, black and white images, uniform "
                     "noise): non-finite logits name no class (argmax reads a NaN row as class 0) and make every loss "
                     "and gradient there NaN", "Carlini et al. 2019, Sec. 5.5 (verify the evaluation); Croce & Hein "
                     "2020 (AutoAttack's NaN check)", verdict,
                     f"non-finite logits on {bad} of {seen} finite inputs" + (
                         "; on valid adversarial examples of " + ", ".join(f"{lb} ({n})" for lb, n in
                                                                            per_attack.items()) if per_attack else ""),
                     "find where the forward pass overflows or divides by zero (log of 0, 0/0, an exponential); "
                     "the examples there count as misclassified, and attacks stall on their NaN losses",
                     nonfinite=bad, inputs=seen, per_attack=per_attack)

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
        """The best known robust accuracy at the attack's budget (and the L2 one's), per budget: the per-example worst
        case over every attack measured there (``attacks``, ``clean`` first where the clean pass is one of them: the
        flags file re-derives it), always an upper bound on the model's robust accuracy; ``trustworthy`` false where
        the masking group fails (then it is only that: an upper bound, not a figure to quote); ``accuracy`` None and
        ``measured`` false where nothing ran at the budget (never the clean accuracy)."""
        trusted = self.masking() != "fail"
        found = {}
        for spec in [self.attack] + ([self.l2] if self.l2 else []):
            key = f"{spec.norm} {spec.eps:.4g}"
            if not self.measured_at(spec):
                found[key] = {"norm": str(spec.norm), "eps": spec.eps, "accuracy": None, "measured": False,
                              "trustworthy": False, "bound": "not measured", "attacks": []}
                continue
            best, labels = self.best_known(spec)
            found[key] = {"norm": str(spec.norm), "eps": spec.eps, "accuracy": accuracy(best), "measured": True,
                          "trustworthy": trusted, "bound": "best known" if trusted else "upper bound",
                          "attacks": labels}
        return found

    def curves(self) -> dict:
        """Accuracies by attack, for the page's table of measurements."""
        return {label: accuracy(f) for label, f in self.flags.items()}
