"""Faults and bad input, end to end through the `tradeoff` CLI and the real `snakemake` and `dvc` commands.

What the unit tests already cover is not repeated here (test_checkpoint: corrupt/truncated states at library
level, pickle refused by checkpoint.load; test_train: two kills at fixed moments, NaN stop; test_config: every
bad config at library level; test_data: corrupt transfers with fakes). Here: kill -9 at random moments, of
training and of evaluation; a corrupted newest state through the CLI; a malicious model.pt through `tradeoff
evaluate`; `nonfinite: skip`; disk full (a real tmpfs, and ENOSPC injected); a read-only results folder; bad
configs through `snakemake` (with the SLURM profile: no job is submitted) and the CLI; two pipelines in one
folder (Snakemake's lock, DVC's lock, the training lock); an interrupted download through `tradeoff download`.

Random kill moments come from a seeded generator: TRADEOFF_FAULT_SEED=<n> replays a failure (the seed is in
every assertion message).
"""

from __future__ import annotations

import concurrent.futures
import errno
import json
import logging
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
import torch
from helpers import env, results_of, run, workflow_copy

from tradeoff import cli as tcli
from tradeoff import config as tcfg
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import Augment, Schedule
from tradeoff.storage import checkpoint
from tradeoff.storage.curves import read_curves
from tradeoff.storage.layout import Layout, RunPaths, log_history, ready_marker
from tradeoff.training.train import NonFiniteLoss, train

SMOKE = ["config/config.yaml", "config/smoke.yaml"]
AT = "cifar10-resnet18-at-beta1"
NT = "cifar10-resnet18-nt"
SEED = int(os.environ.get("TRADEOFF_FAULT_SEED") or time.time_ns() % 1_000_000)


def _copy(tmp_path: Path, name: str = "w", overlay: str | None = None) -> Path:
    work = workflow_copy(tmp_path / name)
    if overlay is not None:
        (work / "config" / "fault.yaml").write_text(overlay)
    return work


def _configs(work: Path) -> list[str]:
    return SMOKE + (["config/fault.yaml"] if (work / "config" / "fault.yaml").exists() else [])


def _cmd(work: Path, *args: str) -> list[str]:
    return ["tradeoff", *[a for f in _configs(work) for a in ("--config", f)], *args]


def _cli(work: Path, monkeypatch, *args: str) -> int:
    """`tradeoff ...` in this process (no second interpreter start), in the workflow copy."""
    monkeypatch.chdir(work)
    return tcli.main([a for f in _configs(work) for a in ("--config", f)] + list(args))


def _trained_three_epochs(tmp_path: Path, monkeypatch) -> tuple[Path, RunPaths, Path]:
    """A workflow copy whose NT run trained 3 epochs; its model moved aside as the reference to match."""
    work = _copy(tmp_path, overlay="scale_map: {epochs: 3}\n")
    assert _cli(work, monkeypatch, "train", "--run", NT) == 0
    paths = results_of(work).run(NT)
    reference = tmp_path / "reference.pt"
    paths.model.rename(reference)
    return work, paths, reference


def _weights(path: Path) -> dict:
    return checkpoint.load(path)["model"]


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _epoch(path: Path) -> int:
    return int(checkpoint.STATE_PATTERN.match(path.name).group(1))


def _newest_epoch(state_dir: Path) -> int:
    states = checkpoint.list_states(state_dir)
    return _epoch(states[-1]) if states else 0


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))} if folder.exists() else {}


# ------------------------------------------------------------------------------------------- kill -9


def _kill_at_random_moments(cmd, cwd, rng, duration, kills, state_dir=None) -> list[float]:
    """Start `cmd` again and again, SIGKILL it at a random moment of its expected duration each time."""
    moments = []
    for _ in range(kills):
        proc = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delay = rng.uniform(0.15, 0.95) * duration
        try:
            proc.wait(timeout=delay)
            break  # it finished before its moment: nothing left to kill
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            moments.append(round(delay, 2))
    return moments


STARTUP = 4.0  # seconds a `tradeoff` process takes before it works (imports), roughly


def test_kill9_training_at_random_moments_then_rerun_is_bit_identical(tmp_path, monkeypatch):
    overlay = "scale_map: {epochs: 6, train_examples: 512}\n"
    reference, killed = _copy(tmp_path, "reference", overlay), _copy(tmp_path, "killed", overlay)
    t0 = time.monotonic()
    assert _cli(reference, monkeypatch, "train", "--run", AT) == 0  # uninterrupted, in this process
    duration = time.monotonic() - t0 + STARTUP
    rng = random.Random(SEED)
    state_dir = killed / "results" / "smoke" / "work" / AT
    moments = _kill_at_random_moments(_cmd(killed, "train", "--run", AT), killed, rng, duration, kills=2)
    if _newest_epoch(state_dir) == 0 or _newest_epoch(state_dir) >= 6:  # make sure one kill lands mid-training
        proc = subprocess.Popen(_cmd(killed, "train", "--run", AT), cwd=killed, env=env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and _newest_epoch(state_dir) < 2:
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        moments.append("after epoch 2")
    interrupted_at = _newest_epoch(state_dir)
    out = run(_cmd(killed, "train", "--run", AT), killed)
    info = f"seed {SEED}, kills at {moments} s of {duration:.1f} s, resumed after epoch {interrupted_at}"
    if interrupted_at:
        assert f"resuming after epoch {interrupted_at}" in out.stderr, info
    paths = results_of(killed).run(AT)
    assert _same_weights(paths.model, results_of(reference).run(AT).model), info
    assert [row["epoch"] for row in read_curves(paths.curves)] == [1, 2, 3, 4, 5, 6], info
    assert not [p for p in state_dir.iterdir() if p.name.endswith(".tmp")], f"temporary files left: {info}"


def test_kill9_evaluation_at_random_moments_then_rerun_gives_the_same_metrics(tmp_path, monkeypatch):
    # every test image, 40 per batch (9 batches), PGD-100 uncapped: long enough to be killed mid-way
    work = _copy(tmp_path, overlay="runtime: {eval_batch_size: 40}\nscale_map: {test_examples: null, "
                                   "max_attack_steps: null}\n")
    assert _cli(work, monkeypatch, "train", "--run", NT) == 0
    results = results_of(work)
    metrics, predictions = results.metrics(NT, "pgd100"), results.predictions(NT, "pgd100")
    t0 = time.monotonic()
    assert _cli(work, monkeypatch, "evaluate", "--run", NT, "--attack", "pgd100") == 0  # uninterrupted
    duration = time.monotonic() - t0 + STARTUP
    expected_metrics, expected_predictions = json.loads(metrics.read_text()), predictions.read_bytes()
    metrics.unlink()
    predictions.unlink()

    rng = random.Random(SEED + 1)
    cmd = _cmd(work, "evaluate", "--run", NT, "--attack", "pgd100")
    moments = []
    for _ in range(2):
        moments += _kill_at_random_moments(cmd, work, rng, duration, kills=1)
        # nothing half-written is ever there to be taken as an output: either no file, or a complete one
        for path in (metrics, predictions):
            assert not path.exists() or json.loads(path.read_text()), f"seed {SEED}: {path} is half-written"
        if metrics.exists():
            break
    run(cmd, work)
    got = json.loads(metrics.read_text())
    for key in ("accuracy", "clean_accuracy", "examples", "robust_examples", "eps", "params", "seed"):
        assert got[key] == expected_metrics[key], f"seed {SEED}, kills at {moments} s: {key}"
    assert predictions.read_bytes() == expected_predictions, f"seed {SEED}, kills at {moments} s"
    assert not list(metrics.parent.glob(".*.tmp")) and not list(predictions.parent.glob(".*.tmp"))


# ------------------------------------------------------------------------------------------- SIGTERM / SIGUSR1

# SLURM sends SIGTERM at a time limit or a preemption, and (the profile's --signal) SIGUSR1 ahead of the time limit:
# the trainer writes the state of the step it reached, exits non-zero, and the same command resumes mid-epoch.
STOP_RUNS = {  # run -> what it exercises besides the model, the optimizer's momentum and the global RNG
    AT: {},                                                             # PGD's random starts (global RNG)
    "cifar10-resnet18-generalist": {"lr_update": "step"},               # EMA, two optimizers, gamma per step
    "cifar10-resnet18-trades-lambda6": {},
    "cifar10-resnet18-fat": {},                                         # per-epoch extras (tau, PGD steps)
    "cifar10-resnet18-caat-ce-gamma0_8-train_apgd": {},                 # APGD's seeds (global RNG), CA-AT's mu
}


def _curves_without_times(path: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in ("seconds", "images_per_s", "track_seconds")}
            for row in read_curves(path)]


@pytest.mark.parametrize("run_id", list(STOP_RUNS))
def test_sigterm_or_sigusr1_mid_epoch_then_resume_is_bit_identical(run_id, tmp_path, monkeypatch, caplog):
    """The signal arrives during a random step (from a seeded generator); the trainer finishes that step, writes
    its state and raises Stopped; a second call resumes there. Weights (the model, the learners) and every curve
    value (the loss and accuracy sums, the method's extras) equal an uninterrupted run's, bit for bit."""
    import tradeoff.training.train as ttrain

    caplog.set_level(logging.INFO)
    catalog = _spec(epochs=3, train_examples=256)  # 4 steps per epoch
    spec = catalog.runs[run_id].replace(augment=Augment(crop_padding=1, flip=True), **STOP_RUNS[run_id])  # data RNG
    kw = dict(data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")), progress=False)
    reference = train(run_id, spec, results=tmp_path / "reference", **kw)

    rng = random.Random(SEED + sum(map(ord, run_id)))
    stops = sorted(rng.sample(range(1, 11), 2))  # 0-based global steps, never the last
    real, calls = ttrain.augment, {"n": 0}

    def augment(x, *args, **kwargs):  # called once per step, before the step: a signal "during" the step
        if calls["n"] in stops:
            os.kill(os.getpid(), signal.SIGTERM if calls["n"] == stops[0] else signal.SIGUSR1)
        calls["n"] += 1
        return real(x, *args, **kwargs)

    monkeypatch.setattr(ttrain, "augment", augment)
    handlers = {sig: signal.getsignal(sig) for sig in ttrain.STOP_SIGNALS}
    info = f"seed {SEED}, stops after global steps {[k + 1 for k in stops]}"
    for k, name in zip(stops, ("SIGTERM", "SIGUSR1")):
        with pytest.raises(ttrain.Stopped, match=rf"stopped by {name} (in epoch \d+ after step \d+ of 4|after "
                                                 rf"epoch \d+); ") as stopped:
            train(run_id, spec, results=tmp_path / "stopped", **kw)
        assert stopped.value.signum == getattr(signal, name), info
        epoch, step = divmod(k + 1, 4)
        newest = checkpoint.list_states(Layout(tmp_path / "stopped").states(run_id))[-1]
        assert checkpoint.state_position(newest) == (epoch, step), f"{info}: {newest.name}"
        calls["n"] = k + 1  # the resumed call does not repeat the steps before
    paths = train(run_id, spec, results=tmp_path / "stopped", **kw)
    for k in stops:
        epoch, step = divmod(k + 1, 4)
        assert f"resuming after epoch {epoch}" + (f", step {step}" if step else "") in caplog.text, info
    a, b = checkpoint.load(paths.model), checkpoint.load(reference.model)
    for part in ("model", "learners"):
        flat_a = {(n, k): v for n, sd in (a[part].items() if part == "learners" else [("", a[part])]) for k, v in sd.items()}
        flat_b = {(n, k): v for n, sd in (b[part].items() if part == "learners" else [("", b[part])]) for k, v in sd.items()}
        assert flat_a.keys() == flat_b.keys() and all(torch.equal(flat_a[k], flat_b[k]) for k in flat_a), info
    assert _curves_without_times(paths.curves) == _curves_without_times(reference.curves), info
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers  # ours were there only while training


def _wait_for_line(proc, log: Path, pattern: re.Pattern, timeout: float = 300) -> re.Match:
    end = time.monotonic() + timeout
    while True:
        found = pattern.search(log.read_text()) if log.exists() else None
        if found:
            return found
        assert proc.poll() is None, f"ended before {pattern.pattern!r}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < end, f"no {pattern.pattern!r} in time:\n{log.read_text()[-3000:]}"
        time.sleep(0.02)


def test_signals_through_tradeoff_train_at_random_steps_then_rerun_is_bit_identical(tmp_path, monkeypatch):
    """`tradeoff -v train` as SLURM runs it: SIGTERM, then (started again) SIGUSR1, each sent once the process has
    logged a randomly chosen step (an event, not a delay); each time it exits with 128 + the signal and one line
    naming the state it saved; the third start finishes bit-identical to an uninterrupted run."""
    overlay = "scale_map: {epochs: 4, train_examples: 512}\n"  # 8 steps per epoch
    reference, stopped = _copy(tmp_path, "reference", overlay), _copy(tmp_path, "stopped", overlay)
    assert _cli(reference, monkeypatch, "train", "--run", AT) == 0
    rng = random.Random(SEED + 2)
    state_dir = results_of(stopped).states(AT)
    cmd = ["tradeoff", "-v", *_cmd(stopped, "train", "--run", AT)[1:]]
    moments, done = [], 0  # steps done so far (the position of the newest state)
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        g = rng.randint(done, 20 if sig == signal.SIGTERM else 29)  # a step (0-based, of 32) that this start runs
        epoch, step = g // 8 + 1, g % 8 + 1
        log = tmp_path / f"{sig.name}.log"
        # the trainer holds after that step until a stop signal (TRADEOFF_HOLD_AFTER_STEP): no race with its speed
        proc = _start(cmd, stopped, log, TRADEOFF_HOLD_AFTER_STEP=f"{epoch}:{step}")
        _wait_for_line(proc, log, re.compile(rf"{AT}: holding after epoch {epoch} step {step} until a stop signal"))
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == 128 + sig, log.read_text()[-3000:]
        text = log.read_text()
        last = text.strip().splitlines()[-1]
        assert re.match(rf"tradeoff: run {AT}: stopped by {sig.name} (in epoch \d after step \d of 8|after epoch \d); "
                        rf"its state is saved in \S+: the same command resumes it there$", last), last
        assert "Traceback" not in text
        position = checkpoint.state_position(checkpoint.list_states(state_dir)[-1])
        assert position >= (epoch - 1, step), (position, epoch, step, SEED)  # the step it reached, not the epoch
        moments.append((sig.name, epoch, step, position))
        done = position[0] * 8 + position[1]
    out = run(cmd, stopped)
    epochs_done, steps_done = moments[-1][3]
    assert f"resuming after epoch {epochs_done}" + (f", step {steps_done}" if steps_done else "") in out.stderr
    info = f"seed {SEED}: {moments}"
    assert _same_weights(results_of(stopped).run(AT).model, results_of(reference).run(AT).model), info
    assert _curves_without_times(results_of(stopped).run(AT).curves) == \
        _curves_without_times(results_of(reference).run(AT).curves), info


# ------------------------------------------------------------------------------------------- checkpoints


def test_corrupt_or_truncated_newest_state_resumes_from_the_previous_one(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    work, paths, reference = _trained_three_epochs(tmp_path, monkeypatch)
    for damage in ("flip", "truncate"):
        shutil.rmtree(paths.curves)
        newest = checkpoint.list_states(paths.state)[-1]
        assert _epoch(newest) == 3
        if damage == "flip":
            content = bytearray(newest.read_bytes())
            content[len(content) // 3] ^= 0x55
            newest.write_bytes(bytes(content))
        else:
            os.truncate(newest, newest.stat().st_size // 2)
        caplog.clear()
        assert _cli(work, monkeypatch, "train", "--run", NT) == 0
        assert f"{newest.name} does not match its checksum" in caplog.text, damage
        assert "resuming after epoch 2" in caplog.text, damage
        assert _same_weights(paths.model, reference), damage
        # the damaged state was replaced, not kept beside its successor (it would outlive the good epoch 2)
        assert [_epoch(p) for p in checkpoint.list_states(paths.state)] == [2, 3], damage
        paths.model.unlink()


def test_states_of_other_settings_are_discarded_not_resumed(tmp_path, caplog):
    """The config changed and Snakemake retrains the run: the old run's states must not be resumed."""
    catalog = _spec(epochs=2)
    kw = dict(data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")), progress=False)
    old = catalog.runs[NT]
    new = old.replace(lr=Schedule(epochs=(0, 2), values=(0.05, 0.05)))
    train(NT, old, results=tmp_path / "changed", **kw)
    paths = train(NT, new, results=tmp_path / "changed", **kw)
    assert "were written with other settings; discarding them" in caplog.text
    assert _same_weights(paths.model, train(NT, new, results=tmp_path / "fresh", **kw).model)


def test_checkpoint_with_a_pickle_payload_is_refused_by_tradeoff_evaluate(tmp_path):
    work = _copy(tmp_path)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    model = work / "results" / "smoke" / "checkpoints" / NT / "model.pt"
    model.parent.mkdir(parents=True)
    torch.save({"model": {}, "meta": Payload()}, model)
    out = run(_cmd(work, "evaluate", "--run", NT, "--attack", "clean"), work, check=False)
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if line.startswith("tradeoff:")]
    assert lines == [line for line in out.stderr.splitlines() if line.strip()][-1:], out.stderr  # one line, last
    assert f"cannot load checkpoint {Path('results/smoke/checkpoints') / NT / 'model.pt'}: it carries pickled " \
           "Python objects (posix.system), not only tensors: refused, nothing in it was run" in lines[0], lines
    assert "weights_only" not in out.stderr and "Traceback" not in out.stderr  # never PyTorch's advice to run it
    assert not marker.exists(), "the payload ran"
    assert not results_of(work).metrics(NT, "clean").exists()


def _bad_model(kind: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        torch.save({"model": {"w": torch.zeros(1000)}, "meta": "{}"}, path)
        os.truncate(path, path.stat().st_size // 2)
    elif kind == "not a checkpoint":
        path.write_text("model weights, honest\n" * 10)
    elif kind == "other keys":
        torch.save({"state_dict": {"w": torch.zeros(3)}}, path)
    elif kind == "not a dict":
        torch.save([torch.zeros(3)], path)
    elif kind == "bad meta":
        torch.save({"model": {}, "meta": "{not json"}, path)
    elif kind == "other weights":
        torch.save({"model": {"w": torch.zeros(3)}, "meta": json.dumps({
            "run": NT, "spec": {"arch": "small_cnn", "bn_running_stats": True, "dataset": "digits"},
            "num_classes": 10, "in_channels": 1, "image_size": 8, "selected_epoch": 1})}, path)


BAD_MODELS = {  # what the one line must say after the file's name
    "empty": ": the file is empty (0 bytes)",
    "truncated": ": it is truncated: a PyTorch checkpoint cut short (",
    "not a checkpoint": ": it is not a checkpoint: neither a PyTorch archive (zip) nor a pickle (it begins with b'model we'",
    "other keys": " is not a model written by `tradeoff train`: it holds keys ['state_dict']; a model.pt holds 'model' "
                  "and 'meta'",
    "not a dict": " is not a model written by `tradeoff train`: it holds a list",
    "bad meta": ": its metadata ('meta') is not that of a model written by `tradeoff train` (JSONDecodeError",
    "other weights": ": its weights do not fit its architecture 'small_cnn': missing [",
}


@pytest.mark.parametrize("kind", list(BAD_MODELS))
def test_a_bad_model_file_is_one_clear_line_naming_it(kind, tmp_path, monkeypatch, capsys):
    work = _copy(tmp_path)
    model = results_of(work).model(NT)
    _bad_model(kind, model)
    assert _cli(work, monkeypatch, "evaluate", "--run", NT, "--attack", "clean") == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    shown = str(model.relative_to(work))
    assert len(err) == 1 and err[0].startswith("tradeoff: CheckpointError: "), err
    assert f"{shown}{BAD_MODELS[kind]}" in err[0], err
    assert "weights_only" not in err[0] and not err[0].rstrip().endswith(":"), err


def test_outputs_get_the_usual_file_permissions(tmp_path):
    path = tmp_path / "x.pt"
    checkpoint.save({"a": torch.ones(1)}, path)
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0600: others in the group read it


# ------------------------------------------------------------------------------------------- NaN / Inf


def _spec(**scale_map):
    config = tcfg.load_config([tcfg.ROOT / f for f in SMOKE])
    config["scale_map"].update(scale_map)
    return tcfg.resolve(config)


def _poison(monkeypatch, steps):
    """Make the given global training steps (0-based, counted over the run) see NaN images."""
    import tradeoff.training.train as ttrain

    real = ttrain.augment
    calls = {"n": 0}

    def augment(x, *args, **kwargs):
        out = real(x, *args, **kwargs)
        calls["n"] += 1
        return out * float("nan") if calls["n"] - 1 in steps else out

    monkeypatch.setattr(ttrain, "augment", augment)


def test_nonfinite_skip_undoes_the_step_and_logs_it(tmp_path, monkeypatch, caplog):
    catalog = _spec(epochs=2)
    spec = catalog.runs[NT].replace(nonfinite="skip")  # 256 images, batch 64: 4 steps per epoch
    _poison(monkeypatch, {1, 6})
    paths = train("skippy", spec, results=tmp_path, data_root=catalog.data_root,
                  runtime=Runtime(torch.device("cpu")), progress=False)
    assert "run skippy: non-finite loss (nan) at epoch 1, step 2; the step was skipped" in caplog.text
    assert "at epoch 2, step 3; the step was skipped" in caplog.text
    weights = _weights(paths.model)
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())
    for state in checkpoint.list_states(paths.state):
        model = checkpoint.load(state)["method"]["model"]
        assert all(torch.isfinite(v).all() for v in model.values() if v.is_floating_point())


def test_an_epoch_of_nonfinite_steps_stops_and_checkpoints_nothing_nonfinite(tmp_path, monkeypatch):
    catalog = _spec(epochs=3)
    spec = catalog.runs[NT].replace(nonfinite="skip", selection=catalog.runs[NT].selection.replace(mode="best"))
    _poison(monkeypatch, set(range(4, 8)))  # every step of epoch 2
    with pytest.raises(NonFiniteLoss, match="run allnan: every step of epoch 2 had a non-finite loss"):
        train("allnan", spec, results=tmp_path, data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")),
              progress=False)
    paths = Layout(tmp_path).run("allnan")
    assert not paths.model.exists()
    assert [_epoch(p) for p in checkpoint.list_states(paths.state)] == [1]
    best = checkpoint.load(checkpoint.list_states(paths.state)[0])["best"]
    assert best["epoch"] == 1 and all(torch.isfinite(v).all() for v in best["model"].values()
                                      if v.is_floating_point())


# ------------------------------------------------------------------------------------------- disk, permissions


def test_disk_full_stops_with_a_clear_error_and_keeps_the_previous_state(tmp_path, monkeypatch):
    """ENOSPC from fsync (delayed allocation) on the third epoch's state; then the disk has room again."""
    catalog = _spec(epochs=3)
    spec = catalog.runs[NT]
    kw = dict(data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")), progress=False)
    reference = train(NT, spec, results=tmp_path / "reference", **kw)
    paths = Layout(tmp_path / "full").run(NT)
    real_fsync = os.fsync

    def fsync(fd):  # the states' folder only: the curves' files (written before the state) have room
        target = os.readlink(f"/proc/self/fd/{fd}")
        if (len(checkpoint.list_states(paths.state)) == 2 and os.path.isfile(target)
                and Path(target).parent == paths.state):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(checkpoint.WriteError, match=r"cannot write .*epoch-0003-\w+\.pt: No space left on device; "
                                                    r".*states already in .* are intact"):
        train(NT, spec, results=tmp_path / "full", **kw)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert [_epoch(p) for p in checkpoint.list_states(paths.state)] == [1, 2]
    assert all(checkpoint.verify(p) for p in checkpoint.list_states(paths.state))
    assert not [p for p in paths.state.iterdir() if p.name.endswith(".tmp")] and not paths.model.exists()
    train(NT, spec, results=tmp_path / "full", **kw)
    assert _same_weights(paths.model, reference.model)


def _mount(*args: str) -> bool:
    return os.geteuid() == 0 and subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    # an epoch state of the smoke CNN is about 0.5 MB and the kept resolved catalog 0.4 MB: room for two states,
    # not three
    if not _mount("-t", "tmpfs", "-o", "size=1400k", "tmpfs", str(mnt)):
        pytest.skip("needs root and permission to mount a tmpfs")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_really_full_disk_then_more_room_resumes(tmp_path, small_tmpfs, monkeypatch, caplog, capsys):
    caplog.set_level(logging.INFO)
    overlay = f"paths: {{results: {small_tmpfs}}}\nscale_map: {{epochs: 4}}\n"
    work = _copy(tmp_path, overlay=overlay)
    assert _cli(work, monkeypatch, "train", "--run", NT) == 1  # one clear line, no traceback
    assert re.search(r"tradeoff: WriteError: .*No space left on device; .* are intact", capsys.readouterr().err)
    state_dir = small_tmpfs / "smoke" / "work" / NT
    kept = checkpoint.list_states(state_dir)
    assert kept and all(checkpoint.verify(p) for p in kept)
    assert not [p for p in state_dir.iterdir() if p.name.endswith(".tmp")]
    assert _mount("-o", "remount,size=20m", str(small_tmpfs))
    assert _cli(work, monkeypatch, "train", "--run", NT) == 0
    assert f"resuming after epoch {_epoch(kept[-1])}" in caplog.text
    reference = _copy(tmp_path, "reference", "scale_map: {epochs: 4}\n")
    assert _cli(reference, monkeypatch, "train", "--run", NT) == 0
    assert _same_weights(small_tmpfs / "smoke" / "checkpoints" / NT / "model.pt",
                         results_of(reference).run(NT).model)


def test_read_only_results_folder_is_a_clear_error_and_touches_nothing(tmp_path, monkeypatch, caplog, capsys):
    caplog.set_level(logging.INFO)
    work, paths, reference = _trained_three_epochs(tmp_path, monkeypatch)
    checkpoint.list_states(paths.state)[-1].unlink()  # the run must write epoch 3 again
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    if not (_mount("--bind", str(work / "results"), str(readonly))
            and _mount("-o", "remount,bind,ro", str(readonly))):
        subprocess.run(["umount", str(readonly)], capture_output=True)
        pytest.skip("needs root and permission to bind-mount read-only")
    try:
        before = _tree(work / "results")
        (work / "config" / "fault.yaml").write_text(f"paths: {{results: {readonly}}}\nscale_map: {{epochs: 3}}\n")
        assert _cli(work, monkeypatch, "train", "--run", NT) == 1  # one clear line, no traceback
        assert re.search(r"tradeoff: WriteError: .*cannot write .*/\.lock: Read-only file system", capsys.readouterr().err)
        assert _tree(work / "results") == before
    finally:
        subprocess.run(["umount", str(readonly)], capture_output=True)
    (work / "config" / "fault.yaml").write_text("scale_map: {epochs: 3}\n")
    caplog.clear()
    assert _cli(work, monkeypatch, "train", "--run", NT) == 0
    assert "resuming after epoch 2" in caplog.text
    assert _same_weights(paths.model, reference)


# ------------------------------------------------------------------------------------------- bad configs

BAD_FOR_SNAKEMAKE = {  # overlay -> what the message must say (the key, and the allowed values); one per layer
    # the catalog's registries
    "attacks:\n  pgd20: {type: deepfool}\n": ["attacks.pgd20.type: unknown attack 'deepfool'; allowed: ['"],
    "runs:\n  cifar10-resnet18-nt: {lr: {epochs: [0, 40, 60], values: [0.1, 0.01]}}\n":
        ["runs.cifar10-resnet18-nt.lr: 3 breakpoints (epochs) but 2 values"],
    # the JSON schema (check-config's one line, through Snakemake too: the key, the allowed keys, the closest)
    "runs:\n  cifar10-resnet18-nt: {epoch: 3}\n": ["runs.cifar10-resnet18-nt.epoch: unknown key(s) ['epoch']",
                                                   "did you mean 'epochs'?"],
    # the YAML loader (Snakemake's own keeps the last of two equal keys; the check in common.smk does not)
    "runs:\n  cifar10-resnet18-nt: {seed: 1}\n  cifar10-resnet18-nt: {seed: 2}\n":
        ["duplicate key 'cifar10-resnet18-nt' at line 3"],
}

BAD_FOR_CLI = {
    "runs:\n  cifar10-resnet18-nt:\n    method: {name: madry}\n": "runs.cifar10-resnet18-nt.method.name: unknown method "
                                                               "'madry'; allowed: ['",
    "runs:\n  cifar10-resnet18-nt: {dataset: imagenet}\n": "runs.cifar10-resnet18-nt.dataset: unknown value 'imagenet'; "
                                                          "allowed: ['",
    "runs:\n  cifar10-resnet18-nt: {arch: vgg16}\n": "runs.cifar10-resnet18-nt.arch: unknown value 'vgg16'; allowed: ['",
    "runs:\n  cifar10-resnet18-nt: {epoch: 3}\n": "runs.cifar10-resnet18-nt.epoch: unknown key(s) ['epoch']; allowed: [",
    "attacks:\n  pgd20: {eps: 3.0}\n": "attacks.pgd20.eps: eps 3 is absurd for the linf norm",
    "attacks:\n  pgd20: {eps: -0.1}\n": "attacks.pgd20.eps",
    "attacks:\n  pgd20: {type: deepfool}\n": "attacks.pgd20.type: unknown attack 'deepfool'; allowed: ['",
    "runs:\n  cifar10-resnet18-nt: {lr: {epochs: [0, 60, 40], values: [0.1, 0.01, 0.001]}}\n":
        "runs.cifar10-resnet18-nt.lr.epochs: breakpoints must be strictly increasing",
    "runs:\n  cifar10-resnet18-nt: {seed: one}\n": "runs.cifar10-resnet18-nt.seed",
    "runs:\n  cifar10-resnet18-nt: {seed: 1.5}\n": "runs.cifar10-resnet18-nt.seed: 1.5 is not of type 'integer'",
    "runs:\n  cifar10-resnet18-nt: {lr: {epochs: [0, 40, 60], values: [0.1, 0.01]}}\n":
        "runs.cifar10-resnet18-nt.lr: 3 breakpoints (epochs) but 2 values",
    "targets:\n  table1a:\n    rows: [{key: nt, run: no-such-run}]\n": "unknown run 'no-such-run'",
    "runs:\n  cifar10-resnet18-nt: {seed: 1}\n  cifar10-resnet18-nt: {seed: 2}\n": "duplicate key 'cifar10-resnet18-nt'",
}


def _fake_slurm(folder: Path) -> Path:
    """sbatch, squeue, sacct, ... that only record that they were called."""
    folder.mkdir()
    for tool in ("sbatch", "squeue", "sacct", "scontrol", "sinfo", "sacctmgr", "sshare", "srun"):
        path = folder / tool
        path.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {folder}/calls\nexit 1\n")
        path.chmod(0o755)
    return folder


def test_bad_configs_stop_snakemake_before_any_job_is_submitted(tmp_path):
    work = _copy(tmp_path)
    sentinel = work / "results" / "smoke" / "metrics" / NT / "clean.json"
    sentinel.parent.mkdir(parents=True)
    sentinel.write_text('{"accuracy": 0.5}\n')
    before = _tree(work / "results")
    fake = _fake_slurm(tmp_path / "fake-slurm")
    overlays = {}
    for i, text in enumerate(BAD_FOR_SNAKEMAKE):
        overlays[text] = f"config/bad{i}.yaml"
        (work / overlays[text]).write_text(text)
    environment = env()
    environment["PATH"] = f"{fake}{os.pathsep}{environment['PATH']}"
    environment["SLURM_CONF"] = str(tmp_path / "no-such-slurm.conf")

    def snakemake(text):
        cmd = ["snakemake", "--profile", "slurm", "table1", "--configfile", "config/smoke.yaml", overlays[text]]
        return subprocess.run(cmd, cwd=work, env=environment, capture_output=True, text=True, timeout=300)

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = dict(zip(BAD_FOR_SNAKEMAKE, pool.map(snakemake, BAD_FOR_SNAKEMAKE)))
    for text, expected in BAD_FOR_SNAKEMAKE.items():
        out = outcomes[text]
        assert out.returncode != 0, text
        for fragment in expected:
            assert fragment in out.stdout + out.stderr, f"{text!r}: no {fragment!r} in\n{out.stderr[-3000:]}"
    calls = (fake / "calls").read_text().splitlines() if (fake / "calls").exists() else []
    assert not [c for c in calls if c.split()[0] in ("sbatch", "srun")], calls  # nothing was submitted
    assert _tree(work / "results") == before                             # results untouched


@pytest.mark.parametrize("text", list(BAD_FOR_CLI))
def test_bad_configs_are_refused_by_every_cli_command(text, tmp_path, monkeypatch, capsys):
    work = _copy(tmp_path, overlay=text)
    for args in (["check-config"], ["train", "--run", NT], ["evaluate", "--run", NT, "--attack", "clean"]):
        assert _cli(work, monkeypatch, *args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("tradeoff: configuration error:") and BAD_FOR_CLI[text] in err, err
    assert not (work / "results").exists()


BAD_VALUES = {  # overlay -> the one line of `tradeoff check-config` (after "configuration error: "); every numeric
    # setting is checked at config time: run settings by the schema, methods' and attacks' parameters by the ranges
    # their classes declare (tradeoff.core.ranges), and no number anywhere may be NaN or infinite
    "attacks:\n  pgd20: {eps: .nan}\n": "attacks.pgd20.eps: must be a finite number, got nan",
    "attacks:\n  pgd20: {step_size: .inf}\n": "attacks.pgd20.step_size: must be a finite number, got inf",
    "runs:\n  cifar10-resnet18-nt: {lr: {epochs: [0, 40], values: [-0.1, 0.01]}}\n":
        "runs.cifar10-resnet18-nt.lr.values.0: -0.1 is less than the minimum of 0",
    "scale_map: {lr: {epochs: [0, 10], values: [0.1, -0.01]}}\n": "scale_map.lr",
    "runs:\n  cifar10-resnet18-nt: {optimizer: {name: sgd, weight_decay: -0.0005}}\n":
        "runs.cifar10-resnet18-nt.optimizer.weight_decay: -0.0005 is less than the minimum of 0",
    "runs:\n  cifar10-resnet18-nt: {optimizer: {name: adam, betas: [0.9, 1.0]}}\n": "optimizer.betas.1",
    "runs:\n  cifar10-resnet18-generalist:\n    method: {gamma: {epochs: [0, 120], values: [1.5, 0.0]}}\n":
        "runs.cifar10-resnet18-generalist.method.gamma.values[0]: must be a number in [0, 1], got 1.5",
    "runs:\n  cifar10-resnet18-generalist:\n    method: {nt_optimizer: {name: sgd, weight_decay: -1}}\n":
        "runs.cifar10-resnet18-generalist.method.nt_optimizer.weight_decay: must be a number >= 0, got -1",
    "runs:\n  cifar10-resnet18-trades-lambda6:\n    method: {lam: -6}\n":
        "runs.cifar10-resnet18-trades-lambda6.method.lam: must be a number >= 0, got -6",
    "runs:\n  cifar10-resnet18-caat-gamma1:\n    method: {gamma: 1.5}\n":
        "runs.cifar10-resnet18-caat-gamma1.method.gamma: must be a number in [-1, 1], got 1.5",
    "runs:\n  cifar10-resnet18-vanilla-lambda0:\n    method: {lam: 2}\n":
        "runs.cifar10-resnet18-vanilla-lambda0.method.lam: must be a number in [0, 1], got 2",
    "runs:\n  cifar10-resnet18-at-beta1:\n    method: {beta: -0.5}\n":
        "runs.cifar10-resnet18-at-beta1.method.beta: must be a number in [0, 1], got -0.5",
    "runs:\n  cifar10-resnet18-iat:\n    method: {alpha: 0}\n":
        "runs.cifar10-resnet18-iat.method.alpha: must be a number > 0, got 0",
    "runs:\n  cifar10-resnet18-fat:\n    method: {tau_values: [0, 1.5, 2]}\n":
        "runs.cifar10-resnet18-fat.method.tau_values[1]: must be an integer >= 0, got 1.5",
    "attacks:\n  pgd20: {steps: 0}\n": "attacks.pgd20.steps: 0 is less than the minimum of 1",
    "attacks:\n  mim: {momentum: -1}\n": "attacks.mim.momentum: must be a number >= 0, got -1",
    "attacks:\n  apgd_ce: {rho: 1.5}\n": "attacks.apgd_ce.rho: must be a number in (0, 1), got 1.5",
    "attacks:\n  square: {p_init: 0}\n": "attacks.square.p_init: must be a number in (0, 1], got 0",
    "attacks:\n  apgd_t: {target_classes: 0}\n": "attacks.apgd_t.target_classes: must be an integer >= 1, got 0",
    "train_attacks:\n  pgd10: {type: pgd, restarts: 0}\n": "train_attacks.pgd10.restarts: 0 is less than the minimum of 1",
    # a misspelt choice of a method's or an attack's parameter (declared once, tradeoff.core.params): the key and the closest
    "runs:\n  cifar10-resnet18-generalist:\n    method: {attack_mode: evl}\n":
        "runs.cifar10-resnet18-generalist.method.attack_mode: must be one of ['train', 'eval'], got 'evl'; did you mean 'eval'?",
    "runs:\n  cifar10-resnet18-generalist:\n    method: {communication: epochs}\n":
        "runs.cifar10-resnet18-generalist.method.communication: must be one of ['epoch', 'iteration'], got 'epochs'; "
        "did you mean 'epoch'?",
    "runs:\n  cifar10-resnet18-generalist:\n    method: {nt_lr_schedule: scaledd}\n":
        "runs.cifar10-resnet18-generalist.method.nt_lr_schedule: must be one of ['scaled', 'constant', 'at'], got "
        "'scaledd'; did you mean 'scaled'?",
    "runs:\n  cifar10-resnet18-fat:\n    method: {random_start: uniformm}\n":
        "runs.cifar10-resnet18-fat.method.random_start: must be one of ['normal', 'uniform'], got 'uniformm'; did you "
        "mean 'uniform'?",
    "attacks:\n  pgd20: {loss: hinge}\n": "attacks.pgd20.loss: must be one of ['ce', 'cw', 'dlr'], got 'hinge'",
    # a YAML syntax error: the file, the line and the column
    "runs:\n  cifar10-resnet18-nt: {seed: 1\n  cifar10-resnet18-at-beta1: {seed: 2}\n":
        "config/fault.yaml:3:28: YAML syntax error: while parsing a flow mapping: did not find expected ',' or '}'",
    # an unknown id: the closest few, not all of them
    "targets:\n  table1a:\n    rows: [{key: at, run: cifar10-resnet18-at-bta1}]\n":
        "targets.table1a.rows[0].run: unknown run 'cifar10-resnet18-at-bta1'; did you mean 'cifar10-resnet18-at-beta1'",
    "targets:\n  table1a:\n    columns: {pgd: pgd2O}\n":
        "targets.table1a.columns.pgd: unknown attack 'pgd2O'; did you mean 'pgd20'",
    "targets:\n  table1:\n    targets: [table1a, table1bb]\n":
        "targets.table1.targets: unknown target 'table1bb'; did you mean 'table1b'",
}


@pytest.mark.parametrize("text", list(BAD_VALUES))
def test_every_bad_value_is_one_line_of_check_config(text, tmp_path, monkeypatch, capsys):
    work = _copy(tmp_path, overlay=text)
    assert _cli(work, monkeypatch, "check-config") == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("tradeoff: configuration error: "), err
    assert BAD_VALUES[text] in err[0], err
    assert len(err[0]) < 400, err  # the closest names, not the catalog's 264 runs


@pytest.mark.parametrize(("args", "expected"), [
    (["train", "--run", "cifar10-resnet18-at-beta11"], "--run: unknown run 'cifar10-resnet18-at-beta11'; did you mean "
                                                       "'cifar10-resnet18-at-beta1'"),
    (["evaluate", "--run", NT, "--attack", "pgd2O"], "unknown attack 'pgd2O'; did you mean 'pgd20'"),
    (["report", "table1c"], "unknown target 'table1c'; did you mean 'table1"),
    (["plan", "tabel1"], "unknown target 'tabel1'; did you mean 'table1'"),
    (["train", "--run", "zzz"], "--run: unknown run 'zzz'; nothing with a similar name ({runs} runs; `tradeoff list "
                                "runs` lists them)"),
])
def test_unknown_ids_name_the_closest_few(args, expected, tmp_path, monkeypatch, capsys):
    work = _copy(tmp_path)
    assert _cli(work, monkeypatch, *args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    expected = expected.replace("{runs}", str(len(tcfg.load_catalog([work / f for f in SMOKE]).runs)))
    assert len(err) == 1 and expected in err[0] and len(err[0]) < 400, err


def test_a_key_value_config_override_points_to_an_overlay(tmp_path, monkeypatch, capsys):
    work = _copy(tmp_path)
    monkeypatch.chdir(work)
    assert tcli.main(["--config", "config/config.yaml", "--config", "runtime={threads: 2}", "check-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--config takes a YAML file, not a key=value override ('runtime={threads: 2}'): put " \
        "`runtime: {threads: 2}` in an overlay file" in err[0], err
    # Snakemake's --config, likewise: not the schema's type error on the override's strings
    out = run(["snakemake", "-n", "--cores", "1", "--configfile", "config/smoke.yaml", "--config",
               "runtime={threads: 2}"], work, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "--config key=value overrides are not supported" in text \
        and "put the values in a YAML overlay" in text and "is not of type" not in text, text[-3000:]


def test_paper_scale_without_a_gpu_stops_unless_the_cpu_is_asked_for(tmp_path, monkeypatch, capsys):
    """`device: auto` would train a paper-scale run on the CPU for weeks on a node without a GPU: it stops at once."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    work = _copy(tmp_path)
    monkeypatch.chdir(work)
    assert tcli.main(["--config", "config/config.yaml", "train", "--run", NT]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runtime.device is 'auto' and no CUDA device is visible" in err[0] \
        and "`runtime: {device: cpu}`" in err[0], err
    assert not results_of(work, "paper").states(NT).exists()  # nothing started
    (work / "config" / "cpu.yaml").write_text("runtime: {device: cpu}\n")  # asked for: it goes on (to the data)
    assert tcli.main(["--config", "config/config.yaml", "--config", "config/cpu.yaml", "train", "--run", NT]) == 1
    assert "dataset 'cifar10' is not ready" in capsys.readouterr().err


def test_list_into_a_closed_pipe_ends_quietly(tmp_path):
    """`tradeoff list runs | head`: the reader goes away; no BrokenPipeError traceback."""
    work = _copy(tmp_path)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        proc = subprocess.run(_cmd(work, "list", "runs"), cwd=work, env=env(), stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_ctrl_c_is_one_line_interrupted(tmp_path):
    work = _copy(tmp_path, overlay=ENDLESS)
    log = tmp_path / "train.log"
    proc = _start(["tradeoff", "-v", *_cmd(work, "train", "--run", NT)[1:]], work, log)
    _wait_for_line(proc, log, re.compile(rf"{NT} epoch 1/\d+ step 2/\d+ done"))
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground process group
    assert proc.wait(timeout=120) == 130
    text = log.read_text()
    assert text.strip().splitlines()[-1] == "tradeoff: interrupted" and "Traceback" not in text, text[-3000:]


# ------------------------------------------------------------------------------------------- long evaluations


class _Noisy(torch.nn.Module):
    """A randomised defence: noise on the logits at every call, even in eval mode."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        logits = self.model(x)
        return logits + 0.5 * torch.randn_like(logits)


@pytest.fixture(scope="module")
def trained_nt(tmp_path_factory):
    """A workflow copy whose NT run trained 2 epochs; evaluations in 3 batches of 40 of 120 test digits."""
    work = workflow_copy(tmp_path_factory.mktemp("eval") / "w")
    (work / "config" / "fault.yaml").write_text("scale_map: {epochs: 2, test_examples: 120}\n"
                                                "runtime: {eval_batch_size: 40}\n")
    mp = pytest.MonkeyPatch()
    try:
        assert _cli(work, mp, "train", "--run", NT) == 0
    finally:
        mp.undo()
    return work


def test_evaluation_logs_its_progress_per_batch_and_per_autoattack_component(trained_nt, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("TRADEOFF_PROGRESS_SECONDS", "0")  # not a terminal: a line per update
    assert _cli(trained_nt, monkeypatch, "evaluate", "--run", NT, "--attack", "pgd20", "--attack", "aa") == 0
    text = caplog.text
    for b in (1, 2, 3):  # done/total, robust so far, images/s, ETA
        assert re.search(rf"pgd20: batch {b}/3 done, \d+ of {40 * b} images robust so far \(\d+\.\d%\), "
                         rf"\d+\.\d images/s, ETA \d+m\d\ds", text), text[-3000:]
        assert f"aa: batch {b}/3 done" in text
    for i, component in enumerate(("apgd-ce", "apgd-t", "fab-t", "square"), 1):
        assert re.search(rf"autoattack: component {i}/4 done, {component} on \d+ points: \d+ of \d+ still robust, "
                         rf"\d+\.\d s \(\d+\.\d images/s\), ETA \d+m\d\ds", text), component
    metrics = json.loads(results_of(trained_nt).metrics(NT, "aa").read_text())
    assert metrics["checks"] == [], metrics["checks"]  # a deterministic model: AutoAttack's checks pass
    assert "checks" not in json.loads(results_of(trained_nt).metrics(NT, "pgd20").read_text())


def test_autoattack_checks_flag_a_randomised_defence_in_the_log_and_the_metrics(trained_nt, monkeypatch, caplog):
    import tradeoff.evaluation.trained as ttrained

    real = ttrained.load
    monkeypatch.setattr(ttrained, "load",
                        lambda *a, **k: (lambda m, meta: (_Noisy(m).eval(), meta))(*real(*a, **k)))
    metrics = results_of(trained_nt).metrics(NT, "apgd_ce")
    assert _cli(trained_nt, monkeypatch, "evaluate", "--run", NT, "--attack", "apgd_ce", "--attack", "aa") == 0
    for name in ("apgd_ce", "aa"):
        checks = json.loads(results_of(trained_nt).metrics(NT, name).read_text())["checks"]
        assert any("it seems to be a randomized defense" in c for c in checks), (name, checks)
    assert "AutoAttack check: it seems to be a randomized defense" in caplog.text
    assert metrics.exists()


# ------------------------------------------------------------------------------------------- concurrency


def _default_sigint() -> None:
    """In the child: Ctrl-C's default disposition, as in a terminal. A test session started in the background of a
    non-interactive shell (`make test &`, some CI runners) ignores SIGINT, and its children inherit that: Python
    then never raises KeyboardInterrupt and DVC never stops."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(cmd, cwd, log: Path, **environment) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=cwd, env={**env(), **environment}, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_default_sigint)


def _wait_for_epoch(proc, state_dir, epoch, log, timeout=180):
    end = time.monotonic() + timeout
    while _newest_epoch(state_dir) < epoch:
        assert proc.poll() is None, f"ended early:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < end, f"timed out:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


SLOW_EPOCHS = 40
SLOW = f"scale_map: {{epochs: {SLOW_EPOCHS}, lr: {{epochs: [0, {SLOW_EPOCHS}], values: [0.1, 0.1]}}}}\n"
# A run that no test lets finish (hours of steps): a test that stops it mid-training once it has logged a step or
# written an epoch's state cannot lose the race to the run's end, however loaded the machine.
ENDLESS = SLOW.replace(str(SLOW_EPOCHS), "100000")


def _pause(proc: subprocess.Popen) -> None:
    """SIGSTOP a whole pipeline (its session's process group: Snakemake or DVC and the job it runs): it keeps every
    lock it holds and cannot finish, however long the next step of the test takes on a loaded machine."""
    os.killpg(proc.pid, signal.SIGSTOP)


def test_second_snakemake_in_the_same_folder_is_refused_and_a_killed_one_needs_unlock(tmp_path):
    work = _copy(tmp_path, overlay=SLOW)
    target = str(Layout.of("results", "smoke").run(AT).model)
    # the plain command of README (no --profile): the workflow's default profile (profiles/default) reruns what
    # the killed run left incomplete
    cmd = ["snakemake", target, "--cores", "1", "--configfile", "config/smoke.yaml", "config/fault.yaml"]
    first = _start(cmd, work, tmp_path / "first.log")
    try:
        _wait_for_epoch(first, work / "results" / "smoke" / "work" / AT, 1, tmp_path / "first.log")
        _pause(first)  # mid-training, holding Snakemake's lock and the run's training lock
        # a second Snakemake, and a second trainer of the same run (whoever starts it: DVC, by hand), at once
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            second, other = pool.map(lambda c: run(c, work, check=False), [cmd, _cmd(work, "train", "--run", AT)])
        assert first.poll() is None
        assert second.returncode != 0 and "Directory cannot be locked" in second.stdout + second.stderr
        assert other.returncode != 0 and "is locked by pid" in other.stderr and "already being trained" in other.stderr
    finally:  # then kill -9 the first Snakemake and its job (mid-job: its outputs are marked incomplete)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    stale = run(cmd, work, check=False)  # its lock stayed behind
    assert stale.returncode != 0 and "Directory cannot be locked" in stale.stdout + stale.stderr
    run(cmd + ["--unlock"], work)
    again = run(cmd, work)  # not IncompleteFilesException: the incomplete outputs are made again
    assert "workflow specific profile profiles/default" in again.stderr
    log = results_of(work).log("train", AT)
    assert "resuming after epoch" in log.read_text()  # Snakemake's log: the last start (it deletes the file first)
    # the history keeps the killed try: a header line per start, the first try's epochs before the resume
    lines = log_history(log).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(rf"=== \S+ \S+ start: tradeoff --log {log.relative_to(work)} "
                                                          rf"(?:.* )?train --run {AT} \(pid \d+ on \S+\) ===$", line)]
    assert len(starts) == 2, lines
    assert f"{AT} epoch 1/{SLOW_EPOCHS}" in "\n".join(lines[starts[0]:starts[1]]), lines
    assert "resuming after epoch" in "\n".join(lines[starts[1]:]), lines
    curves = read_curves(results_of(work).run(AT).curves)
    assert len(curves) == SLOW_EPOCHS and checkpoint.load(work / target)["model"]


def test_second_dvc_repro_in_the_same_folder_is_refused(tmp_path):
    work = _copy(tmp_path, overlay=ENDLESS)
    os.symlink(Path(tcfg.ROOT) / "src", work / "src")
    run(["git", "init", "-q"], work)
    run(["dvc", "init", "-q"], work)
    run(_cmd(work, "export-dvc"), work)
    stage = f"train-pgd_at@{AT}"  # the template of the run's method
    first = _start(["dvc", "repro", stage], work, tmp_path / "first.log")
    try:
        _wait_for_epoch(first, work / "results" / "smoke" / "work" / AT, 1, tmp_path / "first.log")
        _pause(first)  # mid-training, holding DVC's lock: it cannot finish while the second one starts
        second = run(["dvc", "repro", stage], work, check=False)
        message = second.stdout + second.stderr  # DVC's lock on the stage's files: it names the holder
        assert second.returncode != 0 and "it is being blocked by" in message and "rwlock" in message, message
        assert first.poll() is None
    finally:
        os.killpg(first.pid, signal.SIGINT)  # DVC stops and releases its lock (kill -9 would leave it behind),
        os.killpg(first.pid, signal.SIGCONT)  # once it runs again
        first.wait(timeout=120)
    assert not results_of(work).run(AT).model.exists()  # nothing half-made became an output


# ------------------------------------------------------------------------------------------- download


def test_interrupted_then_corrupted_download_through_tradeoff_download(tmp_path, monkeypatch):
    from test_data import flip_byte, serve  # the fakes of tests/test_data.py

    from tradeoff import data

    written, downloads = serve("mnist", tmp_path, monkeypatch, corrupt_deliveries=0)
    work = _copy(tmp_path, overlay=f"paths: {{data: {tmp_path / 'data'}}}\n")
    marker = ready_marker(tmp_path / "data", "mnist")
    first = next(iter(written.served))

    def interrupted(url, root, filename=None, md5=None, max_redirect_hops=3):
        filename = filename or os.path.basename(url)
        if filename == first:  # the connection (or the process) dies half-way through the first file
            Path(root).mkdir(parents=True, exist_ok=True)
            Path(root, filename).write_bytes(written.served[filename].read_bytes()[:100])
            raise KeyboardInterrupt
        return downloads(url, root, filename, md5, max_redirect_hops)

    import torchvision.datasets.utils as tv_utils

    monkeypatch.setattr(tv_utils, "download_url", interrupted)
    assert _cli(work, monkeypatch, "download", "mnist") == 130  # "tradeoff: interrupted", as after Ctrl-C
    assert not marker.exists()  # Snakemake's `download` output: nothing downstream starts
    monkeypatch.setattr(tv_utils, "download_url", downloads)
    assert _cli(work, monkeypatch, "download", "mnist") == 0  # the partial file fails its checksum: fetched again
    assert marker.exists() and data.is_downloaded("mnist", tmp_path / "data")
    assert first in downloads.calls

    victim = next(p for p in (tmp_path / "data" / "mnist").rglob("*") if p.is_file() and p.suffix != ".gz")
    flip_byte(victim)
    downloads.calls.clear()
    assert _cli(work, monkeypatch, "download", "mnist") == 0
    assert data.is_downloaded("mnist", tmp_path / "data") and downloads.calls
