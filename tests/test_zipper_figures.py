"""Zipper Figures 5 and 6: tracking Generalist's learners during training, snapshots of their weights, the
learner_tsne analysis and the curves / tsne figures, at the smoke scale (digits, small CNN, 2-4 epochs)."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from helpers import data_root, run, workflow_copy
from methods_support import CPU, SMOKE, TinyBN, build, digits
from PIL import Image

from tradeoff import analysis
from tradeoff import config as cfg
from tradeoff.attacks import from_spec
from tradeoff.attacks.loop import accuracy_under, batch_seed
from tradeoff.core.spec import CLEAN, AttackSpec, MethodSpec, RunSpec
from tradeoff.data import load_run_data, subset
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.methods.generalist import snapshot_epochs
from tradeoff.report.build import build_target
from tradeoff.storage import checkpoint
from tradeoff.storage.curves import read_curves
from tradeoff.storage.layout import Layout
from tradeoff.training import learner_probes as learners
from tradeoff.training.train import train

RUN = "cifar10-resnet18-generalist"
NEVER = 10**6  # a t' no run reaches
COLUMNS = ["learner_at_clean", "learner_nt_clean", "learner_nt_pgd_self", "learner_nt_pgd_from_at"]
KW = dict(data_root=data_root(), runtime=CPU, progress=False, eval_batch_size=32)


def _spec(epochs: int, *, track: bool = True, snapshots: list | None = None, **method) -> RunSpec:
    """The smoke-scale Table 1a Generalist run for ``epochs`` epochs, communicating after every epoch from
    epoch 2 on, with tracking on 40 test images (or off) and the given snapshot epochs (or none)."""
    spec = cfg.load_catalog(SMOKE).runs[RUN]
    m = {**spec.method.params, "t_prime": 2, "c": 1, **method}
    if track:
        m["track_learners"] = {**m["track_learners"], "examples": 40}
    else:
        del m["track_learners"]
    if snapshots is None:
        del m["snapshot_epochs"]
    else:
        m["snapshot_epochs"] = snapshots
    return spec.replace(epochs=epochs, train_examples=128, method=MethodSpec.from_dict({"name": spec.method.name, **m}))


def _curves(path) -> list[dict]:
    return read_curves(path)


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """A 3-epoch run with tracking and snapshots after epochs 1-3 (communication after epochs 2 and 3)."""
    spec = _spec(3, snapshots=[1, 2, 3])
    paths = train("g", copy.deepcopy(spec), results=tmp_path_factory.mktemp("tracked"), **KW)
    return spec, paths


# --------------------------------------------------------------------------------------- configuration


def test_catalog_turns_both_on_for_the_table1a_run_only():
    for files, epochs in ((["config/config.yaml"], [75, 80, 85, 90, 94, 100]),
                          (["config/config.yaml", "config/demo.yaml"], [6, 7, 8]),
                          (SMOKE, [1, 2])):
        catalog = cfg.load_catalog([cfg.ROOT / f for f in files])
        method = catalog.runs[RUN].method
        assert method.get("track_learners")["attack"] == catalog.attack_for("pgd20", RUN).as_dict()
        assert snapshot_epochs(method.get("snapshot_epochs")) == epochs  # epoch-valued: rescaled, then rounded
        assert list(catalog.targets["zipper_figure5"].curve_columns) == COLUMNS
        assert catalog.analysis_targets("zipper_figure6") == ["zipper_figure6"]
        assert catalog.analysis_train_ids("zipper_figure6") == [catalog.train_id[RUN]]
    # the options are optional parameters: a Generalist run that does not set them has no such keys, so
    # adding them changed no other run's settings
    assert not {"track_learners", "snapshot_epochs"} & set(catalog.runs["cifar10-wrn32-generalist"].method.params)


@pytest.mark.parametrize("method, message", [
    ({"track_learners": {"examples": 0, "attack": "pgd20"}}, r"track_learners\.examples: must be an integer >= 1, got 0"),
    ({"track_learners": {"examples": 10}}, r"track_learners\.attack: required"),
    ({"track_learners": {"examples": 10, "attack": "pgd20", "every": 2}}, r"track_learners\.every: unknown key of track_learners; allowed"),
    ({"track_learners": {"examples": 10, "attack": "pgd20", "attacked": ["global"]}}, r"track_learners\.attacked\[0\]: must be one of \['nt', 'at'\], got 'global'"),
    ({"track_learners": {"examples": 10, "attack": "no-such-attack"}},
     r"track_learners\.attack: unknown attack 'no-such-attack'"),
    ({"snapshot_epochs": [80, 130]}, r"snapshot_epochs \[130\] .* outside the run's epochs 1\.\.120"),
    ({"snapshot_epochs": "80"}, r"snapshot_epochs: must be null or a non-empty list"),
    ({"snapshots": [80]}, r"\.snapshots: unknown parameter of method 'generalist'; did you mean 'snapshot_epochs'\?"),
])
def test_bad_options_are_refused_naming_the_key(method, message):
    config = cfg.load_config([cfg.ROOT / "config" / "config.yaml"])
    config["runs"][RUN]["method"] = {k: v for k, v in config["runs"][RUN]["method"].items()
                                     if k not in ("track_learners", "snapshot_epochs")} | method
    with pytest.raises(cfg.ConfigError, match=rf"runs\.{RUN}\.method.*{message}"):
        cfg.resolve(config)


def test_the_learners_are_measured_on_the_validation_split_unless_the_run_says_test():
    """Zipper Figure 5's per-epoch measurements read the validation split (the tables' test images stay measured
    once, at the end); under `split: test`, or where the run holds none out (`selection.split: test`, the papers'
    practice), the test split, and the figure and the tables' note on the split say so."""
    from types import SimpleNamespace

    from tradeoff.report import what_ran as ran
    from tradeoff.report.table_notes import _selection_split_note
    from tradeoff.training.train import tracking_split

    def resolved(**change):
        config = cfg.load_config([cfg.ROOT / "config" / "config.yaml"])
        for key, value in change.items():
            block = config["runs"][RUN]["method"]["track_learners"] if key == "split" else config["runs"][RUN]
            block[key] = value if key == "split" else {**config["runs"][RUN].get(key, {}), **value}
        catalog = cfg.resolve(config)
        spec = catalog.runs[RUN]
        return catalog, tracking_split(spec, spec.method.get("track_learners")), ran.tracking_images(catalog, [RUN])

    row = SimpleNamespace(runs=[RUN], label="Generalist")
    catalog, split, images = resolved()
    assert catalog.runs[RUN].method.get("track_learners")["split"] == "validation"
    assert (split, images) == ("validation", "1,000 validation images, held out of training")
    assert _selection_split_note(catalog, [row]).endswith("measured once, at the end).")
    catalog, split, images = resolved(split="test")
    assert (split, images) == ("test", "1,000 test images (the images the tables measure)")
    assert _selection_split_note(catalog, [row]).endswith(
        "measured once, at the end, but for the learners' per-epoch curves (track_learners.split: test)).")
    catalog, split, images = resolved(selection={"split": "test"})
    assert (split, images) == ("test", "1,000 test images (the images the tables measure)")
    assert "the test images of these cells also chose the epoch" in _selection_split_note(catalog, [row])


@pytest.mark.parametrize("change, message", [
    ({"analysis": {"name": "learner_tsne", "embed": "features"}}, r"analysis\.embed: 'features' is not allowed"),
    ({"analysis": {"name": "learner_tsne", "examples": 1}}, r"analysis\.examples: expected an integer >= 2"),
    ({"analysis": {"name": "learner_tsne", "attack": "pgd7"}}, r"analysis\.attack: unknown attack 'pgd7'"),
    ({"analysis": {"name": "disagreement_grid", "right": "generalist", "wrong": "generalist", "attack": "pgd20"}},
     r"analysis: a `tsne` figure reads a learner_tsne analysis"),
])
def test_bad_tsne_targets_are_refused(change, message):
    config = cfg.load_config([cfg.ROOT / "config" / "config.yaml"])
    config["targets"]["zipper_figure6"].update(change)
    with pytest.raises(cfg.ConfigError, match=rf"targets\.zipper_figure6\.{message}"):
        cfg.resolve(config)


# ------------------------------------------------------------------------------------------ tracking


def test_measuring_leaves_modes_gradients_and_rng_as_they_were():
    method = build("generalist", model=TinyBN)
    x, y = digits(96)
    method.set_epoch(0)
    method.train_step(x[:64], y[:64])
    for m in method.learners().values():
        m.train()
    flags = [p.requires_grad for m in method.learners().values() for p in m.parameters()]
    grads = [None if p.grad is None else p.grad.clone() for m in method.learners().values() for p in m.parameters()]
    buffers = {n: {k: v.clone() for k, v in m.state_dict().items()} for n, m in method.learners().items()}
    rng = torch.get_rng_state()
    spec = {"type": "pgd", "eps": 0.3, "norm": "linf", "steps": 3, "step_size": 0.1, "random_start": True}
    out = learners.measure(method.learners(), x[64:], y[64:], {"attack": spec, "attacked": ["nt", "at"]},
                           batch_size=16)
    assert set(out) == {"learner_nt_clean", "learner_at_clean", "learner_nt_pgd_self", "learner_nt_pgd_from_at",
                        "learner_at_pgd_self", "learner_at_pgd_from_nt"}
    assert all(0.0 <= v <= 1.0 for v in out.values())
    assert all(m.training for m in method.learners().values())
    assert flags == [p.requires_grad for m in method.learners().values() for p in m.parameters()]
    after = [p.grad for m in method.learners().values() for p in m.parameters()]  # the last step's, untouched
    assert all((g is None and h is None) or torch.equal(g, h) for g, h in zip(grads, after, strict=True))
    for name, m in method.learners().items():  # BatchNorm statistics untouched (eval mode)
        assert _same_state(buffers[name], m.state_dict())
    assert torch.equal(rng, torch.get_rng_state())
    assert learners.measure(method.learners(), x[64:], y[64:], {"attack": spec, "attacked": ["nt", "at"]},
                            batch_size=16) == out  # seeded: it repeats exactly


def test_tracking_on_or_off_trains_bit_identical_weights(tracked, tmp_path):
    spec, on = tracked
    off = train("g", _spec(3, track=False, snapshots=[1, 2, 3]), results=tmp_path, **KW)
    a, b = checkpoint.load(on.model), checkpoint.load(off.model)
    assert _same_state(a["model"], b["model"])
    for name in ("nt", "at"):
        assert _same_state(a["learners"][name], b["learners"][name])
        for epoch in (1, 2, 3):
            assert _same_state(a["learner_snapshots"][epoch][name], b["learner_snapshots"][epoch][name])
    rows_on, rows_off = _curves(on.curves), _curves(off.curves)
    assert [r["epoch"] for r in rows_on] == [1, 2, 3]
    for r_on, r_off in zip(rows_on, rows_off):
        assert all(r_on[k] == r_off[k] for k in r_off if k not in ("seconds", "images_per_s"))
        assert all(0.0 <= float(r_on[c]) <= 1.0 for c in COLUMNS)
        assert all(c not in r_off for c in COLUMNS)


def test_tracked_numbers_equal_an_independent_evaluation_of_the_snapshots(tracked):
    """Tracking and snapshots both see the learners after the epoch's last step, before communication: the
    tracked accuracies are those of the snapshot weights under the evaluation module's own attack."""
    spec, paths = tracked
    obj = checkpoint.load(paths.model)
    model, _ = load_model(RunModel(paths.model))
    ds = load_run_data(spec, data_root())
    x, y = subset(ds.x_val, ds.y_val, 40)  # the validation split (track_learners.split), never the test images
    attack = AttackSpec.from_dict(spec.method.get("track_learners")["attack"])  # the JSON form a run holds
    rows = _curves(paths.curves)
    for epoch in (1, 2, 3):
        nt, at = copy.deepcopy(model), copy.deepcopy(model)
        nt.load_state_dict(obj["learner_snapshots"][epoch]["nt"])
        at.load_state_dict(obj["learner_snapshots"][epoch]["at"])
        row = rows[epoch - 1]
        assert float(row["learner_nt_pgd_self"]) == pytest.approx(
            accuracy_under(nt, x, y, attack, seed=0, batch_size=32), abs=1e-6)
        for name, m in (("nt", nt), ("at", at)):
            assert float(row[f"learner_{name}_clean"]) == pytest.approx(
                accuracy_under(m, x, y, CLEAN, seed=0, batch_size=32), abs=1e-6)
        robust = 0  # transfer, by hand: PGD against the AT learner, batch b seeded (0, b), classified by NT
        for b, start in enumerate(range(0, len(x), 32)):
            xb, yb = x[start:start + 32], y[start:start + 32]
            adv = from_spec(AttackSpec.from_dict(attack), at, seed=batch_seed(0, b)).perturb(xb, yb)
            with torch.no_grad():
                robust += int(((nt(xb).argmax(1) == yb) & (nt(adv).argmax(1) == yb)).sum())
        assert float(row["learner_nt_pgd_from_at"]) == pytest.approx(robust / len(y), abs=1e-6)


# ------------------------------------------------------------------------------------------ snapshots


def test_snapshots_are_the_learners_of_a_run_stopped_at_that_epoch(tracked, tmp_path):
    spec, paths = tracked
    snaps = checkpoint.load(paths.model)["learner_snapshots"]
    assert sorted(snaps) == [1, 2, 3] and all(set(s) == {"nt", "at"} for s in snaps.values())
    # the same run stopped after epoch 2, never communicating: training up to the end of epoch 2 is the same
    # (communication happens at the epoch boundary), so its final learners are the learners before the
    # communication of epoch 2, and its epoch-1 state holds those of epoch 1
    stopped = train("g", _spec(2, track=False, t_prime=NEVER), results=tmp_path, **KW)
    final = checkpoint.load(stopped.model)["learners"]
    state1 = torch.load(checkpoint.list_states(stopped.state)[0], weights_only=True)
    for name in ("nt", "at"):
        assert _same_state(snaps[2][name], final[name])
        assert _same_state(snaps[1][name], state1["method"][name]["model"])
    assert not _same_state(snaps[2]["nt"], snaps[2]["at"])  # before communication the learners differ
    learners_after = checkpoint.load(paths.model)["learners"]
    assert _same_state(learners_after["nt"], learners_after["at"])  # after epoch 3's communication they agree


def test_snapshots_and_tracked_curves_survive_a_resume(tmp_path):
    spec = _spec(4, snapshots=[1, 2, 4])
    whole = train("g", copy.deepcopy(spec), results=tmp_path / "a", **KW)
    paths = Layout(tmp_path / "b").run("g")
    train("g", copy.deepcopy(spec), results=tmp_path / "b", **KW)
    checkpoint.list_states(paths.state)[-1].unlink()  # killed during epoch 4: resumes after epoch 3
    paths.model.unlink()
    train("g", copy.deepcopy(spec), results=tmp_path / "b", **KW)
    a, b = checkpoint.load(whole.model), checkpoint.load(paths.model)
    assert sorted(b["learner_snapshots"]) == [1, 2, 4]  # 1 and 2 from the state, 4 made after the resume
    for epoch in (1, 2, 4):
        for name in ("nt", "at"):
            assert _same_state(a["learner_snapshots"][epoch][name], b["learner_snapshots"][epoch][name])
    assert _same_state(a["model"], b["model"])
    for r_a, r_b in zip(_curves(whole.curves), _curves(paths.curves), strict=True):
        assert all(r_a[c] == r_b[c] for c in COLUMNS + ["eval_clean", "eval_robust", "train_loss"])


# -------------------------------------------------------------------------- analysis and the figures


@pytest.fixture(scope="module")
def smoke_catalog(tmp_path_factory):
    """The smoke catalog with its results in a scratch folder, the Table 1a Generalist run trained there."""
    tmp = tmp_path_factory.mktemp("zipper")
    config = cfg.load_config(SMOKE)
    config["paths"] = {"results": str(tmp / "results"), "data": str(data_root())}
    catalog = cfg.resolve(config)
    train(catalog.train_id[RUN], catalog.runs[RUN], results=catalog.results, **KW)
    return catalog


def test_tsne_analysis_has_a_panel_per_snapshot_epoch_with_every_point(smoke_catalog):
    catalog = smoke_catalog
    path = analysis.run_analysis(catalog, "zipper_figure6")
    data = json.loads(path.read_text())
    ds = load_run_data(catalog.runs[RUN], catalog.data_root)
    n = min(500, len(ds.y_test))  # smoke: 64 test images
    assert (data["analysis"], data["examples"], data["embed"], data["attack"]) == ("learner_tsne", n, "images", "pgd20")
    assert [p["epoch"] for p in data["panels"]] == [1, 2]
    labels = subset(ds.x_test, ds.y_test, n)[1].tolist()
    for p in data["panels"]:
        assert (p["key"], p["run"]) == ("generalist", RUN) and 0.0 <= p["same_source_nn"] <= 1.0
        assert set(p["sources"]) == {"nt", "at"}
        for src in p["sources"].values():
            assert len(src["x"]) == len(src["y"]) == len(src["fooled"]) == n
            assert src["labels"] == labels and set(src["fooled"]) <= {"0", "1"}
            assert all(abs(v) < 1e6 for v in src["x"] + src["y"])
    again = json.loads(analysis.run_analysis(catalog, "zipper_figure6").read_text())
    assert again["panels"] == data["panels"]  # seeded attacks and t-SNE: deterministic


def test_both_figures_build_from_their_files_alone(smoke_catalog, tmp_path):
    catalog = smoke_catalog
    analysis.run_analysis(catalog, "zipper_figure6")
    model = catalog.results / "checkpoints" / catalog.train_id[RUN] / "model.pt"
    moved = tmp_path / "model.pt"
    model.rename(moved)  # figures never read a checkpoint
    try:
        for name in ("zipper_figure5", "zipper_figure6"):
            paths = build_target(catalog, name)
            png = next(p for p in paths if p.suffix == ".png")
            with Image.open(png) as img:
                img.verify()
            with Image.open(png) as img:
                assert img.size[0] > 600 and img.size[1] > 200
                assert len(img.convert("L").getcolors(maxcolors=1 << 16) or []) > 10
            pdf = next(p for p in paths if p.suffix == ".pdf")
            assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    finally:
        moved.rename(model)


@pytest.mark.slow
def test_snakemake_builds_zipper_figures_at_smoke_scale(tmp_path):
    work = workflow_copy(tmp_path)
    run(["snakemake", "zipper_figure5", "zipper_figure6", "--cores", "2", "--configfile", "config/smoke.yaml"],
        work, timeout=900)
    results = work / "results" / "smoke"
    for name in ("zipper_figure5", "zipper_figure6"):
        for suffix in (".png", ".pdf"):
            assert (results / "figures" / f"{name}{suffix}").stat().st_size > 1000
    data = json.loads((results / "analysis" / "zipper_figure6.json").read_text())
    assert [p["epoch"] for p in data["panels"]] == [1, 2] and data["examples"] == 64
    rows = _curves(Layout(results).curves(RUN))
    assert len(rows) == 2 and all(c in rows[0] for c in COLUMNS)
