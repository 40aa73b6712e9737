"""Training: one run = one method x dataset x architecture x hyperparameters x seed.

The whole dataset lives as one tensor on the device; shuffling, random crop and flip happen there too (no
DataLoader workers). After every epoch the full training state is checkpointed atomically; a restarted job
resumes from the newest intact state and, on CPU, ends bit-identical to an uninterrupted run, because every
source of randomness (model init, data order, augmentation, attack starts) comes from generators whose
states are checkpointed.

Faults: one process trains a run at a time (a lock in its state folder; a second one stops at once, naming the
first); states written with other settings (the config changed) are discarded, not resumed; a non-finite loss
stops the run naming run, epoch and step, or with ``nonfinite: skip`` its step is undone and skipped; weights
that are not finite are never checkpointed; a state that cannot be written (disk full, read-only) stops the
run with the previous states intact.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from tradeoff import data, models
from tradeoff.attacks.loop import accuracy_under
from tradeoff.core.errors import UserError
from tradeoff.core.progress import Bar, duration
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import CHOOSING_MODES, CLEAN, AttackSpec, RunSpec, Selection, spec_digest
from tradeoff.methods import METHODS
from tradeoff.models.declared import pretrained_setting
from tradeoff.storage import checkpoint
from tradeoff.storage.curves import CurveLog, clocked
from tradeoff.storage.layout import Layout, RunPaths
from tradeoff.storage.provenance import device_name, write_sidecar
from tradeoff.training import learner_probes as learners

log = logging.getLogger(__name__)

# the columns of every epoch's row (a method adds its own ``train_<key>`` and tracked ones); each has a label in
# tradeoff.report.labels.CURVES (tested)
CURVE_FIELDS = ("epoch", "lr", "train_loss", "train_acc", "eval_clean", "eval_robust", "seconds", "images_per_s")


class NonFiniteLoss(UserError, FloatingPointError):
    pass


# What an epoch state must have been written with besides the run's settings: the version of the trainer's own maths,
# bumped when it changes what a run computes for the same settings (2: schedules read at the 1-based epoch), so that
# states of an older trainer are discarded, not resumed into a mixture.
TRAINER_VERSION = 2


def state_identity(spec: RunSpec) -> str:
    return f"{spec_digest(spec)}/trainer{TRAINER_VERSION}"


# Selection modes that keep one epoch's model (``last`` keeps the final one):
# - ``best``: the best clean + robust accuracy over the epochs with clean >= ``min_clean`` (the Generalist paper: best
#   clean + PGD20 on the test set; its code also requires clean >= 88%, ``min_clean: 0.88``);
# - ``best_robust``: the best robust accuracy, measured only after every ``every``-th epoch and the last (the CA-AT
#   code: PGD-20 every 25 epochs). ``every`` is epoch-valued (rescaled with the run), rounded to whole epochs, >= 1.
# Every epoch is measured on the selection split (``selection.split``): by default the validation split held out of
# the training data (tradeoff.data.load_run_data), never the test split, which the evaluation jobs measure once, at the
# end; ``split: test`` measures the test split instead (the papers' and the authors' practice).
SELECTED = CHOOSING_MODES


def tracking_split(spec: RunSpec, track: dict) -> str:
    """The split a method's per-epoch learner measurements read (Zipper Figure 5): the validation split (held out of
    training: the test images stay measured once, at the end), unless ``split: test`` or the run holds none out
    (``selection.split: test``, whose epochs the test split chooses too; ``validation.<dataset>: 0``)."""
    if track.get("split", "validation") == "test" or not spec.selection.validation:
        return "test"
    return "validation"


def _track_images(spec: RunSpec, ds, track: dict):
    """The first ``examples`` images of a fixed permutation of the split :func:`tracking_split` names."""
    if tracking_split(spec, track) == "test" or ds.x_val is None:
        return data.subset(ds.x_test, ds.y_test, track["examples"])
    return data.subset(ds.x_val, ds.y_val, track["examples"])


def robust_measured(selection: Selection, epoch: int, epochs: int) -> bool:
    """Whether the robust accuracy is measured after (1-based) ``epoch``: every epoch, except under ``best_robust``,
    which measures after every ``every``-th epoch and the last."""
    if selection.mode != "best_robust":
        return True
    return epoch % selection.period == 0 or epoch == epochs


class Stopped(UserError, RuntimeError):
    """Training was stopped by a signal (SIGTERM, SIGUSR1) after writing the state of the step it had reached; the
    same command resumes it there."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


#: SLURM sends SIGTERM at a time limit or a preemption (SIGKILL follows KillWait seconds later) and the signal that
#: ``sbatch --signal`` names ahead of the time limit (the SLURM profile asks for TERM; sites often use USR1)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class _StopRequest:
    """The signal that asked training to stop, set by the handler; the trainer checks it between steps."""

    signum: int | None = None
    handled: bool = False


_stop = _StopRequest()


def _stop_on_signals(fn):
    """Catch STOP_SIGNALS while ``fn`` trains: the handler only records the signal (no work happens inside it); the
    trainer checks it between steps, writes its state and raises Stopped. A signal that came too late to stop
    training (after its last step) is raised again once the previous handlers are back, so it acts as it would
    have without them."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():  # signal handlers: main thread only
            return fn(*args, **kwargs)

        def handler(signum, frame):
            _stop.signum = signum

        _stop.signum, _stop.handled = None, False
        previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
        try:
            return fn(*args, **kwargs)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            pending = _stop.signum if not _stop.handled else None
            _stop.signum, _stop.handled = None, False
            if pending is not None:
                os.kill(os.getpid(), pending)
    return wrapped


def _hold_step() -> tuple[int, int] | None:
    """``TRADEOFF_HOLD_AFTER_STEP=E:S`` (1-based epoch and step): training waits after that step until a stop signal
    arrives, so that a signal lands at a known step however fast the machine is (the fault tests; checking that a
    cluster's signals reach the trainer). Unset: None."""
    value = os.environ.get("TRADEOFF_HOLD_AFTER_STEP")
    if not value:
        return None
    epoch, _, step = value.partition(":")
    return int(epoch), int(step)


def _holding(train_step: Callable, run_id: str, at: tuple[int, int]) -> Callable:
    """A trainer's step that, after step ``at`` (see _hold_step), waits for a stop signal: set in place of the step
    only when asked for, so that the training loop itself has no such test."""
    def held_step(epoch: int, step: int, sums: "_EpochSums", nonfinite: "_NonFinite") -> bool:
        taken = train_step(epoch, step, sums, nonfinite)
        if taken and (epoch + 1, step + 1) == at:
            log.info("%s: holding after epoch %d step %d until a stop signal (TRADEOFF_HOLD_AFTER_STEP)", run_id, *at)
            while _stop.signum is None:
                time.sleep(0.01)
        return taken
    return held_step


def _stopped(run_id: str, where: str, signum: int, saved: Path | None) -> Stopped:
    _stop.handled = True
    kept = f"its state is saved in {saved}" if saved is not None else "nothing new to save"
    return Stopped(f"run {run_id}: stopped by {signal.Signals(signum).name} {where}; {kept}: the same command "
                   "resumes it there", signum)


#: steps between two looks at the losses noted on the device (`nonfinite: stop`): each look is one host-device sync
FINITE_CHECK_STEPS = 100


class _NonFinite:
    """The first non-finite loss of an epoch's steps, noted on the loss's device without a sync (``note``); ``check``
    looks (one sync) and stops the run naming its epoch and step and the loss."""

    def __init__(self, device: torch.device):
        self.step = torch.full((), -1, dtype=torch.long, device=device)  # the first non-finite step, -1: none yet
        self.loss = torch.zeros((), device=device)

    def note(self, loss: torch.Tensor, step: int) -> None:
        first = ~torch.isfinite(loss) & (self.step < 0)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss.float(), self.loss)

    def check(self, run_id: str, epoch: int) -> None:
        step = int(self.step)
        if step >= 0:
            raise NonFiniteLoss(f"run {run_id}: non-finite loss ({self.loss.item()}) at epoch {epoch + 1}, step "
                                f"{step + 1}; stopping (set nonfinite: skip to skip such steps)")


def model_factory(spec: RunSpec, ds: data.Data) -> Callable[[], nn.Module]:
    """The run's model builder. An adapter architecture (models.PRETRAINED_MODELS) starts from the checkpoint that
    the config names (``pretrained.<arch>``, resolved into the spec), and refuses to start without it
    (PretrainedError naming the key): without a checkpoint create_model would build it with random weights."""
    _, channels, size, _ = ds.x_train.shape
    adapter = spec.arch in models.PRETRAINED_MODELS

    def build() -> nn.Module:
        pretrained = pretrained_setting(spec.arch, spec.backbone_file) if adapter else None
        return models.create_model(spec.arch, ds.num_classes, in_channels=channels, image_size=size,
                                   bn_running_stats=spec.bn_running_stats, pretrained=pretrained)

    return build


def _to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``: to a GPU through pinned memory, asynchronously (a plain copy from pageable memory
    waits for the device's queue: a host-device sync in every step)."""
    return t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t.to(device)


def augment(x: torch.Tensor, padding: int, flip: bool, gen: torch.Generator) -> torch.Tensor:
    """Random crop (zero padding) and horizontal flip, batched on x's device. The random numbers are drawn
    on the CPU from ``gen`` so that a run draws the same numbers on every device."""
    n, _, h, w = x.shape
    if padding:
        dy = _to_device(torch.randint(0, 2 * padding + 1, (n,), generator=gen), x.device)
        dx = _to_device(torch.randint(0, 2 * padding + 1, (n,), generator=gen), x.device)
        padded = nn.functional.pad(x, (padding,) * 4)
        rows = (dy[:, None] + torch.arange(h, device=x.device))[:, None, :, None]
        cols = (dx[:, None] + torch.arange(w, device=x.device))[:, None, None, :]
        x = padded[torch.arange(n, device=x.device)[:, None, None, None],
                   torch.arange(x.shape[1], device=x.device)[None, :, None, None], rows, cols]
    if flip:
        mask = _to_device(torch.rand(n, generator=gen) < 0.5, x.device)
        x = torch.where(mask[:, None, None, None], x.flip(3), x)
    return x


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _one_trainer_per_run(fn):
    """Hold the run's state-folder lock while ``fn`` trains it, released when it returns or raises."""
    @functools.wraps(fn)
    def locked(run_id: str, spec: RunSpec, *, results: str | Path, **kwargs):
        with checkpoint.lock_states(Layout(Path(results)).states(run_id)):
            return fn(run_id, spec, results=results, **kwargs)
    return locked


@_one_trainer_per_run
@_stop_on_signals
def train(run_id: str, spec: RunSpec, *, results: str | Path, data_root: str | Path, runtime: Runtime,
          eval_batch_size: int = 500, progress: bool | None = None) -> RunPaths:
    """Train (or resume) a run; write its selected model and per-epoch curves. Returns their paths.

    SIGTERM or SIGUSR1 stops it between two steps: the state of that step is written (``partial``: the epoch's data
    order, its loss and accuracy sums, besides what every epoch state holds) and Stopped is raised; the same call
    resumes from there and ends as an uninterrupted run would (bit-identical on the CPU)."""
    trainer = _Trainer(run_id, spec, Layout(Path(results)).run(run_id), data_root, runtime, eval_batch_size, progress)
    # progress: bars on a terminal, else (a job's log) a line at most every TRADEOFF_PROGRESS_SECONDS
    epoch_bar = Bar(trainer.epochs, run_id, unit="epoch", initial=trainer.start_epoch, terminal=progress)
    for epoch in range(trainer.start_epoch, trainer.epochs):
        sums = trainer.begin_epoch(epoch)
        trainer.train_steps(epoch, sums)
        row, model, measured = trainer.measure(epoch, sums)
        _check_weights(run_id, epoch, model)
        trainer.best = _selected(spec.selection, trainer.best, row, model, measured)
        trainer.log_epoch(row, epoch_bar)
        saved = trainer.save(epoch + 1)
        if _stop.signum is not None and epoch + 1 < trainer.epochs:
            raise _stopped(run_id, f"after epoch {epoch + 1}", _stop.signum, saved)
    epoch_bar.close()
    _write_outputs(run_id, spec, trainer.method, trainer.ds, trainer.rows, trainer.best, trainer.paths,
                   trainer.curves)
    return trainer.paths


class _EpochSums:
    """What an epoch's steps have summed so far, on the device (no sync per step): the epoch's data order, the loss
    and correct predictions, a method's other per-step quantities (averaged per epoch), the steps counted, and where
    the epoch started (its first step, its start time ``t0``)."""

    def __init__(self, order: torch.Tensor, loss_sum: torch.Tensor, correct: torch.Tensor,
                 extras: dict[str, torch.Tensor], counted: int, first_step: int, t0: float):
        self.order, self.loss_sum, self.correct, self.extras = order, loss_sum, correct, extras
        self.counted, self.first_step, self.t0 = counted, first_step, t0

    @classmethod
    def fresh(cls, n: int, data_gen: torch.Generator, device: torch.device, t0: float) -> "_EpochSums":
        order = torch.randperm(n, generator=data_gen).to(device)
        return cls(order, torch.zeros((), device=device), torch.zeros((), device=device, dtype=torch.long), {},
                   0, 0, t0)

    @classmethod
    def resumed(cls, partial: dict, device: torch.device, t0: float) -> "_EpochSums":
        """The sums of an epoch stopped mid-way by a signal (its state's ``partial``, see ``saved``)."""
        order, loss_sum, correct = (partial[k].to(device) for k in ("order", "loss_sum", "correct"))
        extras = {k: v.to(device) for k, v in partial["extras"].items()}
        return cls(order, loss_sum, correct, extras, partial["counted"], partial["step"], t0 - partial["seconds"])

    def add(self, loss: torch.Tensor, out: dict, examples: int) -> None:
        self.loss_sum += loss.detach() * examples
        self.correct += out["correct"]
        self.counted += 1
        for key, value in out.items():
            if key not in ("loss", "correct"):
                self.extras[key] = self.extras.get(key, 0.0) + torch.as_tensor(value, dtype=torch.float64).detach()

    def saved(self, step: int) -> dict:
        """The state's ``partial`` of an epoch stopped before ``step``."""
        return {"step": step, "order": self.order.cpu(), "loss_sum": self.loss_sum.cpu(), "correct": self.correct.cpu(),
                "extras": {k: v.cpu() for k, v in self.extras.items()}, "counted": self.counted,
                "seconds": time.perf_counter() - self.t0}


class _Trainer:
    """One run's training, between its epochs: the data on the device, the method, the data generator, the epochs'
    rows and the best epoch so far, restored from the newest state of the run that has its settings."""

    def __init__(self, run_id: str, spec: RunSpec, paths: RunPaths, data_root: str | Path, runtime: Runtime,
                 eval_batch_size: int, progress: bool | None):
        self.run_id, self.spec, self.paths, self.runtime = run_id, spec, paths, runtime
        self.eval_batch_size, self.progress, self.device = eval_batch_size, progress, runtime.device
        self.ds = ds = data.load_run_data(spec, data_root)
        self.x_train, self.y_train = runtime.place_batch(ds.x_train), ds.y_train.to(runtime.device)
        x_eval, y_eval = data.selection_images(spec, ds)  # the validation split, or the test split (split: test)
        self.x_eval, self.y_eval = x_eval.to(runtime.device), y_eval.to(runtime.device)
        attack = spec.selection.attack  # a resolved attack spec, else none
        self.eval_attack = attack if isinstance(attack, AttackSpec) else None
        # in the model's sidecar beside each epoch's seconds (Table 4's minutes, and its note on the machines); its
        # commas as ';', as the curves' CSV cells had it, so the note reads as before
        self.device_name = device_name(runtime.device).replace(",", ";")
        torch.manual_seed(spec.seed)
        self.method = METHODS[spec.method.name](spec, model_factory(spec, ds), runtime)
        self.data_gen = torch.Generator().manual_seed(spec.seed + 1)
        self.track = self.method.tracking()  # per-epoch measurements of the method's learners (Zipper Figure 5)
        if self.track is not None:
            x_track, y_track = _track_images(spec, ds, self.track)
            self.x_track, self.y_track = x_track.to(runtime.device), y_track.to(runtime.device)
        self.start_epoch, self.rows, self.best, self.partial = self._resume()
        self.curves = CurveLog(paths.curves, self.rows)
        self.epochs, self.batch, self.n = spec.epochs, spec.batch_size, len(self.x_train)
        self.steps_per_epoch = math.ceil(self.n / self.batch)
        self.skip = spec.nonfinite == "skip"
        hold_at = _hold_step()
        if hold_at is not None:
            self.step = _holding(self.step, run_id, hold_at)

    def _resume(self) -> tuple[int, list[dict], dict | None, dict | None]:
        """(the first epoch to train, the rows so far, the best epoch so far, where a stopped epoch was) from the
        newest state, whose method, data generator and random state are restored; a fresh start without one."""
        resumed = checkpoint.latest_state(self.paths.state)
        if resumed is not None and resumed[1].get("spec") != state_identity(self.spec):
            # states of the same run id with other settings (the config changed) or written by an older trainer:
            # resuming them would mix the two
            log.warning("%s: the epoch states in %s were written with other settings; discarding them and starting "
                        "from epoch 0", self.run_id, self.paths.state)
            checkpoint.clear_states(self.paths.state)
            resumed = None
        if resumed is None:
            return 0, [], None, None
        start_epoch, state = resumed
        self.method.load_state_dict(state["method"])
        self.data_gen.set_state(state["data_rng"])
        _set_rng_state(state["rng"])
        partial = state.get("partial")  # stopped mid-epoch by a signal: where it was in the epoch
        log.info("%s: resuming after epoch %d%s from %s", self.run_id, start_epoch,
                 f", step {partial['step']}" if partial else "", self.paths.state)
        return start_epoch, json.loads(state["rows"]), state["best"], partial

    def state(self, partial: dict | None = None) -> dict:
        """What a state file holds: everything a resumed run needs to go on as if it never stopped."""
        return {"method": self.method.state_dict(), "data_rng": self.data_gen.get_state(), "rng": _rng_state(),
                "rows": json.dumps(self.rows), "best": self.best, "spec": state_identity(self.spec),
                **({"partial": partial} if partial is not None else {})}

    def save(self, epochs_done: int) -> Path:
        return checkpoint.save_state(self.paths.state, epochs_done, self.state())

    def begin_epoch(self, epoch: int) -> _EpochSums:
        t0 = time.perf_counter()
        if self.spec.lr_update == "epoch":
            # schedules (learning rate, Generalist's gamma) are read at the 1-based epoch, as the Generalist code
            # interpolates them: the first epoch trains at the value at 1, the last at the last breakpoint's
            self.method.set_epoch(epoch + 1)
        if self.partial is None:
            return _EpochSums.fresh(self.n, self.data_gen, self.device, t0)
        sums, self.partial = _EpochSums.resumed(self.partial, self.device, t0), None
        return sums

    def train_steps(self, epoch: int, sums: _EpochSums) -> None:
        """The epoch's steps from ``sums.first_step``; a stop signal keeps the state of the step reached and stops."""
        nonfinite = _NonFinite(self.device)
        bar = Bar(self.steps_per_epoch, f"{self.run_id} epoch {epoch + 1}/{self.epochs}", unit="step",
                  initial=sums.first_step, leave=False, terminal=self.progress)
        for step in range(sums.first_step, self.steps_per_epoch):
            if _stop.signum is not None:  # SIGTERM / SIGUSR1: keep this step's state, then stop
                nonfinite.check(self.run_id, epoch)  # never a state after a non-finite step
                # at step 0 the state of the previous epoch is this very point
                saved = (checkpoint.save_state(self.paths.state, epoch, self.state(sums.saved(step)), step=step)
                         if step > 0 else None)
                raise _stopped(self.run_id, f"in epoch {epoch + 1} after step {step} of {self.steps_per_epoch}",
                               _stop.signum, saved)
            if self.step(epoch, step, sums, nonfinite):
                bar.update()
                log.debug("%s epoch %d/%d step %d/%d done", self.run_id, epoch + 1, self.epochs, step + 1,
                          self.steps_per_epoch)
        bar.close()
        nonfinite.check(self.run_id, epoch)
        if sums.counted == 0:
            raise NonFiniteLoss(f"run {self.run_id}: every step of epoch {epoch + 1} had a non-finite loss; stopping")

    def step(self, epoch: int, step: int, sums: _EpochSums, nonfinite: _NonFinite) -> bool:
        """One training step, added to ``sums``; False if it was skipped (``nonfinite: skip``)."""
        spec, method = self.spec, self.method
        idx = sums.order[step * self.batch:(step + 1) * self.batch]
        xb = augment(self.x_train[idx], spec.augment.crop_padding, spec.augment.flip, self.data_gen)
        if spec.lr_update == "step":  # the same convention per step: the time in epochs at the step's end
            method.set_epoch(epoch + (step + 1) / self.steps_per_epoch)
        if spec.eps_warmup:  # training budgets grow linearly from 0 over the first eps_warmup epochs
            method.set_budget_scale(min(1.0, (epoch + step / self.steps_per_epoch) / spec.eps_warmup))
        before = copy.deepcopy(method.state_dict()) if self.skip else None  # the update of a skipped step is undone
        out = method.train_step(xb, self.y_train[idx])
        loss = out["loss"].detach()
        if self.skip:  # the step is undone at once, so every loss is looked at now: a host-device sync per step
            if not torch.isfinite(loss):
                log.warning("run %s: non-finite loss (%s) at epoch %d, step %d; the step was skipped (its update "
                            "undone)", self.run_id, loss.item(), epoch + 1, step + 1)
                method.load_state_dict(before)
                return False
        else:  # noted on the device, looked at every FINITE_CHECK_STEPS steps, before a state is written and at
            # the epoch's end: no sync per step, and the run stops naming the first non-finite step all the same
            nonfinite.note(loss, step)
            if (step + 1) % FINITE_CHECK_STEPS == 0:
                nonfinite.check(self.run_id, epoch)
        sums.add(loss, out, len(idx))
        return True

    def measure(self, epoch: int, sums: _EpochSums) -> tuple[dict, nn.Module, bool]:
        """The epoch's row of the curves (also appended to them), the model it evaluated, and whether the robust
        accuracy was measured."""
        method, spec, batch_size = self.method, self.spec, self.eval_batch_size
        # the learners as this epoch trained them, before end_epoch (Generalist's communication) changes them; the
        # measurement observes training and is not part of its time (a run that shares this job does not track)
        t_track = time.perf_counter()
        tracked = (learners.measure(method.learners(), self.x_track, self.y_track, self.track, seed=0,
                                    batch_size=batch_size) if self.track is not None else {})
        t_track = time.perf_counter() - t_track
        method.end_epoch(epoch)
        model = method.eval_model()
        # no images to measure: a dataset without a validation split (validation.<dataset>: 0) under mode last
        images = len(self.y_eval) > 0
        clean = (accuracy_under(model, self.x_eval, self.y_eval, CLEAN, seed=0,
                                batch_size=batch_size) if images else float("nan"))
        measured = robust_measured(spec.selection, epoch + 1, self.epochs)
        robust = (accuracy_under(model, self.x_eval, self.y_eval, self.eval_attack, seed=0, batch_size=batch_size)
                  if self.eval_attack and measured and images else float("nan"))
        seconds = time.perf_counter() - sums.t0 - t_track
        n = self.n
        row = {"epoch": epoch + 1, "lr": _current_lr(method), "train_loss": (sums.loss_sum / n).item(),
               "train_acc": (sums.correct.float() / n).item(), "eval_clean": clean, "eval_robust": robust,
               "seconds": seconds, "images_per_s": n / seconds, "precision": self.runtime.precision,
               "device": self.device_name,
               **{f"train_{key}": (total / max(sums.counted, 1)).item() for key, total in sums.extras.items()},
               **tracked, **({"track_seconds": t_track} if self.track is not None else {})}
        self.rows.append(row)
        self.curves.epoch(row)  # its CLOCKED fields stay in the rows (the state), for the model's sidecar
        return row, model, measured

    def log_epoch(self, row: dict, bar: Bar) -> None:
        clean, robust, epoch = row["eval_clean"], row["eval_robust"], row["epoch"]
        eta = (self.epochs - epoch) * row["seconds"]
        log.info("%s epoch %d/%d loss %.4f acc %.3f | eval clean %.3f robust %.3f | %.0f img/s | ETA %s",
                 self.run_id, epoch, self.epochs, row["train_loss"], row["train_acc"], clean, robust,
                 row["images_per_s"], duration(eta))
        bar.update(postfix=f"loss {row['train_loss']:.4f}, clean {clean:.3f}, robust {robust:.3f}")


def _check_weights(run_id: str, epoch: int, model: nn.Module) -> None:
    """Weights that are not finite are never checkpointed."""
    sums = [p.float().sum() for p in model.state_dict().values() if p.is_floating_point()]
    if sums and not bool(torch.isfinite(torch.stack(sums)).all()):  # one read of the device, not one per tensor
        raise NonFiniteLoss(f"run {run_id}: non-finite weights after epoch {epoch + 1}; not checkpointing them")


def _selected(selection: Selection, best: dict | None, row: dict, model: nn.Module, measured: bool) -> dict | None:
    """The best epoch so far (score, epoch, the model's weights on the host) after an epoch of ``row``."""
    clean, robust = row["eval_clean"], row["eval_robust"]
    if selection.mode not in SELECTED or not measured or clean < selection.min_clean:
        return best
    score = clean + robust if selection.mode == "best" else robust
    # best: the first epoch of the best score; best_robust: the last (the CA-AT code keeps a tie, >=)
    if best is None or score > best["score"] or (selection.mode == "best_robust" and score == best["score"]):
        return {"score": score, "epoch": row["epoch"],
                "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}}
    return best


def _current_lr(method) -> float:
    optimizer = getattr(method, "optimizer", None)
    return float(optimizer.param_groups[0]["lr"]) if optimizer is not None else float("nan")


def _write_outputs(run_id: str, spec: RunSpec, method, ds: data.Data, rows: list[dict], best: dict | None,
                   paths: RunPaths, curves: CurveLog) -> None:
    selection = spec.selection
    if selection.mode in SELECTED and best is None:
        raise RuntimeError(f"run {run_id}: no epoch reached selection.min_clean = {selection.min_clean}; "
                           "no model selected (lower min_clean or use mode: last)")
    state = best["model"] if selection.mode in SELECTED else method.eval_model().state_dict()
    selected_epoch = best["epoch"] if selection.mode in SELECTED else rows[-1]["epoch"]
    _, channels, size, _ = ds.x_train.shape
    meta = {"run": run_id, "spec": spec.as_dict(), "selected_epoch": selected_epoch, "mechanism": method.mechanism(),
            **selection.record(len(ds.y_test)), "num_classes": ds.num_classes,
            "in_channels": channels, "image_size": size, "classes": list(ds.classes)}
    learner_states = {name: {k: v.detach().cpu() for k, v in m.state_dict().items()}
                      for name, m in method.learners().items()}
    snapshots = {int(epoch): {name: {k: v.detach().cpu() for k, v in sd.items()} for name, sd in kept.items()}
                 for epoch, kept in method.snapshots().items()}  # {epoch: {learner: state}} (Zipper Figure 6)
    checkpoint.save({"model": {k: v.detach().cpu() for k, v in state.items()}, "learners": learner_states,
                     "learner_snapshots": snapshots, "meta": json.dumps(meta)}, paths.model)
    # beside the model, not in it: the model's bytes are the same at every commit, on every host, at any speed
    write_sidecar(paths.model, {"run": run_id, "epochs": clocked(rows)})
    chosen = rows[selected_epoch - 1]
    curves.finish({"epoch": selected_epoch, **{k: chosen[k] if math.isfinite(chosen[k]) else None
                                               for k in ("eval_clean", "eval_robust")}})
