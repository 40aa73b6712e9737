"""The `front` figure (SA–robust fronts, CA-AT) and the `grid` figure with its `disagreement_grid` analysis
(Generalist Figure 5(b), Zipper Figure 7): real PNG/PDF files, series connected in row order, the grid's
examples exactly those satisfying the condition (known from threshold models), deterministic, drawn from the
JSON alone; config errors name the key; figure5b end to end at the smoke scale."""

from __future__ import annotations

import copy
import json
import shutil

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from report_fixtures import metrics_path, write_analysis, write_metrics
from torch import nn

from tradeoff import analysis
from tradeoff import config as cfg
from tradeoff.analysis import disagreement
from tradeoff.attacks import from_spec
from tradeoff.core.spec import AttackSpec
from tradeoff.report.build import build_target, target_outputs
from tradeoff.report.fig_front import front_points, plot_front

ROOT = cfg.ROOT
RUNS = ["cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5",
        "cifar10-resnet18-trades-lambda6", "cifar10-resnet18-trades-lambda1"]
# (clean, pgd20, aa) accuracies of the fake runs
METRICS = {RUNS[0]: (0.90, 0.30, 0.25), RUNS[1]: (0.80, 0.45, 0.40), RUNS[2]: (0.70, 0.50, 0.45),
           RUNS[3]: (0.85, 0.40, 0.35), RUNS[4]: (0.78, 0.52, 0.48)}
FRONT_ROWS = [{"key": "v0", "run": RUNS[0], "series": "vanilla", "label": "λ=0"},
              {"key": "v1", "run": RUNS[1], "series": "vanilla", "label": "λ=0.5"},
              {"key": "v2", "run": RUNS[2], "series": "vanilla", "label": "λ=1"},
              {"key": "c0", "run": RUNS[3], "series": "CA-AT", "label": "γ=0.8"},
              {"key": "c1", "run": RUNS[4], "series": "CA-AT", "label": "γ=0.9"}]
TARGETS = {
    "fig_front": {"kind": "figure", "plot": "front", "title": "SA–AA front", "rows": FRONT_ROWS,
                  "columns": {"SA": "clean", "AA": "aa"}},
    "fig_front_multi": {"kind": "figure", "plot": "front", "rows": FRONT_ROWS,
                        "columns": {"SA": "clean", "PGD": "pgd20", "AA": "aa"}},
    "fig_grid": {"kind": "figure", "plot": "grid", "rows": [{"key": "low", "run": RUNS[0]},
                                                            {"key": "high", "run": RUNS[1], "label": "High"},
                                                            {"key": "good", "run": RUNS[2], "label": "Good"}],
                 "analysis": {"name": "disagreement_grid", "right": "good", "wrong": ["low"], "attack": "pgd20",
                              "count": 4, "seed": 0}},
}


def _overlay_catalog(tmp_path, targets: dict):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"},
                                       "scale_map": {"test_examples": None},  # exact fixture accuracies
                                       "targets": targets}, allow_unicode=True, sort_keys=False))
    return cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay])


@pytest.fixture()
def catalog(tmp_path):
    catalog = _overlay_catalog(tmp_path, TARGETS)
    for run, values in METRICS.items():
        for attack, acc in zip(("clean", "pgd20", "aa"), values):
            write_metrics(catalog, run, attack, acc)
    return catalog


def _assert_image_files(paths):
    png = next(p for p in paths if p.suffix == ".png")
    with Image.open(png) as img:
        img.verify()
    with Image.open(png) as img:
        assert img.size[0] > 300 and img.size[1] > 200
        assert len(img.convert("L").getcolors(maxcolors=1 << 16) or []) > 10  # something was drawn
    pdf = next(p for p in paths if p.suffix == ".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000


# ------------------------------------------------------------------------------------------------ front


@pytest.mark.parametrize("name", ["fig_front", "fig_front_multi"])
def test_front_is_a_valid_png_and_pdf(catalog, name):
    paths = build_target(catalog, name)
    assert paths == target_outputs(catalog, name)
    _assert_image_files(paths)


def test_front_connects_each_series_in_row_order_one_panel_per_robust_column(catalog):
    target = catalog.targets["fig_front_multi"]
    fig, axes = plt.subplots(1, 2)
    plot_front(catalog, "fig_front_multi", target, list(axes))
    for ax, (column, k) in zip(axes, (("PGD", 1), ("AA", 2))):
        lines = {line.get_label(): line for line in ax.get_lines()
                 if not line.get_label().startswith("_")}  # (an error bar's caps are lines of no series)
        assert set(lines) == {"vanilla", "CA-AT"}
        for series, runs in (("vanilla", RUNS[:3]), ("CA-AT", RUNS[3:])):
            assert list(lines[series].get_xdata()) == pytest.approx([100 * METRICS[r][0] for r in runs])
            assert list(lines[series].get_ydata()) == pytest.approx([100 * METRICS[r][k] for r in runs])
        assert ax.get_xlabel() == "SA (%)" and ax.get_ylabel() == f"{column}, ε = 8/255 (here 0.3) (%)"  # the budget
        assert {t.get_text() for t in ax.texts} == {"λ=0", "λ=0.5", "λ=1", "γ=0.8", "γ=0.9"}
    plt.close(fig)


def test_front_points_skip_a_missing_row_and_keep_the_order(catalog):
    metrics_path(catalog, RUNS[1], "aa").unlink()
    points = front_points(catalog, catalog.targets["fig_front"], "aa")
    assert [p[2] for p in points["vanilla"]] == ["λ=0", "λ=1"]
    assert points["CA-AT"] == [(pytest.approx(85.0), pytest.approx(35.0), "γ=0.8"),
                               (pytest.approx(78.0), pytest.approx(48.0), "γ=0.9")]
    _assert_image_files(build_target(catalog, "fig_front"))


# ----------------------------------------------------------------------------------------- config errors


def _resolve_with(target: dict):
    config = copy.deepcopy(cfg.load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]))
    config["targets"]["fig_x"] = target
    cfg.validate_schema(config)
    return cfg.resolve(config)


@pytest.mark.parametrize("change, match", [
    ({"columns": {"SA": "clean"}}, r"targets\.fig_x\.columns: a `front` figure needs at least 2 columns"),
    ({"columns": {"PGD": "pgd20", "SA": "clean"}}, r"targets\.fig_x\.columns\.PGD: the first column .* clean"),
    ({"columns": {"SA": "clean", "X": "no-such-attack"}}, r"targets\.fig_x\.columns\.X: unknown attack"),
])
def test_front_config_errors_name_the_key(change, match):
    with pytest.raises(cfg.ConfigError, match=match):
        _resolve_with({**copy.deepcopy(TARGETS["fig_front"]), **change})


@pytest.mark.parametrize("change, match", [
    ({"right": "nobody"}, r"targets\.fig_x\.analysis\.right: unknown row key 'nobody'"),
    ({"wrong": []}, r"targets\.fig_x\.analysis\.wrong: expected a row key"),
    ({"wrong": ["low", "good"]}, r"targets\.fig_x\.analysis: row key\(s\) \['good'\] cannot be both"),
    ({"attack": "no-such-attack"}, r"targets\.fig_x\.analysis\.attack: unknown attack 'no-such-attack'"),
    ({"count": 0}, r"targets\.fig_x\.analysis\.count: expected an integer >= 1"),
    ({"any_wrong": "yes"}, r"targets\.fig_x\.analysis\.any_wrong: expected true or false"),
    ({"show": "nobody"}, r"targets\.fig_x\.analysis\.show: unknown row key"),
    ({"colour": 1}, r"targets\.fig_x\.analysis: unknown parameter\(s\) \['colour'\]"),
])
def test_grid_config_errors_name_the_key(change, match):
    target = copy.deepcopy(TARGETS["fig_grid"])
    target["analysis"].update(change)
    with pytest.raises(cfg.ConfigError, match=match):
        _resolve_with(target)


def test_grid_without_analysis_and_unknown_plot_are_refused():
    target = {k: v for k, v in copy.deepcopy(TARGETS["fig_grid"]).items() if k != "analysis"}
    with pytest.raises(cfg.ConfigError, match=r"targets\.fig_x"):
        _resolve_with({**target, "columns": {"nat": "clean"}})
    with pytest.raises(cfg.ConfigError, match=r"targets\.fig_x\.plot: 'fronts' is not allowed"):
        _resolve_with({**copy.deepcopy(TARGETS["fig_front"]), "plot": "fronts"})


def test_catalog_grids_resolve():
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    for name in ("figure5b", "zipper_figure7"):
        assert catalog.targets[name].plot == "grid" and name in catalog.analysis_targets()
    cond = disagreement.condition(catalog.targets["zipper_figure7"].analysis)
    assert cond == {"right": ["trades_lambda6", "fat"], "wrong": ["generalist"], "any_right": True,
                    "any_wrong": False, "show": "generalist"}


# ------------------------------------------------------------------------------ grid analysis, known answer

# Threshold models on 1x2x2 images: class 1 iff the first pixel p > t (a real linear layer, so PGD has
# gradients). The truth is p > 0.5. Under an L-inf attack of eps the model t is right iff p - eps > t
# (label 1) or p + eps <= t (label 0); pixels sit mid-way between multiples of 1/40, never on a boundary.
N, EPS = 40, 0.1
THRESHOLDS = {"low": 0.3, "high": 0.7, "good": 0.5}
PGD = AttackSpec.from_dict({"type": "pgd", "norm": "linf", "eps": EPS, "steps": 10, "step_size": EPS / 4,
                            "random_start": True, "restarts": 1})


def threshold_model(t: float, w: float = 10.0) -> nn.Module:
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    with torch.no_grad():
        model[1].weight.zero_()
        model[1].weight[1, 0] = w
        model[1].bias.copy_(torch.tensor([0.0, -w * t]))
    return model.eval()


def toy_data():
    p = (torch.arange(N, dtype=torch.float32) + 0.5) / N
    x = torch.full((N, 1, 2, 2), 0.25)
    x[:, 0, 0, 0] = p
    return x, (p > 0.5).long(), p.numpy()


def expected_correct(t: float, p: np.ndarray, eps: float = 0.0) -> np.ndarray:
    y = p > 0.5
    return np.where(y, p - eps > t, p + eps <= t)


def expected_indices(params: dict, eps: float) -> list[int]:
    _, _, p = toy_data()
    cond = disagreement.condition(params)
    ok = {k: expected_correct(t, p, eps) for k, t in THRESHOLDS.items()}
    right = [ok[k] for k in cond["right"]]
    wrong = [~ok[k] for k in cond["wrong"]]
    r = np.any(right, 0) if cond["any_right"] else np.all(right, 0)
    w = np.any(wrong, 0) if cond["any_wrong"] else np.all(wrong, 0)
    return [int(i) for i in np.nonzero(r & w)[0]]


def make_attack(key, model, seed):
    return from_spec(PGD, model, seed=seed)


def toy_grid(params: dict, attack=make_attack, batch_size: int = 16) -> dict:
    x, y, _ = toy_data()
    models = {k: threshold_model(t) for k, t in THRESHOLDS.items()}
    return disagreement.grid(models, x, y, ("zero", "one"), params, attack, batch_size=batch_size)


@pytest.mark.parametrize("params", [
    {"right": "good", "wrong": ["low"], "count": 100},                                 # Figure 5(b)-like
    {"right": "good", "wrong": ["low", "high"], "any_wrong": True, "count": 100},
    {"right": ["low", "high"], "any_right": True, "wrong": "good", "count": 100},       # Zipper Figure 7-like
    {"right": ["low", "good"], "wrong": "high", "count": 100},
])
def test_grid_picks_exactly_the_examples_satisfying_the_condition(params):
    out = toy_grid(params)
    for panel, eps in (("natural", 0.0), ("adversarial", EPS)):
        expected = expected_indices(params, eps)
        got = out["panels"][panel]
        assert got["matches"] == len(expected)
        assert [item["index"] for item in got["shown"]] == expected, panel
    # the condition differs between the panels: the attack moves p by eps
    assert expected_indices(params, 0.0) != expected_indices(params, EPS)


def test_grid_items_store_labels_predictions_and_images():
    x, y, p = toy_data()
    params = {"right": "good", "wrong": ["low"], "count": 100}
    out = toy_grid(params)
    for panel, eps in (("natural", 0.0), ("adversarial", EPS)):
        for item in out["panels"][panel]["shown"]:
            i = item["index"]
            assert item["label"] == int(y[i]) and item["class"] == ("zero", "one")[int(y[i])]
            for key, t in THRESHOLDS.items():  # the models' predictions: on their own adversarial example
                right = bool(expected_correct(t, p[i:i + 1], eps)[0])
                assert (item["predictions"][key] == item["label"]) == right
            assert np.asarray(item["image"]).shape == (2, 2)  # one channel: H x W
            assert item["image"][0][0] == pytest.approx(float(p[i]), abs=1e-4)
            if panel == "adversarial":  # against `show` (default: the right model), within the eps-ball
                adv = np.asarray(item["adversarial_image"])
                assert np.abs(adv - np.asarray(item["image"])).max() <= EPS + 1e-4
                assert (adv[0][0] > 0.5) == bool(item["predictions"]["good"])  # the good model's own
            else:
                assert "adversarial_image" not in item


def test_grid_shows_at_most_count_deterministically_and_says_when_none_match():
    params = {"right": "good", "wrong": ["low"], "count": 3, "seed": 5}
    a, b = toy_grid(params), toy_grid(params)
    assert json.dumps(a) == json.dumps(b)
    for panel, eps in (("natural", 0.0), ("adversarial", EPS)):
        shown = [item["index"] for item in a["panels"][panel]["shown"]]
        assert len(shown) == 3 and shown == sorted(shown) and set(shown) <= set(expected_indices(params, eps))
    # the same selection whatever the attack's batching (seeded per batch; PGD converges on these models)
    c = toy_grid(params, batch_size=7)
    assert c["panels"]["natural"] == a["panels"]["natural"]
    summary = lambda out: [(i["index"], i["predictions"]) for i in out["panels"]["adversarial"]["shown"]]  # noqa: E731
    assert summary(c) == summary(a)
    # TRADES- and FAT-like models with disjoint mistakes: no image is wrong for both
    none = toy_grid({"right": "good", "wrong": ["low", "high"], "count": 3})
    assert none["panels"]["natural"] == {"matches": 0, "shown": []}


def test_grid_images_are_hwc_for_colour_and_rounded():
    img = torch.rand(3, 4, 5)
    out = disagreement.image_list(img)
    assert np.asarray(out).shape == (4, 5, 3)
    assert np.asarray(out) == pytest.approx(img.permute(1, 2, 0).numpy(), abs=1e-4)


# --------------------------------------------------------------------- the analysis job and its figure


@pytest.fixture()
def grid_catalog(tmp_path, monkeypatch):
    """fig_grid's rows load as the threshold models and the toy test set (no checkpoint, no dataset)."""
    from tradeoff import data
    from tradeoff.evaluation import trained

    catalog = _overlay_catalog(tmp_path, TARGETS)
    by_run = {r["run"]: THRESHOLDS[r["key"]] for r in TARGETS["fig_grid"]["rows"]}
    x, y, _ = toy_data()
    monkeypatch.setattr(trained, "load", lambda path, device="cpu": (
        threshold_model(by_run[next(r for r in by_run if catalog.train_id[r] == path.parent.name)]), {}))
    monkeypatch.setattr(data, "load_run_data", lambda spec, root: data.Data(x, y, x, y, 2, ("zero", "one"), "toy"))
    monkeypatch.setattr(catalog, "attack_for", lambda name, run: PGD)
    return catalog


def test_analysis_job_writes_the_grid_and_the_figure_reads_only_it(grid_catalog, tmp_path):
    catalog = grid_catalog
    path = analysis.run_analysis(catalog, "fig_grid")
    data = json.loads(path.read_text())
    assert data["analysis"] == "disagreement_grid" and data["dataset"] == "toy"
    assert [m["label"] for m in data["models"]] == ["low", "High", "Good"]
    assert data["attack"] == "pgd20" and data["attack_spec"]["eps"] == EPS
    for panel, eps in (("natural", 0.0), ("adversarial", EPS)):
        expected = expected_indices(TARGETS["fig_grid"]["analysis"], eps)
        assert data["panels"][panel]["matches"] == len(expected)
        assert len(data["panels"][panel]["shown"]) == 4
    again = json.loads(analysis.run_analysis(catalog, "fig_grid").read_text())
    assert {k: v for k, v in again.items() if k != "provenance"} == {k: v for k, v in data.items() if k != "provenance"}
    _assert_image_files(build_target(catalog, "fig_grid"))


def test_grid_figure_draws_empty_panels_and_colour_images_from_the_json(catalog):
    rgb = np.random.default_rng(0).random((4, 4, 3)).round(4).tolist()
    item = {"index": 7, "label": 1, "class": "car", "predictions": {"low": 2, "high": 1, "good": 1}, "image": rgb}
    data = {"analysis": "disagreement_grid", "classes": ["plane", "car", "bird"], "examples": 50,
            "models": [{"key": k, "label": k, "run": r["run"]} for k, r in zip(THRESHOLDS, TARGETS["fig_grid"]["rows"])],
            "attack": "pgd20", "condition": disagreement.condition(TARGETS["fig_grid"]["analysis"]),
            "panels": {"natural": {"matches": 0, "shown": []},
                       "adversarial": {"matches": 1, "shown": [{**item, "adversarial_image": rgb}]}}}
    path = write_analysis(catalog, "fig_grid", data)
    _assert_image_files(build_target(catalog, "fig_grid"))
    data["panels"]["adversarial"] = {"matches": 0, "shown": []}  # nothing at all: still a figure, with notes
    write_analysis(catalog, "fig_grid", data)
    _assert_image_files(build_target(catalog, "fig_grid"))
    path.unlink()  # no analysis yet: a figure saying so, not a crash
    assert all(p.exists() for p in build_target(catalog, "fig_grid"))


def test_grid_titles_do_not_overlap_the_row_above(catalog):
    """Rows of aspect-locked images under constrained layout: no image title runs into the row above."""
    from tradeoff.report.figures import make_figure

    rgb = np.random.default_rng(1).random((32, 32, 3)).round(4).tolist()
    item = {"index": 7, "label": 1, "class": "car", "predictions": {"low": 2, "high": 1, "good": 1}, "image": rgb,
            "adversarial_image": rgb}
    for n in (3, 8):
        data = {"classes": ["plane", "car", "bird"], "examples": 50, "attack": "pgd20",
                "condition": disagreement.condition(TARGETS["fig_grid"]["analysis"]),
                "panels": {p: {"matches": n, "shown": [item] * n} for p in ("natural", "adversarial")}}
        write_analysis(catalog, "fig_grid", data)
        fig = make_figure(catalog, "fig_grid")
        fig.canvas.draw()
        top_row, bottom_row = fig.axes[:n], fig.axes[n:]
        assert max(a.title.get_window_extent().y1 for a in bottom_row) <= min(
            a.get_window_extent().y0 for a in top_row)
        assert fig._suptitle.get_window_extent().y0 >= max(a.title.get_window_extent().y1 for a in top_row)
        plt.close(fig)


# --------------------------------------------------------------------------------- end to end, smoke scale


@pytest.mark.slow
def test_snakemake_builds_figure5b_at_smoke_scale(tmp_path):
    """figure5b and zipper_figure7 (the same three runs; at this scale only the latter finds images)."""
    from helpers import run, workflow_copy

    work = workflow_copy(tmp_path / "wf")
    smoke = ["--configfile", "config/smoke.yaml"]
    run(["snakemake", "figure5b", "zipper_figure7", "--cores", "2", *smoke], work, timeout=300)
    for name in ("figure5b", "zipper_figure7"):
        data = json.loads((work / "results" / "smoke" / "analysis" / f"{name}.json").read_text())
        assert data["scale"] == "smoke" and data["dataset"] == "digits" and data["examples"] == 64
        assert data["attack_spec"]["steps"] == 3  # the smoke scale caps attack steps
        cond = data["condition"]
        for panel in ("natural", "adversarial"):
            got = data["panels"][panel]
            assert len(got["shown"]) == min(8, got["matches"])
            for item in got["shown"]:
                ok = {k: p == item["label"] for k, p in item["predictions"].items()}
                right, wrong = [ok[k] for k in cond["right"]], [not ok[k] for k in cond["wrong"]]
                assert (any(right) if cond["any_right"] else all(right))
                assert (any(wrong) if cond["any_wrong"] else all(wrong))
                assert np.asarray(item["image"]).shape == (8, 8)
    figures = work / "results" / "smoke" / "figures"
    _assert_image_files([figures / "figure5b.png", figures / "figure5b.pdf"])
    # the figure needs only the JSON: rebuild it with the checkpoints gone
    shutil.rmtree(work / "results" / "smoke" / "checkpoints")
    for p in figures.glob("figure5b.*"):
        p.unlink()
    run(["tradeoff", "--config", "config/config.yaml", "--config", "config/smoke.yaml", "report", "figure5b"], work)
    _assert_image_files([figures / "figure5b.png", figures / "figure5b.pdf"])
