"""NROB (Zipper Table 4) as an evaluation of the pipeline: entries of type `corruptions`, their metrics files and
jobs, and digits-c, the corruption dataset that stands in for Tiny-ImageNet-C at the demo and smoke scales."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import scipy.ndimage as ndi
import torch
from helpers import ROOT, evaluation, results_of, run, workflow_copy
from PIL import Image
from test_corruptions import CLASSES, PER_CLASS, DominantColour, expected, root  # noqa: F401  (fixture)

from tradeoff import cli as tcli
from tradeoff import config as cfg
from tradeoff import data
from tradeoff.core.spec import AttackSpec
from tradeoff.data import digits_c, subset
from tradeoff.evaluation import evaluate
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.pipeline.dvc_export import stages, unit_key
from tradeoff.report.table_model import load_reference
from tradeoff.storage.layout import ready_marker

PAPER = [ROOT / "config" / "config.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
DEMO = PAPER + [ROOT / "config" / "demo.yaml"]
ZIPPER_RUNS = ("tinyimagenet-resnet18-nt", "tinyimagenet-resnet18-at-beta1", "tinyimagenet-resnet18-trades-lambda1",
               "tinyimagenet-resnet18-generalist")


# ------------------------------------------------------------------------------------------------ digits-c


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """digits-c built once by `download`, as the pipeline's download job does; its sets and the clean digits."""
    folder = tmp_path_factory.mktemp("data")
    data.download("digits-c", folder)
    return folder, data.load_corruptions(folder, dataset="digits-c"), data.load("digits", folder)


def test_digits_c_holds_every_set_of_the_clean_test_images(built):
    folder, sets, clean = built
    assert digits_c.CORRUPTIONS == tuple(c for c in data.CORRUPTIONS if c not in ("frost", "elastic_transform"))
    assert data.corruption_dataset("digits-c").corruptions == digits_c.CORRUPTIONS
    assert data.corruption_dataset("digits-c").clean_dataset == "digits"
    assert list(sets) == [(c, s) for c in digits_c.CORRUPTIONS for s in data.SEVERITIES]
    for (corruption, severity), (x, y) in sets.items():
        assert x.shape == clean.x_test.shape == (360, 1, 8, 8) and x.dtype == torch.float32
        assert 0 <= float(x.min()) and float(x.max()) <= 1
        assert torch.equal(torch.round(x * 255), x * 255)  # stored as 8-bit values
        assert torch.equal(y, clean.y_test), (corruption, severity)
        assert not torch.allclose(x, clean.x_test, atol=1 / 255), f"{corruption} {severity} changes nothing"
    assert data.is_downloaded("digits-c", folder) and not data.DATASETS["digits-c"].needs_download
    with pytest.raises(data.DatasetError, match="load_corruptions"):
        data.load("digits-c", folder)
    with pytest.raises(data.DatasetError, match=r"unknown corruptions \['frost'\]"):
        data.load_corruptions(folder, dataset="digits-c", corruptions=["frost"])
    with pytest.raises(data.DatasetError, match="not a dataset of corrupted test images"):
        data.load_corruptions(folder, dataset="digits")


def test_digits_c_is_deterministic_and_seeded(built, tmp_path):
    _, sets, clean = built
    data.download("digits-c", tmp_path)  # built again elsewhere, from nothing
    again = data.load_corruptions(tmp_path, dataset="digits-c")
    assert all(torch.equal(sets[key][0], again[key][0]) for key in sets)
    images = clean.x_test.numpy()[:40, 0]
    for corruption in ("gaussian_noise", "glass_blur", "motion_blur", "snow", "fog"):  # the random ones
        assert not np.array_equal(digits_c.corrupt(images, corruption, 3, seed=1),
                                  digits_c.corrupt(images, corruption, 3)), corruption
    assert np.array_equal(digits_c.corrupt(images, "contrast", 3, seed=1), digits_c.corrupt(images, "contrast", 3))


def test_severity_increases_the_distance_to_the_clean_images(built):
    _, sets, clean = built
    for corruption in digits_c.CORRUPTIONS:
        distances = [float((sets[(corruption, s)][0] - clean.x_test).abs().mean()) for s in data.SEVERITIES]
        assert all(a < b for a, b in zip(distances, distances[1:])), (corruption, distances)


def test_a_stale_or_damaged_set_is_built_again(tmp_path, monkeypatch):
    builds = []

    def fake_build(x, seed=digits_c.SEED):
        builds.append(seed)
        return np.zeros((len(digits_c.CORRUPTIONS), len(data.SEVERITIES), *x.shape), np.uint8)

    monkeypatch.setattr(digits_c, "build", fake_build)
    folder = data.download("digits-c", tmp_path)
    path = folder / "digits-c-uint8.npz"
    assert builds == [digits_c.SEED] and data.is_downloaded("digits-c", tmp_path)
    data.download("digits-c", tmp_path)
    assert len(builds) == 1  # intact: kept
    path.write_bytes(b"not an npz")
    assert not data.is_downloaded("digits-c", tmp_path)
    with pytest.raises(data.DatasetError, match="tradeoff download digits-c"):
        data.load_corruptions(tmp_path, dataset="digits-c")
    data.download("digits-c", tmp_path)
    assert len(builds) == 2 and data.is_downloaded("digits-c", tmp_path)
    monkeypatch.setattr(digits_c, "VERSION", digits_c.VERSION + 1)  # another version of the corruptions
    assert not data.is_downloaded("digits-c", tmp_path)
    data.download("digits-c", tmp_path)
    assert len(builds) == 3


def test_pixelate_and_zoom_blur_equal_the_published_functions_where_those_apply():
    x = data.load("digits").x_test.numpy()[:30, 0].astype(np.float64)
    # pixelate to 4 of 8 pixels (severity 5): Pillow's BOX resize there and back, as published
    m = digits_c._pixelate_matrix(0.5)
    box = np.stack([np.asarray(Image.fromarray(i.astype(np.float32)).resize((4, 4), Image.Resampling.BOX)
                               .resize((8, 8), Image.Resampling.BOX)) for i in x])
    np.testing.assert_allclose(m @ x @ m.T, box, atol=1e-6)
    # zoom blur: Hendrycks' clipped_zoom of the enlarged digit at 64x64, averaged back over the 8x8 blocks
    big = np.repeat(np.repeat(x, 8, axis=1), 8, axis=2)
    factors = np.arange(1, 1.16, 0.01)
    total = big.copy()
    for zoom in factors:
        crop = int(np.ceil(64 / zoom))
        top = (64 - crop) // 2
        zoomed = ndi.zoom(big[:, top:top + crop, top:top + crop], (1, zoom, zoom), order=1)
        trim = (zoomed.shape[1] - 64) // 2
        total += zoomed[:, trim:trim + 64, trim:trim + 64]
    reference = np.clip(total / (len(factors) + 1), 0, 1).reshape(30, 8, 8, 8, 8).mean(axis=(2, 4))
    np.testing.assert_allclose(digits_c.zoom_blur(x, 3, np.random.default_rng(0)), reference, atol=1e-12)


# ------------------------------------------------------------------------------ the evaluation and its files


def test_metrics_file_is_the_mean_of_per_severity_means(root, tmp_path, monkeypatch):  # noqa: F811
    """Through the evaluation job's code (evaluate.evaluate) on a generated Tiny-ImageNet-C whose every answer is known
    (tests/test_corruptions.py): the metrics file's accuracy is NROB computed by hand, and it records each
    corruption's and severity's accuracy; the predictions file each image's correctness."""
    data_root, truth = root
    per_severity, per_corruption, mean = expected(truth)
    model = DominantColour()
    clean_x = torch.zeros(4, 3, 8, 8)
    clean_x[:, 1] = 1  # all green: class 1
    clean_y = torch.tensor([1, 1, 0, 2])
    settings = cfg.load_catalog([ROOT / "config" / "config.yaml"]).runs["cifar10-resnet18-nt"].replace(
        dataset="tinyimagenet", arch="dominant-colour")
    meta = {"run": "tiny", "spec": settings.as_dict(), "selected_epoch": 3}  # as a model.pt holds it
    monkeypatch.setattr(evaluate, "_load", lambda *args: (model, meta, clean_x, clean_y, "cpu", len(clean_y)))
    (tmp_path / "model.pt").write_bytes(b"the model's bytes: their digest is in the record")
    metrics_out, predictions_out = tmp_path / "nrob.json", tmp_path / "predictions.json"
    spec = AttackSpec.from_dict({"type": "corruptions", "dataset": "tinyimagenet-c"})
    job = evaluate.AttackJob("nrob", spec, metrics_out=metrics_out, predictions_out=predictions_out)
    [result] = evaluate.evaluate(evaluate.Evaluation(RunModel(tmp_path / "model.pt"), data_root, (job,), batch_size=4))
    written = json.loads(metrics_out.read_text())
    assert written["accuracy"] == pytest.approx(mean, abs=1e-12)
    assert written["accuracy"] == pytest.approx(np.mean([np.mean(list(v.values())) for v in per_severity.values()]))
    assert written["corruptions"] == pytest.approx(per_corruption, abs=1e-12)
    assert written["severities"] == {c: {str(s): a for s, a in accs.items()} for c, accs in per_severity.items()}
    assert written["clean_accuracy"] == 0.5 and written["examples"] == len(CLASSES) * PER_CLASS
    assert written["corrupted_images"] == 15 * 5 * len(CLASSES) * PER_CLASS
    assert written["type"] == "corruptions" and written["corruption_dataset"] == "tinyimagenet-c"
    assert written["dataset"] == "tinyimagenet" and written["precision"] == "fp32" and written["run"] == "tiny"
    assert result["accuracy"] == written["accuracy"]
    predictions = json.loads(predictions_out.read_text())
    assert predictions["labels"] == [i for i in range(len(CLASSES)) for _ in range(PER_CLASS)]
    for corruption, accs in per_severity.items():
        for severity, accuracy in accs.items():
            marks = predictions["corrupted_correct"][corruption][str(severity)]
            assert marks == "".join("1" if truth[(corruption, severity, w, i)] else "0"
                                    for w in CLASSES for i in range(PER_CLASS))
            assert marks.count("1") / len(marks) == accuracy
    with pytest.raises(ValueError, match="not sharded"):
        evaluate.evaluate(evaluate.Evaluation(RunModel(tmp_path / "model.pt"), data_root,
                                              (evaluate.AttackJob("nrob", spec),), batch_size=4,
                                              shard=evaluate.Shard(0, 2)))


def test_cli_measures_a_smoke_run_on_digits_c(tmp_path, monkeypatch):
    """`tradeoff evaluate --attack nrob` on a smoke-trained run: digits-c cut to the run's own 64 test images, NROB
    recomputed here from the model, fp32, eval mode."""
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "cpu.yaml").write_text("runtime: {device: cpu}\n")
    configs = [a for f in ("config/config.yaml", "config/smoke.yaml", "config/cpu.yaml") for a in ("--config", f)]
    monkeypatch.chdir(work)
    nt = "cifar10-resnet18-nt"
    assert tcli.main(configs + ["train", "--run", nt]) == 0
    assert tcli.main(configs + ["download", "digits-c"]) == 0
    assert tcli.main(configs + ["evaluate", "--run", "tinyimagenet-resnet18-nt", "--attack", "clean",
                                "--attack", "nrob"]) == 0
    results, data_root = results_of(work), work / "data"
    metrics = json.loads(results.metrics(nt, "nrob").read_text())
    clean = json.loads(results.metrics(nt, "clean").read_text())
    assert metrics["corruption_dataset"] == "digits-c" and metrics["params"] == {"dataset": "digits-c"}
    assert metrics["examples"] == 64 and metrics["clean_accuracy"] == clean["accuracy"]
    assert list(metrics["corruptions"]) == list(digits_c.CORRUPTIONS)

    model, _ = load_model(RunModel(results.model(nt)))
    run_test = data.load("digits", data_root)
    _, y_run = subset(run_test.x_test, run_test.y_test, 64)
    by_hand = {}
    for (corruption, severity), (x, y) in data.load_corruptions(data_root, dataset="digits-c").items():
        x, y = subset(x, y, 64)
        assert torch.equal(y, y_run)  # the corrupted versions of the run's own test images
        with torch.no_grad():
            by_hand.setdefault(corruption, {})[str(severity)] = float((model(x).argmax(1) == y).float().mean())
    assert metrics["severities"].keys() == by_hand.keys()
    for corruption, accs in by_hand.items():
        assert metrics["severities"][corruption] == pytest.approx(accs, abs=1e-9), corruption
    means = [np.mean(list(accs.values())) for accs in by_hand.values()]
    assert metrics["accuracy"] == pytest.approx(np.mean(means), abs=1e-12)
    assert tcli.main(configs + ["evaluate", "--run", nt, "--attack", "nrob", "--shard", "0", "--shards", "2"]) == 2


# --------------------------------------------------------------------------------- the catalog and its jobs


def test_nrob_resolves_to_the_corruption_dataset_of_each_scale():
    paper, smoke, demo = (cfg.load_catalog(files) for files in (PAPER, SMOKE, DEMO))
    for run_id in ZIPPER_RUNS:
        assert paper.attack_for("nrob", run_id).as_dict() == {"type": "corruptions", "dataset": "tinyimagenet-c"}
        assert smoke.attack_for("nrob", run_id) == demo.attack_for("nrob", run_id)
        assert demo.attack_for("nrob", run_id).as_dict() == {"type": "corruptions", "dataset": "digits-c"}
        assert paper.evaluation_datasets(run_id, "nrob") == ["tinyimagenet-c"]
        assert paper.evaluation_datasets(run_id, "pgd20") == []
    assert demo.config["corruption_map"] == {"tinyimagenet-c": "digits-c"} and paper.config["corruption_map"] == {}
    assert "tinyimagenet-c" in paper.datasets() and "digits-c" in smoke.datasets()
    assert "tinyimagenet-c" not in smoke.datasets()
    assert paper.shards_for("nrob") == 1
    assert "nrob" in smoke.model_attacks(smoke.train_id["tinyimagenet-resnet18-generalist"])


@pytest.mark.parametrize("overlay, message", [
    ("corruption_map: null\n",  # a scale that maps runs onto digits but not Tiny-ImageNet-C
     r"attacks\.nrob\.dataset: 'tinyimagenet-c' holds corrupted 'tinyimagenet' test images, but a run evaluated on "
     r"it is on 'digits'; map it .* with corruption_map"),
    ("corruption_map: {tinyimagenet-c: cifar10}\n", r"corruption_map\.tinyimagenet-c: unknown value 'cifar10'"),
    ("corruption_map: {cifar10-c: digits-c}\n", r"corruption_map \(key 'cifar10-c'\): unknown value"),
    ("attacks:\n  nrob: {type: corruptions, dataset: digits}\n", r"attacks\.nrob\.dataset: unknown value 'digits'"),
    ("attacks:\n  nrob: {type: corruptions, dataset: digits-c, steps: 3}\n",
     r"attacks\.nrob: unknown key\(s\) \['steps'\] for type 'corruptions'"),
    ("attacks:\n  nrob2: {type: corruptions}\n", r"attacks\.nrob2: type 'corruptions' needs `dataset`"),
    ("runs:\n  cifar10-resnet18-at-beta1:\n    selection: {attack: nrob}\n",
     r"runs\.cifar10-resnet18-at-beta1\.selection\.attack: 'nrob' measures accuracy on corrupted images, it is not "
     r"an attack"),
    ("train_attacks:\n  bad: {type: corruptions, dataset: digits-c}\n", r"train_attacks\.bad\.type: unknown attack"),
])
def test_bad_corruption_settings_name_the_key(tmp_path, overlay, message):
    path = tmp_path / "bad.yaml"
    path.write_text(overlay)
    with pytest.raises(cfg.ConfigError, match=message):
        cfg.load_catalog(SMOKE + [path])


def test_evaluation_jobs_depend_on_the_corruption_dataset():
    files = ["config/config.yaml", "config/smoke.yaml"]
    smoke = cfg.load_catalog([ROOT / f for f in files])
    out = stages(smoke, files)
    marker = str(ready_marker(smoke.data_root, "digits-c"))
    assert out["download@digits-c"]["cmd"].endswith("download digits-c")
    # the smoke scale evaluates all of a run's attacks in one job (runtime.eval_unit: run)
    generalist = smoke.train_id["tinyimagenet-resnet18-generalist"]
    evaluate = out[f"evaluate@{unit_key(generalist, 'all')}"]
    assert marker in evaluate["deps"] and str(smoke.layout.metrics(generalist, "all")) in evaluate["metrics"]
    unrelated = smoke.train_id["cifar10-resnet18-generalist-no-ema"]  # evaluated, never on corrupted images
    assert "nrob" not in smoke.model_attacks(unrelated)
    assert marker not in out[f"evaluate@{unit_key(unrelated, 'all')}"]["deps"]
    paper = stages(cfg.load_catalog(PAPER), ["config/config.yaml"])
    assert "data/.ready/tinyimagenet-c" in paper["evaluate@tinyimagenet-resnet18-nt~nrob"]["deps"]
    assert "data/.ready/tinyimagenet-c" not in paper["evaluate@tinyimagenet-resnet18-nt~pgd20"]["deps"]


def test_zipper_table4_has_the_nrob_column_with_the_papers_numbers():
    catalog = cfg.load_catalog(PAPER)
    target = catalog.targets["zipper_table4"]
    assert list(target.columns)[:3] == ["nat", "nrob", "pgd20"] and target.columns["nrob"] == "nrob"
    assert "not measured" not in target.title
    with open(ROOT / "config" / "reference" / "zipper_table4.csv", newline="") as f:
        paper = {r["row"]: float(r["value"]) for r in csv.DictReader(f) if r["column"] == "nrob"}
    assert paper == {"nt": 20.17, "at_beta1": 21.93, "trades_lambda1": 22.45, "generalist": 24.88}
    reference = load_reference(catalog, "zipper_table4")
    assert {row: reference[(row, "nrob")][0] for row in paper} == paper


def test_nrob_is_not_an_attack_for_figures_and_analyses(tmp_path):
    overlay = tmp_path / "figure.yaml"
    overlay.write_text("targets:\n  figure5a:\n    columns: {nat: clean, nrob: nrob}\n    plot: per_class\n")
    with pytest.raises(cfg.ConfigError, match=r"targets\.figure5a\.columns\.nrob: a `per_class` figure"):
        cfg.load_catalog(SMOKE + [overlay])
    overlay.write_text("targets:\n  zipper_figure7:\n    analysis: {attack: nrob}\n")
    with pytest.raises(cfg.ConfigError, match=r"targets\.zipper_figure7\.analysis\.attack: 'nrob' measures"):
        cfg.load_catalog(SMOKE + [overlay])


# ---------------------------------------------------------------------------------------- real Snakemake


@pytest.mark.slow
def test_smoke_snakemake_fills_the_nrob_column(tmp_path):
    work = workflow_copy(tmp_path)
    run(["snakemake", "zipper_table4", "--cores", "2", "--configfile", "config/smoke.yaml"], work, timeout=1800)
    with open(work / "results" / "smoke" / "tables" / "zipper_table4.csv", newline="") as f:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(f) if r["protocol"] == "strong"}
    catalog = cfg.load_catalog([work / "config" / "config.yaml", work / "config" / "smoke.yaml"])
    reference = load_reference(catalog, "zipper_table4")
    for row in ("nt", "at_beta1", "trades_lambda1", "generalist"):
        cell = cells[(row, "nrob")]
        assert cell["ours"] != "" and 0 <= float(cell["ours"]) <= 100, row
        assert float(cell["paper"]) == pytest.approx(reference[(row, "nrob")][0])
        assert cell["ci_low"] == ""  # a mean over corrupted sets: no binomial interval
    metrics, _ = evaluation(work, "tinyimagenet-resnet18-nt", "nrob")
    assert metrics["corruption_dataset"] == "digits-c" and len(metrics["corruptions"]) == 13
    assert 100 * metrics["accuracy"] == pytest.approx(float(cells[("nt", "nrob")]["ours"]), abs=1e-3)
    assert (work / "data" / ".ready" / "digits-c").is_file()
    md = (work / "results" / "smoke" / "tables" / "zipper_table4.md").read_text()
    assert "| Natural | NROB | PGD-20, ε = 8/255 (here 0.3) |" in md and "NROB on digits-c" in md
