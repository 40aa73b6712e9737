"""The auditor: a model, a batch of test examples and the audit's attacks, the measurements its checks make (every
one kept per example, with its accuracy, for the page) and the runner of the registered checks
(:mod:`tradeoff.audit.registry`; the checks themselves: :mod:`.masking`, :mod:`.convergence`, :mod:`.protocol`).

Every attack here runs through the evaluation's own path (:func:`tradeoff.attacks.loop.run_attack`: fp32,
eval mode, seeded per batch, examples misclassified clean count as not robust), so a number of the audit is the number
the pipeline's tables would show for that attack. Two attacks are compared example by example
(:func:`tradeoff.audit.verdicts.compare`).

The checks fall in three groups, each with its own verdict (:data:`~tradeoff.audit.registry.GROUPS`): ``masking``
(can the gradients be trusted at all), ``convergence`` (is each reported column's attack strong enough: the column
against the best known per-example worst case, and the audit's own attack against stronger settings of it) and
``protocol`` (the authors' attack against the strong one). Verdicts: ``pass``, ``warn``, ``fail``, and ``skip`` (shown
as n/a) where a check does not apply (no surrogate, no protocol) or its premise is gone (gradients unusable: the checks
that vary a gradient attack). Every non-pass carries a next step (``next``), one line.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff.attacks import frozen
from tradeoff.attacks.base import add_counts
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.attacks.loop import run_attack
from tradeoff.audit.registry import CHECKS, ORDER
from tradeoff.audit.verdicts import accuracy, both, finding, group_of, pct, worst
from tradeoff.core.spec import AttackSpec, AuditSpec
from tradeoff.storage.layout import bits

#: attack types that use no gradient of the model, or not the model's own (the white-box worst case leaves them out):
#: ``random`` (sampling in the ball), ``rays`` (decisions only), ``bpda`` (an adaptive gradient: BPDA, NES), ``eot``
#: (a randomized model's majority vote)
NOT_WHITE_BOX = ("clean", "square", "autoattack", "bpda", "random", "rays", "eot")


def apgd(spec: AttackSpec, steps: int) -> AttackSpec:
    """APGD-CE (the official pyautoattack code: a step size that halves when the loss stalls, so it does not cycle)
    at ``spec``'s budget."""
    return AttackSpec.from_dict({"type": "apgd-ce", "norm": spec.norm, "eps": spec.eps, "steps": int(steps),
                                 "restarts": 1})


def steps_of(spec: AttackSpec) -> int:
    """The gradient steps of a (PGD-family) attack: its ``steps``, or its type's default."""
    return int(ATTACK_DECLARATIONS[spec.type].settings(spec).steps)


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
                 black_box: AttackSpec | None, settings: AuditSpec | None = None, seed: int = 0, batch_size: int = 500,
                 surrogate: nn.Module | None = None, no_surrogate: str | None = None,
                 protocol: list[tuple[str, AttackSpec, str, AttackSpec]] | None = None,
                 reported: dict[str, dict] | None = None, l2: AttackSpec | None = None,
                 autoattack: AttackSpec | dict | str | None = "standard", autoattack_l2: AttackSpec | None = None,
                 log: Callable[[str], None] | None = None):
        #: the model as given (its ``preprocess`` and ``classifier``, where it names them), and as the audit calls it
        self.original = model.eval()
        self.model, self.x, self.y = Guarded(self.original).eval(), x, y
        typed = lambda spec: None if spec is None else AttackSpec.from_dict(spec)  # noqa: E731  (its JSON form too)
        self.attack, self.black_box, self.settings = typed(attack), typed(black_box), settings or AuditSpec()
        self.l2 = typed(l2)
        attack = self.attack
        #: the audit's attack's steps and step size (its type's default where it sets none: PGD's eps / 4)
        self.steps = steps_of(attack)
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
        self.verdicts: dict[str, str] = {}
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
            self.log(f"{label}: {pct(accuracy(self.flags[label]))} ({out.seconds:.1f} s)")
        return self.flags[label]

    def keep(self, label: str, flags: str, spec: AttackSpec, invalid: dict[str, int] | None = None) -> str:
        """A measurement of the audit's own loops (not run_attack's), kept as ``measure`` keeps one."""
        self.flags[label], self.specs[label] = flags, spec
        if invalid is not None:
            self.invalid[label] = add_counts({}, invalid)
        self.log(f"{label}: {pct(accuracy(flags))}")
        return flags

    def clean(self) -> str:
        return self.measure("clean", AttackSpec.from_dict({"type": "clean", "eps": 0.0, "norm": self.attack.norm}))

    def at(self, spec: AttackSpec, white_box_only: bool) -> list[str]:
        return [label for label, s in self.specs.items() if label != "clean" and s.norm == spec.norm
                and s.eps == spec.eps and not (white_box_only and (s.type in NOT_WHITE_BOX
                                                                    or label.startswith("transfer")))]

    def all_robust(self, labels: list[str]) -> str:
        """Per example, robust under every measurement named (the clean one among them where it is named)."""
        n = len(self.y)
        out = "1" * n
        for label in labels:
            out = both(out, self.flags[label][:n])
        return out

    def white_box(self, spec: AttackSpec | None = None) -> str:
        """Per example, correct clean and robust under every white-box attack measured at the budget: the worst case
        of the gradient attacks (the audit's and the reported columns' of a white-box type)."""
        return self.all_robust(["clean", *self.at(spec or self.attack, white_box_only=True)])

    def best_known(self, spec: AttackSpec | None = None) -> tuple[str, list[str]]:
        """Per example, robust under every attack measured at the budget (white box, black box, transfer, sampling,
        decisions, adaptive attacks, the reported columns): the best known robust accuracy's flags, and the
        measurements it is the worst case of, ``clean`` first. For a model whose predictions vary between passes, only
        the measurements judged by the majority of its draws (EOT's): one draw's outcome is not the model's."""
        labels = self.at(spec or self.attack, white_box_only=False)
        if self.randomized:
            labels = [lb for lb in labels if lb in self.votes]
            return self.all_robust(labels), labels
        return self.all_robust(["clean", *labels]), ["clean", *labels]

    def measured_at(self, spec: AttackSpec) -> bool:
        """Whether any attack was measured at the budget (else its robust accuracy is not measured: never the clean
        accuracy)."""
        labels = self.at(spec, white_box_only=False)
        return bool([lb for lb in labels if lb in self.votes] if self.randomized else labels)

    def _steps(self, m: int) -> str:
        return f"PGD-{self.steps * m}"

    def base(self) -> str:
        """The audit's attack as configured (PGD-k)."""
        return self.measure(self._steps(1), self.attack)

    def tag(self, spec: AttackSpec) -> str:
        return "" if spec is self.attack else f" {str(spec.norm).upper()}"

    def base_of(self, spec: AttackSpec) -> str:
        """The audit's attack (PGD-k) at a budget: the configured one, or the same at the L2 budget."""
        if spec is self.attack:
            return self.base()
        return self.measure(f"PGD-{steps_of(spec)}{self.tag(spec)}", spec)

    def model_classes(self) -> int:
        with torch.no_grad():
            return int(self.model(self.x[:2]).shape[1])

    def gradients(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The cross-entropy's input gradient per example (flattened), in batches, weights frozen."""
        out = []
        with frozen(self.model), torch.autocast(device_type=x.device.type, enabled=False):
            for start in range(0, len(x), self.batch_size):
                xb = x[start:start + self.batch_size].detach().clone().requires_grad_(True)
                loss = F.cross_entropy(self.model(xb).float(), y[start:start + self.batch_size], reduction="sum")
                (grad,) = torch.autograd.grad(loss, xb, allow_unused=True)
                out.append((torch.zeros_like(xb) if grad is None else grad).flatten(1))
        return torch.cat(out) if out else torch.zeros(0, self.x[0].numel(), device=x.device)

    def correct(self) -> torch.Tensor:
        return torch.tensor([c == "1" for c in self.clean()], device=self.x.device)

    def staged(self) -> nn.Module | None:
        m = self.original
        return m if callable(getattr(m, "preprocess", None)) and callable(getattr(m, "classifier", None)) else None

    # ---------------------------------------------------------------------------------------------- checks

    def run(self) -> list[dict]:
        """Every registered check, in order (:data:`~tradeoff.audit.registry.ORDER`), then the check of each reported
        column (``columns``); a check of the order that raises is a verdict (fail, with the error), never a
        traceback."""
        self.clean()
        found = [self.run_check(name) for name in ORDER]
        found += CHECKS["columns"].run(self)
        return found

    def run_check(self, name: str) -> dict:
        """One registered check by its name (``steps-l2``): n/a where it needs the gradients and they are unusable;
        an error is a verdict (fail; n/a where the graph is broken); a pass of a check that only finds something is
        n/a where the gradients are unusable. Its verdict is noted (:attr:`verdicts`)."""
        spec = CHECKS[name]
        if spec.needs_gradients and not self.usable:
            why = ("the model's graph is broken (no input gradient)" if self.graph_broken else
                   "the input gradients are unusable (the gradients check)")
            return self._note(finding(name, name, "", "", "skip", f"n/a: {why}; the gradient-free checks decide"))
        try:
            found = spec.run(self)
        except Exception as exc:  # a verdict, never a traceback
            self.log(f"{name}: {type(exc).__name__}: {exc}")
            if self.graph_broken:
                return self._note(finding(name, name, "", "", "skip",
                                          f"n/a: the model's graph is broken ({type(exc).__name__})"))
            return self._note(finding(name, name, "the check must run on the model", "", "fail",
                                      f"the check could not run: {type(exc).__name__}: {exc}",
                                      "fix the model or the evaluation so that this check runs (the error is on the "
                                      "page)", error="".join(traceback.format_exception_only(type(exc), exc)).strip()))
        if spec.finds_only and not self.usable and found["verdict"] == "pass":
            found = {**found, "verdict": "skip", "summary": "n/a (the input gradients are unusable): "
                     + found["summary"]}
        return self._note(found)

    def _note(self, found: dict) -> dict:
        self.verdicts[found["name"]] = found["verdict"]
        return found

    def masking(self) -> str:
        """The masking group's verdict over the checks run so far."""
        return worst(v for n, v in self.verdicts.items() if group_of(n) == "masking")

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
