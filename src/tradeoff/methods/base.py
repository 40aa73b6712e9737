"""The method interface and registry.

A method owns its learner(s) and optimizer(s): given a batch it updates them. The trainer never branches on a
method's name; it calls ``set_epoch``, ``train_step``, ``end_epoch`` and checkpoints ``state_dict``. What is
evaluated and checkpointed as the run's model is ``eval_model()``.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tradeoff import attacks
from tradeoff.methods.optim import build_optimizer, piecewise_linear, set_lr
from tradeoff.core.registry import Registry
from tradeoff.methods.declared.base import DECLARED, MethodDeclaration
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec


class Method(MethodDeclaration):
    """Base class of the methods. A method is a subclass of its declaration first (name, parameters, their checks:
    tradeoff.methods.declared) and of this class (or one of its subclasses), and implements the training step; it
    adds no declaration of its own (tests/test_declarations.py)."""

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
        the run's curves (see :func:`tradeoff.evaluation.learner_probes.measure`): ``{"examples": n, "attack": resolved
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


METHODS = Registry("method", declarations=DECLARED)
register = METHODS.register  # @register on a subclass of the declaration (tradeoff.methods.declared) of its name


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
