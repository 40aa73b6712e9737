"""The declaration of Generalist (Zipper in its earlier version): :mod:`tradeoff.methods.generalist` says what each
parameter does."""

from __future__ import annotations

import math

from tradeoff.core.params import ATTACK, FLAG, INTEGER, LIST, MAPPING, NUMBER, SCHEDULE, TEXT, Param, Params
from tradeoff.core.ranges import PROBABILITY, Range, at_least, count, positive
from tradeoff.methods.declared.base import ATTACK_MODE, TRAINING_ATTACK, MethodDeclaration, declare


def snapshot_epochs(epochs: list[float] | None) -> list[int]:
    """The whole (1-based) epochs of ``snapshot_epochs`` (rescaled at smaller scales): rounded half up, once each."""
    return sorted({math.floor(float(e) + 0.5) for e in epochs or ()})


@declare
class Generalist(MethodDeclaration):
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
        # spec: the run's settings in their JSON form, a dict (see MethodDeclaration.check_params)
        epochs = spec["method"].get("snapshot_epochs")
        if epochs is not None:  # its kind is checked by its declaration; the run's length here
            bad = [e for e in snapshot_epochs(epochs) if not 1 <= e <= spec["epochs"]]
            if bad:
                raise ValueError(f"generalist: snapshot_epochs {bad} (rounded to whole epochs) are outside the "
                                 f"run's epochs 1..{spec['epochs']}")
