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

from . import checkpoint, data, learners, models
from .bars import Bar, duration
from .config import spec_digest
from .errors import UserError
from .evaluate import accuracy_under
from .live import CurveLog
from .methods import METHODS
from .provenance import device_name, provenance
from .results import Layout, RunPaths
from .runtime import Runtime

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


def state_identity(spec: dict) -> str:
    return f"{spec_digest(spec)}/trainer{TRAINER_VERSION}"


# Selection modes that keep one epoch's model (``last`` keeps the final one):
# - ``best``: the best clean + robust accuracy over the epochs with clean >= ``min_clean`` (the Generalist paper: best
#   clean + PGD20 on the test set; its code also requires clean >= 88%, ``min_clean: 0.88``);
# - ``best_robust``: the best robust accuracy, measured only after every ``every``-th epoch and the last (the CA-AT
#   code: PGD-20 every 25 epochs). ``every`` is epoch-valued (rescaled with the run), rounded to whole epochs, >= 1.
SELECTED = ("best", "best_robust")


def measurement_period(selection: dict) -> int:
    """The whole epochs between the robust measurements of ``best_robust`` (``every`` rounded half up, >= 1)."""
    return max(1, math.floor(float(selection.get("every") or 1) + 0.5))


def robust_measured(selection: dict, epoch: int, epochs: int) -> bool:
    """Whether the robust accuracy is measured after (1-based) ``epoch``: every epoch, except under ``best_robust``,
    which measures after every ``every``-th epoch and the last."""
    if selection["mode"] != "best_robust":
        return True
    return epoch % measurement_period(selection) == 0 or epoch == epochs


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


def _hold_for_signal(run_id: str, at: tuple[int, int]) -> None:
    log.info("%s: holding after epoch %d step %d until a stop signal (TRADEOFF_HOLD_AFTER_STEP)", run_id, *at)
    while _stop.signum is None:
        time.sleep(0.01)


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


def model_factory(spec: dict, ds: data.Data) -> Callable[[], nn.Module]:
    """The run's model builder. An adapter architecture (models.PRETRAINED_MODELS) starts from the checkpoint that
    the config names (``pretrained.<arch>``, resolved into the spec): build_model refuses to start without it."""
    _, channels, size, _ = ds.x_train.shape
    pretrained = {"pretrained": spec.get("pretrained")} if spec["arch"] in models.PRETRAINED_MODELS else {}

    def build() -> nn.Module:
        return models.build_model(spec["arch"], ds.num_classes, in_channels=channels, image_size=size,
                                  bn_running_stats=spec["bn_running_stats"], **pretrained)

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
    def locked(run_id: str, spec: dict, *, results: str | Path, **kwargs):
        with checkpoint.lock_states(Layout(Path(results)).states(run_id)):
            return fn(run_id, spec, results=results, **kwargs)
    return locked


@_one_trainer_per_run
@_stop_on_signals
def train(run_id: str, spec: dict, *, results: str | Path, data_root: str | Path, runtime: Runtime,
          eval_batch_size: int = 500, progress: bool | None = None) -> RunPaths:
    """Train (or resume) a run; write its selected model and per-epoch curves. Returns their paths.

    SIGTERM or SIGUSR1 stops it between two steps: the state of that step is written (``partial``: the epoch's data
    order, its loss and accuracy sums, besides what every epoch state holds) and Stopped is raised; the same call
    resumes from there and ends as an uninterrupted run would (bit-identical on the CPU)."""
    paths = Layout(Path(results)).run(run_id)
    ds = data.load_run_data(spec, data_root)
    x_train, y_train = runtime.place_batch(ds.x_train), ds.y_train.to(runtime.device)
    x_eval, y_eval = data.subset(ds.x_test, ds.y_test, spec["selection"]["examples"])
    x_eval, y_eval = x_eval.to(runtime.device), y_eval.to(runtime.device)
    selection = spec["selection"]
    eval_attack = selection["attack"] if isinstance(selection["attack"], dict) else None
    # in the curves beside each epoch's seconds (Table 4's minutes); a CSV cell, so without commas
    device = device_name(runtime.device).replace(",", ";")

    torch.manual_seed(spec["seed"])
    method = METHODS[spec["method"]["name"]](spec, model_factory(spec, ds), runtime)
    data_gen = torch.Generator().manual_seed(spec["seed"] + 1)
    track = method.tracking()  # per-epoch measurements of the method's learners (Zipper Figure 5), or None
    if track is not None:
        x_track, y_track = data.subset(ds.x_test, ds.y_test, track["examples"])
        x_track, y_track = x_track.to(runtime.device), y_track.to(runtime.device)

    start_epoch, rows, best, partial = 0, [], None, None
    resumed = checkpoint.latest_state(paths.state)
    if resumed is not None and resumed[1].get("spec") != state_identity(spec):
        # states of the same run id with other settings (the config changed) or written by an older trainer: resuming
        # them would mix the two
        log.warning("%s: the epoch states in %s were written with other settings; discarding them and starting "
                    "from epoch 0", run_id, paths.state)
        checkpoint.clear_states(paths.state)
        resumed = None
    if resumed is not None:
        start_epoch, state = resumed
        method.load_state_dict(state["method"])
        data_gen.set_state(state["data_rng"])
        _set_rng_state(state["rng"])
        rows, best = json.loads(state["rows"]), state["best"]
        partial = state.get("partial")  # stopped mid-epoch by a signal: where it was in the epoch
        log.info("%s: resuming after epoch %d%s from %s", run_id, start_epoch,
                 f", step {partial['step']}" if partial else "", paths.state)

    curves = CurveLog(paths.curves, rows)
    epochs, batch = spec["epochs"], spec["batch_size"]
    n = len(x_train)
    steps_per_epoch = math.ceil(n / batch)
    hold_at = _hold_step()
    # progress: bars on a terminal, else (a job's log) a line at most every TRADEOFF_PROGRESS_SECONDS
    epoch_bar = Bar(epochs, run_id, unit="epoch", initial=start_epoch, terminal=progress)
    for epoch in range(start_epoch, epochs):
        t0 = time.perf_counter()
        if spec["lr_update"] == "epoch":
            # schedules (learning rate, Generalist's gamma) are read at the 1-based epoch, as the Generalist code
            # interpolates them: the first epoch trains at the value at 1, the last at the last breakpoint's
            method.set_epoch(epoch + 1)
        if partial is None:
            order = torch.randperm(n, generator=data_gen).to(runtime.device)
            loss_sum = torch.zeros((), device=runtime.device)
            correct = torch.zeros((), device=runtime.device, dtype=torch.long)
            extras: dict[str, torch.Tensor] = {}  # other per-step quantities a method reports, averaged per epoch
            counted, first_step = 0, 0
        else:  # resumed mid-epoch: the epoch's order and what its steps so far summed
            order, loss_sum, correct = (partial[k].to(runtime.device) for k in ("order", "loss_sum", "correct"))
            extras = {k: v.to(runtime.device) for k, v in partial["extras"].items()}
            counted, first_step, t0 = partial["counted"], partial["step"], t0 - partial["seconds"]
            partial = None
        skip = spec["nonfinite"] == "skip"
        nonfinite = _NonFinite(runtime.device)
        step_bar = Bar(steps_per_epoch, f"{run_id} epoch {epoch + 1}/{epochs}", unit="step", initial=first_step,
                       leave=False, terminal=progress)
        for step in range(first_step, steps_per_epoch):
            if _stop.signum is not None:  # SIGTERM / SIGUSR1: keep this step's state, then stop
                nonfinite.check(run_id, epoch)  # never a state after a non-finite step
                saved = None
                if step > 0:  # at step 0 the state of the previous epoch is this very point
                    saved = checkpoint.save_state(paths.state, epoch, {
                        "method": method.state_dict(), "data_rng": data_gen.get_state(), "rng": _rng_state(),
                        "rows": json.dumps(rows), "best": best, "spec": state_identity(spec),
                        "partial": {"step": step, "order": order.cpu(), "loss_sum": loss_sum.cpu(),
                                    "correct": correct.cpu(), "extras": {k: v.cpu() for k, v in extras.items()},
                                    "counted": counted, "seconds": time.perf_counter() - t0}}, step=step)
                raise _stopped(run_id, f"in epoch {epoch + 1} after step {step} of {steps_per_epoch}", _stop.signum,
                               saved)
            idx = order[step * batch:(step + 1) * batch]
            xb = augment(x_train[idx], spec["augment"]["crop_padding"], spec["augment"]["flip"], data_gen)
            if spec["lr_update"] == "step":  # the same convention per step: the time in epochs at the step's end
                method.set_epoch(epoch + (step + 1) / steps_per_epoch)
            if spec.get("eps_warmup"):  # training budgets grow linearly from 0 over the first eps_warmup epochs
                method.set_budget_scale(min(1.0, (epoch + step / steps_per_epoch) / spec["eps_warmup"]))
            before = copy.deepcopy(method.state_dict()) if skip else None  # the update of a skipped step is undone
            out = method.train_step(xb, y_train[idx])
            loss = out["loss"].detach()
            if skip:  # the step is undone at once, so every loss is looked at now: a host-device sync per step
                if not torch.isfinite(loss):
                    log.warning("run %s: non-finite loss (%s) at epoch %d, step %d; the step was skipped (its update "
                                "undone)", run_id, loss.item(), epoch + 1, step + 1)
                    method.load_state_dict(before)
                    continue
            else:  # noted on the device, looked at every FINITE_CHECK_STEPS steps, before a state is written and at
                # the epoch's end: no sync per step, and the run stops naming the first non-finite step all the same
                nonfinite.note(loss, step)
                if (step + 1) % FINITE_CHECK_STEPS == 0:
                    nonfinite.check(run_id, epoch)
            loss_sum += loss.detach() * len(idx)
            correct += out["correct"]
            counted += 1
            for key, value in out.items():
                if key not in ("loss", "correct"):
                    extras[key] = extras.get(key, 0.0) + torch.as_tensor(value, dtype=torch.float64).detach()
            step_bar.update()
            log.debug("%s epoch %d/%d step %d/%d done", run_id, epoch + 1, epochs, step + 1, steps_per_epoch)
            if hold_at == (epoch + 1, step + 1):  # TRADEOFF_HOLD_AFTER_STEP: wait here for a stop signal
                _hold_for_signal(run_id, hold_at)
        step_bar.close()
        nonfinite.check(run_id, epoch)
        if counted == 0:
            raise NonFiniteLoss(f"run {run_id}: every step of epoch {epoch + 1} had a non-finite loss; stopping")
        # the learners as this epoch trained them, before end_epoch (Generalist's communication) changes them; the
        # measurement observes training and is not part of its time (a run that shares this job does not track)
        t_track = time.perf_counter()
        tracked = (learners.measure(method.learners(), x_track, y_track, track, seed=0, batch_size=eval_batch_size)
                   if track is not None else {})
        t_track = time.perf_counter() - t_track
        method.end_epoch(epoch)
        model = method.eval_model()
        clean = accuracy_under(model, x_eval, y_eval, {"type": "clean", "eps": 0.0}, seed=0,
                               batch_size=eval_batch_size)
        measured = robust_measured(selection, epoch + 1, epochs)
        robust = (accuracy_under(model, x_eval, y_eval, eval_attack, seed=0, batch_size=eval_batch_size)
                  if eval_attack and measured else float("nan"))
        seconds = time.perf_counter() - t0 - t_track
        row = {"epoch": epoch + 1, "lr": _current_lr(method), "train_loss": (loss_sum / n).item(),
               "train_acc": (correct.float() / n).item(), "eval_clean": clean, "eval_robust": robust,
               "seconds": seconds, "images_per_s": n / seconds, "precision": runtime.precision, "device": device,
               **{f"train_{key}": (total / max(counted, 1)).item() for key, total in extras.items()}, **tracked,
               **({"track_seconds": t_track} if track is not None else {})}
        rows.append(row)
        curves.epoch(row)
        sums = [p.float().sum() for p in model.state_dict().values() if p.is_floating_point()]
        if sums and not bool(torch.isfinite(torch.stack(sums)).all()):  # one read of the device, not one per tensor
            raise NonFiniteLoss(f"run {run_id}: non-finite weights after epoch {epoch + 1}; not checkpointing them")
        if selection["mode"] in SELECTED and measured and clean >= selection["min_clean"]:
            score = clean + robust if selection["mode"] == "best" else robust
            # best: the first epoch of the best score; best_robust: the last (the CA-AT code keeps a tie, >=)
            if best is None or score > best["score"] or (selection["mode"] == "best_robust" and
                                                          score == best["score"]):
                best = {"score": score, "epoch": epoch + 1,
                        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}}
        eta = (epochs - epoch - 1) * seconds
        log.info("%s epoch %d/%d loss %.4f acc %.3f | eval clean %.3f robust %.3f | %.0f img/s | ETA %s",
                 run_id, epoch + 1, epochs, row["train_loss"], row["train_acc"], clean, robust,
                 row["images_per_s"], duration(eta))
        epoch_bar.update(postfix=f"loss {row['train_loss']:.4f}, clean {clean:.3f}, robust {robust:.3f}")
        saved = checkpoint.save_state(paths.state, epoch + 1, {
            "method": method.state_dict(), "data_rng": data_gen.get_state(), "rng": _rng_state(),
            "rows": json.dumps(rows), "best": best, "spec": state_identity(spec)})
        if _stop.signum is not None and epoch + 1 < epochs:
            raise _stopped(run_id, f"after epoch {epoch + 1}", _stop.signum, saved)

    epoch_bar.close()
    _write_outputs(run_id, spec, method, ds, rows, best, paths, curves)
    return paths


def _current_lr(method) -> float:
    optimizer = getattr(method, "optimizer", None)
    return float(optimizer.param_groups[0]["lr"]) if optimizer is not None else float("nan")


def _write_outputs(run_id: str, spec: dict, method, ds: data.Data, rows: list[dict], best: dict | None,
                   paths: RunPaths, curves: CurveLog) -> None:
    selection = spec["selection"]
    if selection["mode"] in SELECTED and best is None:
        raise RuntimeError(f"run {run_id}: no epoch reached selection.min_clean = {selection['min_clean']}; "
                           "no model selected (lower min_clean or use mode: last)")
    state = best["model"] if selection["mode"] in SELECTED else method.eval_model().state_dict()
    selected_epoch = best["epoch"] if selection["mode"] in SELECTED else rows[-1]["epoch"]
    _, channels, size, _ = ds.x_train.shape
    meta = {"run": run_id, "spec": spec, "selected_epoch": selected_epoch, "mechanism": method.mechanism(),
            "num_classes": ds.num_classes,
            "in_channels": channels, "image_size": size, "classes": list(ds.classes),
            "provenance": provenance()}
    learner_states = {name: {k: v.detach().cpu() for k, v in m.state_dict().items()}
                      for name, m in method.learners().items()}
    snapshots = {int(epoch): {name: {k: v.detach().cpu() for k, v in sd.items()} for name, sd in kept.items()}
                 for epoch, kept in method.snapshots().items()}  # {epoch: {learner: state}} (Zipper Figure 6)
    checkpoint.save({"model": {k: v.detach().cpu() for k, v in state.items()}, "learners": learner_states,
                     "learner_snapshots": snapshots, "meta": json.dumps(meta)}, paths.model)
    chosen = rows[selected_epoch - 1]
    curves.finish({"epoch": selected_epoch, **{k: chosen[k] if math.isfinite(chosen[k]) else None
                                               for k in ("eval_clean", "eval_robust")}})
