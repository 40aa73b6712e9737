"""Generalist (CVPR 2023; Zipper in its earlier version): two task-aware base learners and a global learner.

Both base learners have the run's architecture and start from the same initial weights (so does the global
learner). Every iteration, on the same batch:

- the NT learner theta_n takes a step of CE on the clean batch with its own optimizer (``nt_optimizer``: SGD
  momentum 0.9, weight decay 5e-4 by default; Adam possible) and learning rate (``nt_lr``, 0.1);
- the AT learner theta_r takes a PGD-AT step (CE on the training attack's examples, any registry attack) with
  the run's optimizer, learning-rate schedule and weight decay;
- the global learner mixes them: theta_g <- a theta_g + (1 - a) (gamma theta_r + (1 - gamma) theta_n), with
  a = ``ema_decay`` (alpha' = 0.999), or theta_g = gamma theta_r + (1 - gamma) theta_n with ``ema: false``
  (Zipper's Table 8). gamma is piecewise-linear through its values at the given epochs.

From epoch t' (``t_prime``) on, every c epochs, both learners restart from theta_g: after iteration t when
t >= t' and t mod c == 0, t' and c counted in iterations (c epochs of iterations, rounded to a whole number, at
least 1). With whole-epoch t' and c this is the epoch boundary after (1-based) epoch t when t >= t' and t mod c == 0
(Algorithm 1, Eq. 7 and the authors' code: 75, 80, ..., 120 in the paper; with c = 2, 76, 78, ...). t', c and
gamma's breakpoints are epoch-valued, so smaller scales rescale them: the demo's c = 5/12 epoch communicates every
8 of its 18 iterations per epoch, so a run keeps its number of communications and their period against the EMA
window (at 10 epochs, rounding c to whole epochs made every c of 1..15 one epoch). The optimizers keep their
momentum. A communication due at an epoch's last iteration happens at the epoch's end, after the learners are
observed (``track_learners``, ``snapshot_epochs``).
Schedules (gamma, the learning rates) are read at the 1-based epoch, as the authors' code interpolates them.

``nt_lr_schedule``: ``scaled`` (default) gives the NT learner the run's schedule rescaled to start at nt_lr
("initial learning rate 0.1" with the same piecewise-linear strategy, Appendix A.1); ``constant`` keeps nt_lr;
``at`` gives it the AT learner's learning rate, as the authors' code does.

Weight averaging per learner (``nt_wa``, ``at_wa``, Fig. 4a): an EMA of the learner with the global decay;
the global learner then mixes the averaged learner(s). ``ema_horizon`` (epochs, rescaled with the run) replaces
the per-iteration decay by 1 - 1 / (ema_horizon * iterations per epoch), so that a smaller scale keeps the
averaging window's share of training. BatchNorm buffers of averaged models are, by default, the same mix of
the current buffers without averaging (the paper averages weights); ``average_buffers: true`` averages them
like the weights (authors' code).

The authors' code, as named options: ``ema_warmup: true`` (decay min(a, (t+1)/(t+10)) at the t-th update),
``nt_wa: true, at_wa: true`` (theta_g is an EMA of the learners' EMAs), ``communication: iteration`` (in a
communication epoch both learners are overwritten by theta_g after every iteration), ``nt_lr_schedule: at``,
``average_buffers: true``, and gamma (1, 1, 1, 0.4) at epochs 0/40/80/120.

``parallel: true`` runs the two learners' steps on two CUDA streams so they overlap (the paper's parallel
version); on the CPU it is the serial computation.

Observing the learners (off unless a run sets them; they never change the trained weights):

- ``track_learners: {examples: N, attack: <attack name>, attacked: [nt], split: validation}`` (Zipper Figure 5):
  after the last step of every epoch, before any communication, the trainer measures on a fixed subset of N
  images of the validation split (held out of training; ``split: test``: of the test split, the paper's practice)
  each learner's clean accuracy and the attacked learners' accuracy under the evaluation attack made against
  themselves and made against the other learner (transfer), into the curves as ``learner_at_clean``,
  ``learner_nt_clean``, ``learner_nt_pgd_self``, ``learner_nt_pgd_from_at`` (see :mod:`tradeoff.training.learner_probes`).
- ``snapshot_epochs: [e, ...]`` (Zipper Figure 6): copies of both learners' weights at the end of these
  (1-based) epochs, before any communication; epoch-valued (rescaled with the run, then rounded to whole
  epochs); kept in the method's state (a resumed run still has them) and saved in model.pt as
  ``learner_snapshots``.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING

from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import ATTACK, FLAG, INTEGER, LIST, MAPPING, NUMBER, SCHEDULE, TEXT, Param, Params
from tradeoff.core.passes import TRAIN1
from tradeoff.core.ranges import PROBABILITY, Range, at_least, count, positive
from tradeoff.core.spec import MethodSpec, Optimizer
from tradeoff.data import SPLIT_SIZES
from tradeoff.methods.base import Method, register
from tradeoff.methods.common import ATTACK_MODE, TRAINING_ATTACK
from tradeoff.methods.natural import Natural
from tradeoff.methods.optim import piecewise_linear, set_lr
from tradeoff.methods.pgd_at import PGDAT

if TYPE_CHECKING:
    from torch import nn

torch = LazyModule("torch")

# Training-set sizes, for the iterations per epoch that ``ema_horizon`` converts into a per-iteration decay.
TRAIN_SIZES = {name: sizes[0] for name, sizes in SPLIT_SIZES.items()}


def communication_period(c: float, steps_per_epoch: int) -> int:
    """c epochs in iterations: a whole number, at least 1."""
    return max(1, math.floor(float(c) * steps_per_epoch + 0.5))


def communication_step(step: int, t_prime: float, c: float, steps_per_epoch: int) -> bool:
    """Whether the learners restart from theta_g after (1-based) iteration ``step`` of the run: t >= t' and
    t mod c == 0 with t' and c in iterations (:func:`communication_period`). With whole-epoch t' and c these are the
    last iterations of :func:`communication_epoch`'s epochs."""
    return (step >= float(t_prime) * steps_per_epoch - 1e-9
            and step % communication_period(c, steps_per_epoch) == 0)


def communication_epoch(epoch: int, t_prime: float, c: float) -> bool:
    """Whether the learners restart from theta_g at the end of (1-based) epoch ``epoch``: Algorithm 1's and Eq. 7's
    B(t, t', c), t >= t' and t mod c == 0 (the authors' code too), with c rounded half up to whole epochs, at least 1
    (t' and c are rescaled at smaller scales). With t' = 75: c = 5 gives 75, 80, ..., 120; c = 2 gives 76, 78, ...;
    c = 9 gives 81, 90, 99, 108, 117."""
    period = max(1, math.floor(c + 0.5))
    return epoch >= t_prime - 1e-9 and epoch % period == 0


def snapshot_epochs(epochs: list[float] | None) -> list[int]:
    """The whole (1-based) epochs of ``snapshot_epochs`` (rescaled at smaller scales): rounded half up, once each."""
    return sorted({math.floor(float(e) + 0.5) for e in epochs or ()})


def _float_state(model: nn.Module) -> list[torch.Tensor]:
    return [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]


@register
class Generalist(Method):
    name = "generalist"
    parameters = Params(
        TRAINING_ATTACK,
        # the AT learner's attack runs with the model in eval mode, as the authors' PGD (model.eval() before the
        # attack); the paper does not say. "train" lets BatchNorm see the attack's batches (Madry's, Rice's code)
        ATTACK_MODE.but(default="eval"),
        Param("gamma", SCHEDULE, {"epochs": [0, 40, 80, 120], "values": [1.0, 1.0, 1.0, 0.0]}, range=PROBABILITY,
              epochs=True, meaning="the AT learner's share of the mix"),
        Param("t_prime", NUMBER, 75, range=at_least(0), epochs=True, meaning="the first communication epoch t'"),
        Param("c", NUMBER, 5, range=at_least(0), epochs=True, meaning="the communication period in epochs"),
        Param("ema", FLAG, True, meaning="theta_g an EMA of the mix (false: the mix itself)"),
        Param("ema_decay", NUMBER, 0.999, range=PROBABILITY, meaning="the per-iteration decay alpha'"),
        Param("ema_horizon", NUMBER, None, range=positive(), nullable=True, epochs=True,
              meaning="the averaging window in epochs, replacing ema_decay"),
        Param("ema_warmup", FLAG, False, meaning="decay min(a, (t+1)/(t+10)) (the authors' code)"),
        Param("nt_wa", FLAG, False, meaning="average the NT learner's weights"),
        Param("at_wa", FLAG, False, meaning="average the AT learner's weights"),
        Param("average_buffers", FLAG, False, meaning="average BatchNorm buffers like the weights"),
        Param("communication", TEXT, "epoch", choices=("epoch", "iteration"),
              meaning="when the learners restart from theta_g in a communication epoch"),
        Param("nt_optimizer", MAPPING, {"name": "sgd", "momentum": 0.9, "weight_decay": 5.0e-4, "nesterov": False},
              fields=(Param("name", TEXT, choices=("sgd", "adam"), required=True),
                      Param("momentum", NUMBER, range=PROBABILITY), Param("weight_decay", NUMBER, range=at_least(0)),
                      Param("nesterov", FLAG), Param("betas", LIST, item=NUMBER, range=Range(0, 1, high_open=True))),
              meaning="the NT learner's optimizer"),
        Param("nt_lr", NUMBER, 0.1, range=at_least(0), lr=True, meaning="the NT learner's learning rate"),
        Param("nt_lr_schedule", TEXT, "scaled", choices=("scaled", "constant", "at"),
              meaning="the NT learner's schedule: the run's rescaled to nt_lr, constant, or the AT learner's"),
        Param("parallel", FLAG, False, meaning="the two learners' steps on two CUDA streams"),
        # observers (tested: bit-identical weights with and without them)
        Param("track_learners", MAPPING, optional=True, observer=True,
              fields=(Param("examples", INTEGER, range=count(1), required=True),
                      Param("attack", ATTACK, required=True),
                      Param("attacked", LIST, item=TEXT, choices=("nt", "at"), nonempty=True, distinct=True),
                      Param("split", TEXT, choices=("validation", "test"))),
              meaning="measure the learners after every epoch (Zipper Figure 5), on the validation split "
                      "(default; the test split where the run holds none out) or `split: test` the test split"),
        Param("snapshot_epochs", LIST, item=NUMBER, nonempty=True, optional=True, observer=True, epochs=True,
              meaning="keep the learners' weights at the end of these epochs (Zipper Figure 6)"),
    )

    @classmethod
    def canonical(cls, method):
        """The snapshot epochs as whole epochs, and with ``communication: iteration`` (whole communication epochs)
        c too, as training uses them. (At resolution: ``method`` the dict the resolver builds.)"""
        out = dict(method)
        if out.get("communication", cls.parameters["communication"].default) == "iteration":
            out["c"] = max(1, math.floor(float(method["c"]) + 0.5))
        if out.get("snapshot_epochs") is not None:
            out["snapshot_epochs"] = snapshot_epochs(out["snapshot_epochs"])
        return out

    @classmethod
    def check_params(cls, spec):
        # spec: the run's settings in their JSON form, a dict (see Method.check_params)
        epochs = spec["method"].get("snapshot_epochs")
        if epochs is not None:  # its kind is checked by its declaration; the run's length here
            bad = [e for e in snapshot_epochs(epochs) if not 1 <= e <= spec["epochs"]]
            if bad:
                raise ValueError(f"generalist: snapshot_epochs {bad} (rounded to whole epochs) are outside the "
                                 f"run's epochs 1..{spec['epochs']}")

    @classmethod
    def passes(cls, p, classes):
        """The NT learner's step, and the AT learner's PGD-AT step (beta 1): its attack, then its adversarial pass."""
        return TRAIN1 + attack_passes(p.attack, classes) + TRAIN1

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        p = self.p
        self.at = PGDAT(spec.replace(method=MethodSpec.from_dict({"name": "pgd_at", "beta": 1.0, "attack": p.attack,
                                                                  "attack_mode": p.attack_mode})),
                        build_model, runtime)
        self.nt = Natural(spec.replace(optimizer=Optimizer.from_dict(p.nt_optimizer), method=MethodSpec(name="nt")),
                          build_model, runtime)
        self.nt.model.load_state_dict(self.at.model.state_dict())
        self.optimizer = self.at.optimizer  # the run's learning rate, as the trainer reports it
        self.global_model = copy.deepcopy(self.at.model).requires_grad_(False)
        self.averages = {name: copy.deepcopy(learner.model).requires_grad_(False)
                         for name, learner in (("nt", self.nt), ("at", self.at)) if getattr(p, f"{name}_wa")}
        # the float tensors each averaging step reads and writes (parameters first), listed once
        self.floats = {id(m): _float_state(m) for m in (self.nt.model, self.at.model, self.global_model,
                                                          *self.averages.values())}
        self.n_params = len(list(self.global_model.parameters()))
        self.steps_per_epoch = self._steps_per_epoch()
        self.decay = float(p.ema_decay)
        if p.ema_horizon is not None:
            # a window shorter than one iteration (tiny scales) means no averaging at all
            self.decay = max(0.0, 1.0 - 1.0 / (float(p.ema_horizon) * self.steps_per_epoch))
        self.updates = 0  # theta_g updates so far (the warm-up's t)
        self.epoch, self.gamma = 0, self._gamma_at(0.0)
        self.snapshot_at = set(snapshot_epochs(p.snapshot_epochs))
        self.kept: dict[int, dict[str, dict[str, torch.Tensor]]] = {}  # epoch -> learner -> state (CPU)
        self.streams = None
        if p.parallel and runtime.device.type == "cuda":
            self.streams = (torch.cuda.Stream(runtime.device), torch.cuda.Stream(runtime.device))

    def _steps_per_epoch(self) -> int:
        dataset = self.spec.dataset
        if dataset not in TRAIN_SIZES:
            raise ValueError(f"generalist: ema_horizon needs the training-set size of {dataset!r}; known: "
                             f"{sorted(TRAIN_SIZES)} (add it to tradeoff.data.SPLIT_SIZES)")
        n = self.spec.trained_images(TRAIN_SIZES[dataset])  # what is left after the validation split
        return math.ceil(n / self.spec.batch_size)

    def _gamma_at(self, epoch: float) -> float:
        return piecewise_linear(epoch, self.p.gamma["epochs"], self.p.gamma["values"])

    def nt_lr_at(self, epoch: float) -> float:
        mode, base = self.p.nt_lr_schedule, float(self.p.nt_lr)
        if mode == "constant":
            return base
        if mode == "at":
            return self.at.lr_at(epoch)
        first = self.at.lr_at(0.0)
        if first == 0:
            raise ValueError("generalist: nt_lr_schedule 'scaled' needs a run schedule that does not start at 0")
        return base * self.at.lr_at(epoch) / first

    def set_epoch(self, epoch):
        # epoch is the 1-based epoch, or within a step-updated epoch t the time at the step's end, in (t - 1, t]
        self.epoch = max(0, math.ceil(epoch - 1e-9) - 1)  # the 0-based index of the epoch under way
        self.gamma = self._gamma_at(epoch)
        self.at.set_epoch(epoch)
        set_lr(self.nt.optimizer, self.nt_lr_at(epoch))

    def _learner_steps(self, x, y):
        if self.streams is None:
            return self.nt.train_step(x, y), self.at.train_step(x, y)
        current = torch.cuda.current_stream(self.runtime.device)
        outs = []
        for learner, stream in zip((self.nt, self.at), self.streams):
            stream.wait_stream(current)
            with torch.cuda.stream(stream):
                outs.append(learner.train_step(x, y))
        for out, stream in zip(outs, self.streams):
            current.wait_stream(stream)
            for value in out.values():
                value.record_stream(current)
        return outs

    def _track(self, target: nn.Module, source: list[torch.Tensor], source_model: nn.Module,
               decay: float | None) -> None:
        """target <- decay target + (1 - decay) source, or target <- source when decay is None; ``source`` is
        aligned with target's float tensors. BatchNorm's float buffers are averaged only with average_buffers
        (otherwise copied); its integer counters are copied from ``source_model``."""
        dst = self.floats[id(target)]
        averaged = 0 if decay is None else len(dst) if self.p.average_buffers else self.n_params
        with torch.no_grad():
            if averaged:
                torch._foreach_lerp_(dst[:averaged], source[:averaged], 1.0 - decay)
            if averaged < len(dst):
                torch._foreach_copy_(dst[averaged:], source[averaged:])
            for b_dst, b_src in zip(target.buffers(), source_model.buffers()):
                if not b_dst.is_floating_point():
                    b_dst.copy_(b_src)

    def communicate(self) -> None:
        state = self.global_model.state_dict()
        for learner in (self.nt, self.at):
            learner.model.load_state_dict(state)

    def train_step(self, x, y):
        out_nt, out_at = self._learner_steps(x, y)
        decay = self.decay
        if self.p.ema_warmup:
            decay = min(decay, (self.updates + 1) / (self.updates + 10))
        for name, average in self.averages.items():
            learner = getattr(self, name).model
            self._track(average, self.floats[id(learner)], learner, decay)
        r = self.averages.get("at", self.at.model)
        n = self.averages.get("nt", self.nt.model)
        with torch.no_grad():
            mix = torch._foreach_lerp(self.floats[id(n)], self.floats[id(r)], self.gamma)  # gamma r + (1-gamma) n
        self._track(self.global_model, mix, r, decay if self.p.ema else None)
        self.updates += 1
        if self.p.communication == "iteration":
            if self._communicates(self.epoch + 1):
                self.communicate()
        elif self.updates % self.steps_per_epoch and self._due(self.updates):
            self.communicate()  # within an epoch (a communication at its last iteration waits for end_epoch)
        return {"loss": out_at["loss"] + 0.0 * out_nt["loss"],  # a non-finite NT loss stops the run too
                "correct": out_at["correct"], "nt_loss": out_nt["loss"],
                "nt_acc": out_nt["correct"].float() / len(y), "gamma": torch.tensor(self.gamma)}

    def _due(self, step: int) -> bool:
        return communication_step(step, float(self.p.t_prime), float(self.p.c), self.steps_per_epoch)

    def _communicates(self, epoch: int) -> bool:
        return communication_epoch(epoch, float(self.p.t_prime), float(self.p.c))

    def end_epoch(self, epoch):
        if epoch + 1 in self.snapshot_at:  # the learners as trained, before they restart from theta_g
            self.kept[epoch + 1] = {name: {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
                                    for name, m in self.learners().items()}
        if self.p.communication == "epoch" and self._due(self.updates):
            self.communicate()

    def eval_model(self):
        return self.global_model

    def mechanism(self):
        """The first epoch at whose end theta_g mixes in the NT learner (gamma < 1, read at the epoch's end) and the
        learners have communicated: before it, theta_g is the AT learner's average, not a Generalist."""
        epochs, ipe, p = int(self.spec.epochs), self.steps_per_epoch, self.p
        mixing = next((e for e in range(1, epochs + 1) if self._gamma_at(float(e)) < 1.0), None)
        if p.communication == "iteration":
            talking = next((e for e in range(1, epochs + 1) if self._communicates(e)), None)
        else:
            period = communication_period(p.c, ipe)
            first = period * math.ceil(max(1.0, float(p.t_prime) * ipe - 1e-9) / period)
            talking = math.ceil(first / ipe) if first <= epochs * ipe else None
        if mixing is None or talking is None:
            return {"epoch": None, "what": "never within the run: gamma stays 1 or the learners never communicate"}
        return {"epoch": max(mixing, talking),
                "what": f"γ < 1 from epoch {mixing}, first communication in epoch {talking}"}

    def learners(self):
        return {"nt": self.nt.model, "at": self.at.model}

    def tracking(self):
        track = self.p.track_learners
        if track is None:
            return None
        return {"examples": int(track["examples"]), "attack": track["attack"],
                "attacked": list(track.get("attacked", ["nt"])), "split": track.get("split", "validation")}

    def snapshots(self):
        return dict(sorted(self.kept.items()))

    def state_dict(self):
        return {"nt": self.nt.state_dict(), "at": self.at.state_dict(), "global": self.global_model.state_dict(),
                "averages": {name: m.state_dict() for name, m in self.averages.items()}, "updates": self.updates,
                "snapshots": self.snapshots()}

    def load_state_dict(self, state):
        self.nt.load_state_dict(state["nt"])
        self.at.load_state_dict(state["at"])
        self.global_model.load_state_dict(state["global"])
        for name, m in self.averages.items():
            m.load_state_dict(state["averages"][name])
        self.updates = int(state["updates"])
        self.kept = {int(e): {name: dict(s) for name, s in learners.items()}
                     for e, learners in state.get("snapshots", {}).items()}
