"""Training: learns, checkpoints every epoch, resumes bit-identically after kill -9, stops on NaN."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
import torch
from helpers import ROOT, env, results_of, workflow_copy

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.storage import checkpoint
from tradeoff.storage.curves import CLOCKED, CurveLog, read_curves, read_ran_on, read_summary
from tradeoff.storage.layout import Layout
from tradeoff.storage.provenance import device_name, read_sidecar, training_epochs
from tradeoff.training.train import CURVE_FIELDS, NonFiniteLoss, augment, train

SMOKE = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]


def _catalog(digits_eps=None, **scale_map):
    config = cfg.load_config(SMOKE)
    config["scale_map"].update(scale_map)
    if digits_eps is not None:
        config["datasets"]["digits"]["linf"] = digits_eps
    return cfg.resolve(config)


def _train(catalog, run_id, results, **kw):
    return train(run_id, catalog.runs[run_id], results=results, data_root=catalog.data_root,
                 runtime=Runtime(torch.device("cpu")), eval_batch_size=200, progress=False, **kw)


def _weights(path):
    return checkpoint.load(path)["model"]


def test_nt_and_at_learn_and_write_outputs(tmp_path):
    # at eps 0.1 PGD-AT learns digits in a few epochs (at 0.3 it first sits on a plateau for ~10 epochs)
    catalog = _catalog(digits_eps=0.1, epochs=6, train_examples=600, test_examples=200)
    for run_id in ("cifar10-resnet18-nt", "cifar10-resnet18-at-beta1"):
        paths = _train(catalog, run_id, tmp_path)
        model, meta = load_model(RunModel(paths.model))
        assert meta["run"] == run_id and not model.training
        rows = read_curves(paths.curves)
        assert [r["epoch"] for r in rows] == [1, 2, 3, 4, 5, 6] and set(CURVE_FIELDS) - set(CLOCKED) <= set(rows[0])
        assert rows[-1]["eval_clean"] > 0.5, f"{run_id} does not beat chance: {rows[-1]}"  # 10 classes
        summary = read_summary(paths.curves)  # dvc metrics: the last epoch's values and the selection's
        # mode best: the first epoch of the best clean + robust accuracy on the validation split
        scores = [r["eval_clean"] + r["eval_robust"] for r in rows]
        assert summary["eval_clean"] == rows[-1]["eval_clean"]
        assert summary["selected"]["epoch"] == scores.index(max(scores)) + 1 == meta["selected_epoch"]
        assert read_ran_on(paths.curves)["6"] == {"precision": "fp32"}
        # what the clock and the machine give is not in the curves (DVC outputs) but in the model's sidecar
        assert not {"seconds", "images_per_s", "device"} & set(rows[0]) and "seconds" not in summary
        epochs = training_epochs(paths.model)
        assert [e["epoch"] for e in epochs] == [1, 2, 3, 4, 5, 6] and all(e["seconds"] > 0 for e in epochs)
        assert epochs[-1]["device"] == device_name("cpu").replace(",", ";") and "provenance" not in meta
        assert read_sidecar(paths.model)["provenance"]["git_commit"]
        assert "ran_on" not in summary  # text, not a metric for `dvc exp show`
        assert len(checkpoint.list_states(paths.state)) == 2


def test_kill_and_resume_is_bit_identical(tmp_path):
    """kill -9 the training job at random moments, start it again each time: same final weights."""
    overlay = "scale_map: {epochs: 5, train_examples: 512}\n"
    reference = workflow_copy(tmp_path / "reference")
    killed = workflow_copy(tmp_path / "killed")
    for work in (reference, killed):
        (work / "config" / "resume.yaml").write_text(overlay)
    cmd = ["tradeoff", "--config", "config/config.yaml", "--config", "config/smoke.yaml", "--config",
           "config/resume.yaml", "train", "--run", "cifar10-resnet18-at-beta1"]
    subprocess.run(cmd, cwd=reference, env=env(), check=True, capture_output=True)

    state_dir = results_of(killed).states("cifar10-resnet18-at-beta1")
    kills = []
    for epoch in (2, 4):  # kill -9 inside this epoch, held after its second step (an event, not a delay)
        log = killed / f"train-{epoch}.log"
        with open(log, "w") as out:  # a progress line after every step
            proc = subprocess.Popen(cmd, cwd=killed, env={**env(), "TRADEOFF_HOLD_AFTER_STEP": f"{epoch}:2"},
                                    stdout=subprocess.DEVNULL, stderr=out)
        deadline = time.monotonic() + 300
        while proc.poll() is None and f"holding after epoch {epoch} step 2" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills.append(checkpoint.state_position(checkpoint.list_states(state_dir)[-1]))
    assert kills[0][0] >= 1 and kills[1][0] >= 3 and kills[1][0] < 5, kills  # both mid-training
    subprocess.run(cmd, cwd=killed, env=env(), check=True, capture_output=True)
    a = _weights(results_of(reference).run("cifar10-resnet18-at-beta1").model)
    b = _weights(results_of(killed).run("cifar10-resnet18-at-beta1").model)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # dvclive's files: what an uninterrupted run logged, byte for byte (but the timings)
    logged = [_logged(results_of(w).curves("cifar10-resnet18-at-beta1")) for w in (reference, killed)]
    assert logged[0] == logged[1] and len(logged[0]) > 5


TIMINGS = ("seconds", "images_per_s")


def _logged(folder) -> dict:
    files = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.tsv") if p.stem not in TIMINGS}
    summary = json.loads((folder / "metrics.json").read_text())
    return {**files, "metrics.json": {k: v for k, v in summary.items() if k not in TIMINGS}}


def test_curves_are_rewritten_from_the_resumed_state(tmp_path):
    """An epoch logged after the state a run resumes from (killed between the two) is not kept: the curves are those
    of the state's epochs, then of the epochs trained again, as if never interrupted."""
    rows = [{"epoch": e, "train_loss": 1.0 / e, "eval_robust": 0.1 * e if e % 2 == 0 else None} for e in (1, 2, 3)]
    CurveLog(tmp_path, rows).finish()
    log = CurveLog(tmp_path, rows[:2])
    assert read_curves(tmp_path) == rows[:2]
    log.epoch(rows[2])
    log.finish({"epoch": 2, "eval_robust": 0.2})
    assert read_curves(tmp_path) == rows
    summary = read_summary(tmp_path)
    assert summary["step"] == 3 and summary["train_loss"] == 1 / 3 and summary["selected"]["epoch"] == 2
    assert read_curves(tmp_path)[0]["eval_robust"] is None  # not measured at epoch 1: no point logged
    assert (tmp_path / "plots" / "metrics" / "eval_robust.tsv").read_text() == "step\teval_robust\n2\t0.2\n"


def test_nonfinite_loss_stops_with_run_epoch_and_step(tmp_path):
    catalog = _catalog()
    spec = catalog.runs["cifar10-resnet18-nt"]
    spec = spec.replace(lr=spec.lr.replace(values=(1e12,) * len(spec.lr.values)))  # diverges within a few steps
    with pytest.raises(NonFiniteLoss, match=r"run boom: non-finite loss .* at epoch 1, step \d+"):
        train("boom", spec, results=tmp_path, data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")),
              progress=False)
    assert not Layout(tmp_path).run("boom").model.exists()
    assert checkpoint.list_states(Layout(tmp_path).run("boom").state) == []


def test_best_selection_keeps_best_epoch(tmp_path):
    catalog = _catalog(epochs=3)
    spec = catalog.runs["cifar10-resnet18-nt"]
    spec = spec.replace(selection=spec.selection.replace(mode="best"))
    paths = train("sel", spec, results=tmp_path, data_root=catalog.data_root,
                  runtime=Runtime(torch.device("cpu")), progress=False)
    scores = [r["eval_clean"] + r["eval_robust"] for r in read_curves(paths.curves)]
    _, meta = load_model(RunModel(paths.model))
    assert meta["selected_epoch"] == 1 + scores.index(max(scores))


def test_augment_crop_and_flip_are_exact():
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).view(2, 1, 4, 4)
    gen = torch.Generator().manual_seed(0)
    out = augment(x, padding=1, flip=True, gen=gen)
    assert out.shape == x.shape
    for i in range(2):  # each output is a shifted (zero-padded) copy of its input, maybe mirrored
        padded = torch.nn.functional.pad(x[i], (1, 1, 1, 1))
        windows = [padded[:, dy:dy + 4, dx:dx + 4] for dy in range(3) for dx in range(3)]
        assert any(torch.equal(out[i], w) or torch.equal(out[i], w.flip(2)) for w in windows)
