"""The attack interface and registry.

Every attack is a class with ``perturb(x, y) -> x_adv``, built by :func:`build`. Threat model: x and x_adv
are images in [0, 1]; x_adv stays in the eps-ball of ``norm`` around x and in [0, 1]. Attacks never change
the model's weights and never leave weight gradients behind: the model's parameters are frozen for the
duration of ``perturb`` and only input gradients are computed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from tradeoff.attacks.declared.base import DECLARED, STARTS, AttackDeclaration
from tradeoff.core.errors import ConfigError
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.plugins import discover
from tradeoff.core.registry import Registry
from tradeoff.core.spec import AttackSpec

if TYPE_CHECKING:
    from torch import nn

# imported when an attack first runs: an attack's class, and the declaration it subclasses, are read without PyTorch
# (a plug-in's one module, docs/extending.md)
torch = LazyModule("torch")


class AttackError(ValueError):
    pass


@contextlib.contextmanager
def frozen(model: nn.Module) -> Iterator[nn.Module]:
    """Turn off weight gradients while attacking, so backward computes input gradients only."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


class Attack(AttackDeclaration):
    """Base class of the attacks. An attack type is a subclass of its declaration first (name, norms, parameters, fixed
    settings: tradeoff.attacks.declared) and of this class, and implements ``_perturb``; it adds no declaration of its
    own (tests/test_declarations.py)."""

    #: untargeted attacks skip examples that are misclassified clean (they count as not robust)
    skips_misclassified: ClassVar[bool] = True

    def __init__(self, model: nn.Module, *, eps: float, norm: str = "linf", **params: Any):
        if norm not in self.norms:
            raise AttackError(f"attack {self.name!r} does not support norm {norm!r}; allowed: {list(self.norms)}")
        if not (eps >= 0):
            raise AttackError(f"attack {self.name!r}: eps must be >= 0, got {eps}")
        try:
            self.parameters.check(params, self.name, what=f"parameter of attack {self.name!r}")
        except ConfigError as exc:
            raise AttackError(str(exc)) from None
        self.model = model
        self.eps = float(eps)
        self.norm = norm
        self.params = {**self.defaults, **params}
        for key, value in self.params.items():
            setattr(self, key, value)

    def generator(self, device: torch.device) -> torch.Generator | None:
        """A generator seeded from the ``seed`` parameter, or None to use the global RNG (training)."""
        seed = self.params.get("seed")
        if seed is None:
            return None
        gen = torch.Generator(device=device)
        gen.manual_seed(int(seed))
        return gen

    def perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.eps == 0 or x.numel() == 0:
            return x.detach().clone()
        with frozen(self.model):
            x_adv = self._perturb(x.detach(), y)
        return x_adv.detach()

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def robust(self, x: torch.Tensor, y: torch.Tensor, progress: Any = None) -> torch.Tensor:
        """Per example: does the model still classify x correctly under this attack? The default judges the output
        of ``perturb`` (:func:`judge`: an invalid adversarial example breaks nothing, non-finite logits are never a
        correct classification) and keeps what it found invalid for ``invalid()``; attacks that track success
        themselves (AutoAttack) override it, judge each of their stages alike, and may keep partial results of the
        batch in ``progress`` (``load() -> dict | None``, ``save(dict)``) to resume."""
        x_adv = self.perturb(x, y)
        correct, self.found_invalid = judge(self.model, x, x_adv, y, self.eps, self.norm)
        return correct

    # What an evaluation (tradeoff.attacks.loop.run_attack) asks of an attack besides ``robust``; the defaults: an attack
    # without sanity checks of its own and without stages.

    #: whether the attack runs sanity checks of its own, whose warnings the evaluation records (``warnings``)
    sanity_checked: ClassVar[bool] = False

    def prepare(self, x: torch.Tensor, y: torch.Tensor, *, first: bool, show_progress: bool) -> None:
        """Before ``robust`` on one batch (x, y) of an evaluation: ``first`` when it is the evaluation's global first
        batch, ``show_progress`` whether to show the progress of the attack's stages. Default: nothing."""

    def warnings(self) -> list[str]:
        """The warnings of the attack's sanity checks since ``prepare``. Default: none."""
        return []

    #: set by ``robust``: the counts of :data:`INVALID` in the batch it judged
    found_invalid: dict[str, int] | None = None

    def invalid(self) -> dict[str, int]:
        """After ``robust``: how many of the batch's adversarial examples were invalid, and why, and on how many
        valid ones the model's logits were not finite (:data:`INVALID`; every key, zeros included)."""
        return {**dict.fromkeys(INVALID, 0), **(self.found_invalid or {})}

    def trace(self) -> dict[str, int]:
        """After ``robust``: the examples still robust after each stage of the attack (an ensemble's components), in
        order. Default: none."""
        return {}

    @classmethod
    def whole_warnings(cls, clean: int, trace: dict[str, int], n: int) -> list[str]:
        """The warnings of the checks of a whole evaluation (every batch, not a shard): ``clean`` of ``n`` examples
        classified correctly, ``trace`` summed over the batches. Default: none."""
        return []


# ------------------------------------------------------------------------------------ judging an adversarial example

#: What the judge of an attack's output counts, per batch (an evaluation sums them into its metrics file): adversarial
#: examples that break the threat model (non-finite values, outside the eps-ball of the norm, outside [0, 1]), which
#: count as NOT broken (the clean prediction stands), and valid ones on which the model's logits are not finite (a
#: finding of its own: no class is predicted there, so the example is not classified correctly). An example invalid
#: for several reasons counts under each; ``invalid_examples`` counts it once.
INVALID = ("invalid_examples", "non_finite", "outside_budget", "outside_range", "non_finite_logits")

#: float rounding allowed beyond the budget (relative, then absolute) and beyond [0, 1]: a projection's last ulp
BUDGET_TOLERANCE = (1e-5, 1e-6)
RANGE_TOLERANCE = 1e-6


def invalid_examples(x: torch.Tensor, x_adv: torch.Tensor, eps: float, norm: str) -> dict[str, torch.Tensor]:
    """Per example (on the device, no sync), why an adversarial example breaks the threat model: ``non_finite``
    (a NaN or an infinity anywhere), ``outside_budget`` (||x_adv - x|| above eps in ``norm``, beyond float rounding)
    and ``outside_range`` (a value outside [0, 1]); the last two only of finite examples."""
    flat, delta = x_adv.flatten(1), (x_adv - x).flatten(1)
    finite = torch.isfinite(flat).all(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(p=2, dim=1)
    rel, tol = BUDGET_TOLERANCE
    outside = (size > eps * (1 + rel) + tol) & finite
    off_range = ((flat.amin(1) < -RANGE_TOLERANCE) | (flat.amax(1) > 1 + RANGE_TOLERANCE)) & finite
    return {"non_finite": ~finite, "outside_budget": outside, "outside_range": off_range}


def classified(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(per example: classified as y, the logits are finite). Non-finite logits name no class (argmax would read a
    NaN row as class 0): such an example is never classified correctly."""
    finite = torch.isfinite(logits).all(1)
    return finite & (logits.argmax(1) == y), finite


def still_right(model: nn.Module, x: torch.Tensor, x_adv: torch.Tensor, y: torch.Tensor, eps: float,
                norm: str) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """(per example: is the model still right under the attack, :func:`invalid_examples`' flags, the logits'
    finiteness), on the device without a sync: an invalid adversarial example does not count as broken (the model is
    judged on x itself there, in the same forward pass: its clean prediction stands); a valid one on which the
    model's logits are not finite counts as broken (no class is predicted there)."""
    why = invalid_examples(x, x_adv, eps, norm)
    bad = why["non_finite"] | why["outside_budget"] | why["outside_range"]
    with torch.no_grad():
        correct, finite = classified(model(torch.where(_rows(bad, x), x, x_adv)), y)
    return correct, why, finite


def judge(model: nn.Module, x: torch.Tensor, x_adv: torch.Tensor, y: torch.Tensor, eps: float,
          norm: str) -> tuple[torch.Tensor, dict[str, int]]:
    """(per example: is the model still right under the attack (:func:`still_right`), the counts of
    :data:`INVALID`); one host-device sync, for the counts."""
    correct, why, finite = still_right(model, x, x_adv, y, eps, norm)
    return correct, count_invalid(why, finite)


def count_invalid(why: dict[str, torch.Tensor], finite: torch.Tensor) -> dict[str, int]:
    """The counts of :data:`INVALID` of one judged batch (:func:`still_right`'s flags); one host-device sync."""
    bad = why["non_finite"] | why["outside_budget"] | why["outside_range"]
    found = torch.stack([bad, *why.values(), ~finite & ~bad]).sum(1).tolist() if len(finite) else [0] * len(INVALID)
    return dict(zip(INVALID, map(int, found)))


def _rows(flags: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return flags.view(-1, *([1] * (like.dim() - 1)))


def add_counts(total: dict[str, int], more: dict[str, int] | None) -> dict[str, int]:
    """Counts of :data:`INVALID` summed (every key, zeros included)."""
    out = {**dict.fromkeys(INVALID, 0), **total}
    for k, v in (more or {}).items():
        out[k] = out.get(k, 0) + int(v)
    return out


#: name -> every attack's code: every module of this package, and the installed plug-ins' (the entry points of the
#: group ``tradeoff.attacks``), imported when it is first read
ATTACKS = Registry("attack", declarations=DECLARED,
                   discover=lambda: discover("tradeoff.attacks", group="tradeoff.attacks"))
register = ATTACKS.register  # @register on a subclass of the declaration (tradeoff.attacks.declared) of its name


def attack_names() -> list[str]:
    return sorted(ATTACKS)


def from_spec(spec: AttackSpec, model: nn.Module, *, seed: int | None = None) -> Attack:
    """The one way to build an attack from its resolved settings (evaluation, a method's training attack, the audit,
    the bench): its type, norm, budget, step size (None: the attack's own default, ``step_for``) and the parameters its
    type declares. ``seed``: the seed of its random draws where its type takes one (an evaluation's batch seed), or
    None to keep the spec's own (a training attack: the global RNG unless the spec sets one)."""
    cls = ATTACKS.get(spec.type)
    if cls is None:
        raise AttackError(f"unknown attack {spec.type!r}; allowed: {attack_names()}")
    if isinstance(spec.step_size, str):
        raise AttackError(f"attack {spec.type!r}: step_size {spec.step_size!r} is not resolved to a number (an "
                          "attack's settings are resolved by tradeoff.config before it is built)")
    params = dict(spec.params)
    if spec.step_size is not None or "step_size" in cls.parameters:
        params["step_size"] = spec.step_size
    if seed is not None and "seed" in cls.parameters:
        params["seed"] = seed
    return cls(model, eps=float(spec.eps), norm=str(spec.norm), **params)


def project(delta: torch.Tensor, eps: float, norm: str) -> torch.Tensor:
    """Euclidean projection of a batch of perturbations onto the eps-ball of ``norm``."""
    if norm == "linf":
        return delta.clamp(-eps, eps)
    flat = delta.flatten(1).norm(p=2, dim=1).clamp_min(1e-12)
    factor = (eps / flat).clamp(max=1.0)
    return delta * factor.view(-1, *([1] * (delta.dim() - 1)))


def steepest_step(grad: torch.Tensor, norm: str) -> torch.Tensor:
    """The unit-norm ascent direction of ``norm`` for a gradient: sign for L-inf, normalised for L2."""
    if norm == "linf":
        return grad.sign()
    flat = grad.flatten(1).norm(p=2, dim=1).clamp_min(1e-12)
    return grad / flat.view(-1, *([1] * (grad.dim() - 1)))


NORMAL_START_STD = 0.001


def random_start(x: torch.Tensor, eps: float, norm: str, gen: torch.Generator | None,
                 kind: str = "uniform") -> torch.Tensor:
    """A random starting perturbation (see STARTS). ``uniform``: L-inf uniform per coordinate, L2 uniform in the
    ball; ``uniform_radius``: L2 only, the radius uniform in [0, eps] (most starts then lie well inside the ball);
    ``normal``: 0.001 N(0, 1) per coordinate."""
    if kind not in STARTS:
        raise AttackError(f"unknown random start {kind!r}; allowed: {list(STARTS)}")
    if kind == "normal":
        return NORMAL_START_STD * torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
    if kind == "uniform_radius" and norm != "l2":
        raise AttackError(f"random start 'uniform_radius' is an L2 start (torchattacks' PGDL2), not for {norm!r}")
    if norm == "linf":
        u = torch.rand(x.shape, generator=gen, device=x.device, dtype=x.dtype)
        return (2 * u - 1) * eps
    direction = torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
    direction = steepest_step(direction, "l2")
    u = torch.rand(x.shape[0], generator=gen, device=x.device, dtype=x.dtype)
    radius = u if kind == "uniform_radius" else u ** (1.0 / x[0].numel())
    return direction * (eps * radius).view(-1, *([1] * (x.dim() - 1)))
