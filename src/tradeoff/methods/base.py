"""The method interface and registry.

A method is one class, in one module of this package (or of an installed plug-in: docs/extending.md), decorated
``@register``: what the configuration reads of it (its ``name``, its ``parameters``, their joint checks
``check_params``, the form training uses them in ``canonical``, and its cost ``passes``), read without PyTorch, and
the code that trains (``train_step`` or, for a :class:`SingleLearner`, ``loss``), which imports PyTorch when it first
runs (``torch = LazyModule("torch")``). The configuration checks a run against the very class that trains it.

A method owns its learner(s) and optimizer(s): given a batch it updates them. The trainer never branches on a
method's name; it calls ``set_epoch``, ``train_step``, ``end_epoch`` and checkpoints ``state_dict``. What is
evaluated and checkpointed as the run's model is ``eval_model()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from tradeoff import attacks
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import Params
from tradeoff.core.passes import Passes, UnknownCost
from tradeoff.core.plugins import discover
from tradeoff.core.registry import Registry
from tradeoff.core.spec import RunSpec
from tradeoff.methods.optim import build_optimizer, piecewise_linear, set_lr

if TYPE_CHECKING:
    from torch import nn

    from tradeoff.core.runtime import Runtime

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


class Method:
    """Base class of the methods. Subclasses set ``name`` and ``parameters``, declare ``passes``, and implement the
    training step."""

    name: ClassVar[str]
    #: every parameter the method takes, declared once (tradeoff.core.params): its default, its kind, range and choices,
    #: whether it is optional (off by default), epoch-valued, a learning rate, an attack, an observer
    parameters: ClassVar[Params] = Params()

    # ------------------------------------------------------------------ what the configuration reads (no PyTorch)

    @classmethod
    def check_params(cls, spec: dict) -> None:
        """What the declaration of each parameter cannot say (several parameters together, the run's length, the
        resolved training attack): raise ValueError naming the parameter and what is allowed. Called when the config
        is resolved, before any job starts, and when the method is built.

        ``spec`` is the run's settings in their JSON form (a dict: ``spec["method"]`` the method's name and
        parameters, ``spec["epochs"]``), as the resolver holds them while it builds them (tradeoff.config.resolve);
        a built method passes its RunSpec's ``as_dict()``."""

    @classmethod
    def canonical(cls, method: dict) -> dict:
        """The resolved parameters as the method uses them: a value it rounds, rounded (Generalist's communication
        period in whole epochs). Runs that compute the same thing then have the same settings, share one training
        job, and a table says they are one model, instead of showing copies as a sweep. Called by the resolver only,
        with the method's settings as the dict it builds (``name`` and every parameter)."""
        return method

    @classmethod
    def passes(cls, p: Any, classes: int) -> Passes:
        """What one training step costs per example, its training attack included (tradeoff.core.passes), from the
        method's settings ``p`` (``parameters.settings``: every parameter at its value, an attack an AttackSpec) and
        the number of classes: what `tradeoff plan` and the cluster jobs' times are priced by. Every method declares
        it; tests/test_costs.py checks it against PyTorch's FLOP counter on a real step."""
        raise UnknownCost(f"method {cls.name!r} declares no passes ({cls.__module__}.{cls.__qualname__}.passes)")

    # ------------------------------------------------------------------ the code that trains

    def __init__(self, spec: RunSpec, build_model: Callable[[], nn.Module], runtime: Runtime):
        self.spec = spec
        self.runtime = runtime
        #: the method's parameters, checked, as fields of a frozen object (a missing one takes its default)
        self.p = self.parameters.settings(spec.method.params, f"{self.name}")
        type(self).check_params(spec.as_dict())
        #: the fraction of its budget (eps and step size) that every training attack uses now; < 1 only
        #: during a run's ``eps_warmup`` (see set_budget_scale)
        self.budget_scale = 1.0

    def set_budget_scale(self, scale: float) -> None:
        """Use ``scale`` times the budget and step size of every training attack (the budget warm-up of a run
        with ``eps_warmup``): this method's, its attack objects' and its sub-methods' (Generalist's learners).
        Methods with their own maximisers read ``self.budget_scale`` (see ``common.attack_budget``)."""
        self.budget_scale = float(scale)
        for value in vars(self).values():
            if isinstance(value, Method) and value is not self:
                value.set_budget_scale(scale)
            elif isinstance(value, attacks.Attack):
                full = value.__dict__.setdefault("_full_budget", (value.eps, getattr(value, "step_size", None)))
                value.eps = full[0] * scale
                if full[1] is not None:
                    value.step_size = full[1] * scale

    def set_epoch(self, epoch: float) -> None:
        """Called before every epoch (lr_update: epoch) with its 1-based number t, or before every step (lr_update:
        step) with the time in epochs at that step's end (in (t - 1, t] during epoch t): schedules are read there, so
        epoch t trains at their value at t (as the Generalist code interpolates them) and the last epoch at the last
        breakpoint's value."""

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        """Update the learner(s) on one batch. Returns at least ``loss`` (scalar) and ``correct`` (count of
        correct predictions in the batch); any other keys (scalars) are averaged over the epoch's steps and
        written to the run's curves as ``train_<key>`` (e.g. CA-AT's gradient conflict)."""
        raise NotImplementedError

    def end_epoch(self, epoch: int) -> None:
        """Called after the last step of each (0-based) epoch."""

    def eval_model(self) -> nn.Module:
        raise NotImplementedError

    def learners(self) -> dict[str, nn.Module]:
        """Models besides ``eval_model`` to save with the run's output (e.g. Generalist's base learners)."""
        return {}

    def tracking(self) -> dict | None:
        """What the trainer measures of ``learners()`` after each epoch's last step, before ``end_epoch``, into
        the run's curves (see :func:`tradeoff.training.learner_probes.measure`): ``{"examples": n, "attack": resolved
        evaluation-attack spec, "attacked": [learner names]}``; None (the default) for nothing."""
        return None

    def mechanism(self) -> dict | None:
        """When the method's own mechanism is first in the model the trainer selects: ``{"epoch": e, "what": ...}``,
        the first (1-based) epoch whose end model it has shaped, or None when it acts from the first step. A report
        flags a model selected before it (it is then another method's model)."""
        return None

    def snapshots(self) -> dict[int, dict[str, dict[str, torch.Tensor]]]:
        """Copies of ``learners()``' states kept during training, ``{epoch: {learner: state_dict}}`` (CPU), that
        the trainer saves with the run's output as ``learner_snapshots``."""
        return {}

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError


#: name -> every method: every module of this package, and the installed plug-ins' (the entry points of the group
#: ``tradeoff.methods``), imported when it is first read; none imports PyTorch when imported
METHODS = Registry("method", discover=lambda: discover("tradeoff.methods", group="tradeoff.methods"))
register = METHODS.register  # @register on a Method subclass with its `name`


def method_names() -> list[str]:
    return sorted(METHODS)


class SingleLearner(Method):
    """One model, one optimizer, the run's learning-rate schedule. Subclasses define ``loss``."""

    def __init__(self, spec: RunSpec, build_model: Callable[[], nn.Module], runtime: Runtime):
        super().__init__(spec, build_model, runtime)
        self.model = runtime.place_model(build_model())
        # only what trains (an adapter model's backbone is frozen): whatever gradient a method leaves on a frozen
        # tensor (a zero one with weight decay would shrink it), the optimizer cannot move it nor keep state for it
        self.optimizer = build_optimizer([p for p in self.model.parameters() if p.requires_grad], spec.optimizer,
                                         self.lr_at(0.0))

    def lr_at(self, epoch: float) -> float:
        return piecewise_linear(epoch, self.spec.lr.epochs, self.spec.lr.values)

    def set_epoch(self, epoch: float) -> None:
        set_lr(self.optimizer, self.lr_at(epoch))

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The training loss of a batch and the logits its accuracy is reported on."""
        raise NotImplementedError

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        self.model.train()
        loss, logits = self.loss(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.detach(), "correct": (logits.detach().argmax(1) == y).sum()}

    def eval_model(self) -> nn.Module:
        return self.model

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])


def cross_entropy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, runtime: Runtime):
    with runtime.autocast():
        logits = model(x)
    return F.cross_entropy(logits.float(), y), logits
