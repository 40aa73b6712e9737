"""The CA-AT part of the catalog: every target of the paper, tables that map every reference cell, the paper's
hyperparameters on the runs (from scratch, and the adapter fine-tuning of Figures 4 and 5: its own preset), the
demo's thinning and budget cap, and the figure kinds they use (fronts, curves per series, lines over attack
budgets) built from files alone. The adapter targets' wiring and builds: tests/test_adapter_targets.py."""

from __future__ import annotations

import copy
import csv
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from report_fixtures import write_curves, write_metrics  # noqa: E402

from tradeoff import config as cfg  # noqa: E402
from tradeoff.core.spec import RunSpec  # noqa: E402
from tradeoff.core.targets import TargetSpec  # noqa: E402
from tradeoff.models import PRETRAINED_MODELS  # noqa: E402
from tradeoff.report.build import build_target  # noqa: E402
from tradeoff.report.fig_basic import curve_panels  # noqa: E402
from tradeoff.report.figures import make_figure  # noqa: E402

ROOT = cfg.ROOT
PAPER = [ROOT / "config" / "config.yaml"]
DEMO = PAPER + [ROOT / "config" / "demo.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
CATALOG_MD = Path("/work/shared/papers/CATALOG.md")

# CATALOG.md's CA-AT targets (caat_figure9–caat_figure11 is a range)
CAAT_TARGETS = ["caat_figure1", "caat_figure2", "caat_figure3", "caat_figure4", "caat_figure5", "caat_figure6", "caat_figure7",
                "caat_figure8", "caat_figure9", "caat_figure10", "caat_figure11", "caat_table1", "caat_table2",
                "caat_table3", "caat_table4"]
NOT_YET: set[str] = set()
BEYOND_CATALOG_MD = {"caat_figure1"}  # CATALOG.md leaves Figure 1 (right) out; issue 23 asked for it
ADAPTER_TARGETS = ["caat_figure4", "caat_figure5"]
TABLES = ["caat_table1", "caat_table2", "caat_table3", "caat_table4"]
FRONTS = ["caat_figure4a", "caat_figure4b", "caat_figure4c", "caat_figure4d", "caat_figure5", "caat_figure6a",
          "caat_figure6b", "caat_figure6c", "caat_figure7a", "caat_figure7b", "caat_figure9a", "caat_figure9b",
          "caat_figure10a", "caat_figure10b", "caat_figure11a", "caat_figure11b"]
DEMO_MAX_CAAT_TRAINING = 15  # from scratch
DEMO_ADAPTER_TRAINING = 3    # fine-tuning runs of the adapter miniature (its pretraining run is not a row)


@pytest.fixture(scope="module")
def paper():
    return cfg.load_catalog(PAPER)


@pytest.fixture(scope="module")
def demo():
    return cfg.load_catalog(DEMO)


def caat_runs(catalog) -> dict[str, RunSpec]:
    return {rid: spec for rid, spec in catalog.runs.items() if spec.method.name in ("vanilla", "caat")}


def is_adapter(spec: RunSpec) -> bool:
    return spec.paper_arch in PRETRAINED_MODELS


def test_every_caat_target_of_the_paper_is_in_the_catalog(paper):
    if CATALOG_MD.exists():  # the list above, checked against CATALOG.md where it is at hand
        text = CATALOG_MD.read_text()
        named = set(re.findall(r"`(caat_(?:figure|table)\d+)`", text))
        for a, b in re.findall(r"`caat_figure(\d+)`[–-]`caat_figure(\d+)`", text):
            named |= {f"caat_figure{i}" for i in range(int(a), int(b) + 1)}
        assert named - NOT_YET == set(CAAT_TARGETS) - BEYOND_CATALOG_MD
    for name in CAAT_TARGETS:
        assert name in paper.targets, name
    assert set(paper.leaf_targets("caat")) >= {t for name in CAAT_TARGETS for t in paper.leaf_targets(name)}
    assert not NOT_YET & set(paper.targets)


@pytest.mark.parametrize("name", TABLES)
def test_tables_map_every_reference_cell_and_nothing_else(paper, name):
    target = paper.targets[name]
    with open(ROOT / "config" / "reference" / f"{target.reference}.csv", newline="") as f:
        cells = {(r["row"], r["column"]) for r in csv.DictReader(f)}
    rows = [r.key for r in target.rows]
    assert len(rows) == len(set(rows))
    assert set(rows) == {r for r, _ in cells}
    assert set(target.columns) == {c for _, c in cells}
    assert {(r, c) for r in rows for c in target.columns} == cells  # a full grid: no cell left unfilled
    # a budgeted column measures at its budget (paper scale)
    for column, attack in target.columns.items():
        if attack in cfg.PSEUDO_COLUMNS:
            continue
        spec = paper.attack_for(attack, target.rows[0].run)
        if "@" in column:
            assert spec.eps == pytest.approx(cfg.parse_budget(column.split("@")[1], column)), column
    assert paper.evaluations(name)  # every column resolves for every row's run


def test_table2_budgets_and_table4_standard_training(paper):
    t2 = paper.targets["caat_table2"]
    run = t2.rows[0].run
    linf = [paper.attack_for(a, run) for a in t2.columns.values() if a not in cfg.PSEUDO_COLUMNS and a != "clean"]
    assert {(s.norm, round(s.eps, 6)) for s in linf} == {("linf", round(8 / 255, 6)), ("l2", 0.5)}
    dlr = {r.key: paper.runs[r.run].method.get("attack")["type"] for r in t2.rows}
    assert dlr == {"pgd/caat_gamma0.8": "pgd", "pgd/caat_gamma0.9": "pgd", "pgd_dlr/caat_gamma0.8": "pgd-dlr",
                   "pgd_dlr/caat_gamma0.9": "pgd-dlr"}
    nt = [paper.runs[r.run].method for r in paper.targets["caat_table4"].rows if r.key.endswith("/nt")]
    assert nt and all(m.name == "vanilla" and m.get("lam") == 0 for m in nt)


def test_runs_carry_the_papers_hyperparameters(paper):
    runs = {rid: spec for rid, spec in caat_runs(paper).items() if not is_adapter(spec)}
    assert len(runs) > 100
    for rid, spec in runs.items():
        assert spec.epochs == 200 and spec.batch_size == 1024, rid          # Sec. 5.1, authors' script
        assert max(spec.lr.values) == pytest.approx(0.4), rid               # one-cycle peak 0.4
        assert spec.optimizer.name == "sgd" and spec.optimizer.momentum == 0.9, rid
        assert spec.bn_running_stats == "blocks", rid                          # none in the residual blocks
        attack = spec.method.get("attack")
        assert attack["norm"] == "linf" and attack["steps"] == 10, rid
        eps = 12 / 255 if rid.endswith("-train_eps12") else 8 / 255
        assert attack["eps"] == pytest.approx(eps), rid
        if attack["type"] == "pgd":
            assert attack["step_size"] == pytest.approx(2 / 255), rid             # PGD-10, step 2/255
    # the sweeps of Figure 6 (Sec. 5.3), on CIFAR-10 ResNet-18, per adversarial loss
    for sub, loss in zip("abc", ("ce", "trades", "clp")):
        rows = paper.targets[f"caat_figure6{sub}"].rows
        lams = [paper.runs[r.run].method.get("lam") for r in rows if r.series == "vanilla"]
        gammas = [paper.runs[r.run].method.get("gamma") for r in rows if r.series == "CA-AT"]
        assert lams == [0, 0.25, 0.5, 0.75, 1] and gammas == [0.7, 0.75, 0.8, 0.85, 0.9, 1]
        for r in rows:
            spec = paper.runs[r.run]
            assert (spec.paper_dataset, spec.paper_arch) == ("cifar10", "resnet18")
            m = spec.method
            if not (m.name == "vanilla" and m.get("lam") == 0) and not (m.name == "caat" and m.get("gamma") == 1):
                assert m.get("adv_loss") == loss, r
    # Figure 3: in-training attacks, and mu in the curves of every run it plots
    kinds = {paper.runs[r.run].method.get("attack")["type"] for r in paper.targets["caat_figure3b"].rows}
    assert kinds == {"apgd-ce", "apgd-dlr", "apgd-t"}
    for leaf in ("caat_figure3a", "caat_figure3b"):
        assert paper.targets[leaf].curve_columns == ("train_mu",)
        for r in paper.targets[leaf].rows:
            m = paper.runs[r.run].method
            assert m.name == "caat" or m.get("track_conflict") is True, r
    settings = {(paper.runs[r.run].paper_dataset, paper.runs[r.run].paper_arch)
                for r in paper.targets["caat_figure3a"].rows}
    assert settings == {(d, a) for d in ("cifar10", "cifar100") for a in ("resnet18", "resnet34")}


def test_adapter_runs_fine_tune_with_their_own_preset(paper):
    """Figures 4 and 5: the paper's sweeps on each panel's pretrained architecture and dataset, PGD-10 at the
    dataset's budget, and the fine-tuning preset (the paper gives none: docs/differences.md)."""
    panels = {"caat_figure4a": ("cub200", "swin_t_adapter"), "caat_figure4b": ("stanford-dogs", "swin_t_adapter"),
              "caat_figure4c": ("cifar10", "swin_t_adapter"), "caat_figure4d": ("cifar100", "swin_t_adapter"),
              "caat_figure5": ("stanford-dogs", "vit_b16_adapter")}
    assert paper.leaf_targets("caat_figure4") == ["caat_figure4a", "caat_figure4b", "caat_figure4c", "caat_figure4d"]
    preset = paper.config["train_presets"]["caat-adapter"]
    for name, setting in panels.items():
        rows = paper.targets[name].rows
        assert paper.targets[name].columns == {"SA": "clean", "AA": "aa"}
        lams = [paper.runs[r.run].method.get("lam") for r in rows if r.series == "vanilla"]
        gammas = [paper.runs[r.run].method.get("gamma") for r in rows if r.series == "CA-AT"]
        assert lams == [0, 0.5, 1] and gammas == [0.8, 0.9, 1], name
        for r in rows:
            spec = paper.runs[r.run]
            assert (spec.dataset, spec.arch) == setting and spec.pretrained.file is None, r  # a backbone, unset
            assert spec.epochs == preset["epochs"] and spec.batch_size == preset["batch_size"]
            assert spec.lr.as_dict() == preset["lr"] and spec.optimizer.as_dict() == preset["optimizer"]
            assert spec.optimizer.name == "sgd" and spec.optimizer.momentum == 0.9
            m = spec.method
            if m.name == "vanilla" and m.get("lam") == 0:
                continue
            assert m.get("adv_loss") == "ce"
            attack = m.get("attack")
            assert (attack["type"], attack["norm"], attack["steps"]) == ("pgd", "linf", 10)
            assert attack["eps"] == pytest.approx(8 / 255) and attack["step_size"] == pytest.approx(2 / 255)


def test_each_run_is_listed_once(paper):
    """No two CA-AT runs resolve to the same settings (the same run is one id, used by several targets)."""
    runs = caat_runs(paper)
    assert all(paper.train_id[rid] == rid for rid in runs)
    used = {r.run for name in CAAT_TARGETS for leaf in paper.leaf_targets(name)
            for r in paper.targets[leaf].rows}
    assert set(runs) <= used  # and every run is used


def test_fronts_have_both_series_and_a_clean_first_column(paper, demo):
    for catalog in (paper, demo):
        for name in FRONTS:
            target = catalog.targets[name]
            assert target.plot == "front" and next(iter(target.columns.values())) == "clean"
            assert {r.series for r in target.rows} == {"vanilla", "CA-AT"}, name
            assert all(r.label.startswith(("λ=", "γ=")) for r in target.rows)
    assert list(paper.targets["caat_figure7a"].columns.values()) == [
        "clean", "caat_t_fab@8_255", "caat_pgd@8_255", "caat_mim@8_255", "caat_t_pgd_l2", "aa"]


def test_demo_thinning_keeps_few_caat_trainings(demo):
    jobs = {demo.train_id[r.run] for name in CAAT_TARGETS if name not in ADAPTER_TARGETS
            for leaf in demo.leaf_targets(name) for r in demo.targets[leaf].rows}
    assert len(jobs) <= DEMO_MAX_CAAT_TRAINING
    # Figures 4(a)-(d) and 5 collapse onto the same few fine-tuning runs of the miniature (one pretrained backbone)
    adapter = {demo.train_id[r.run] for name in ADAPTER_TARGETS for leaf in demo.leaf_targets(name)
               for r in demo.targets[leaf].rows}
    assert len(adapter) == DEMO_ADAPTER_TRAINING
    assert {demo.runs[j].arch for j in adapter} == {"vit_tiny_adapter"}
    assert {demo.runs[j].pretrained.file for j in adapter} == {
        "results/demo/checkpoints/digits-vit_tiny-pgd_at/model.pt"}
    # the same collapse at the smoke scale: its CA-AT rows are the demo's (the adapter figures': some of them)
    smoke_cfg, demo_cfg = (cfg.load_yaml(ROOT / "config" / f"{s}.yaml")["targets"] for s in ("smoke", "demo"))
    adapter_leaves = {leaf for name in ADAPTER_TARGETS for leaf in demo.leaf_targets(name)}
    caat = {name: t for name, t in demo_cfg.items() if name.startswith("caat") and name not in adapter_leaves}
    assert caat and {name: smoke_cfg.get(name) for name in caat} == caat
    for leaf in adapter_leaves:
        smoke_rows = smoke_cfg[leaf]["rows"]
        assert smoke_rows and all(row in demo_cfg[leaf]["rows"] for row in smoke_rows), leaf
        assert {row["series"] for row in smoke_rows} == {"vanilla", "CA-AT"}


def test_demo_maps_the_budget_sweeps_by_the_one_rule_of_every_budget(demo):
    """A sweep's budgets keep their ratio to the standard budget as every other budget does (8/255 is digits' 0.3,
    in training, under AutoAttack and in the sweep alike); 32/255 (1.2) is capped at the image range by
    scale_map.eps_cap, and a relative step follows its budget."""
    run = demo.targets["caat_table1"].rows[0].run
    eps = [demo.attack_for(f"caat_pgd@{b}", run).eps for b in ("8_255", "16_255", "24_255", "32_255")]
    assert eps == pytest.approx([0.3, 0.6, 0.9, 1.0])
    assert demo.attack_for("caat_pgd@24_255", run).step_size == pytest.approx(0.9 / 4)
    l2 = [demo.attack_for(f"caat_pgd_l2@{b}", run).eps for b in ("0.5", "1", "1.5", "2")]
    assert l2 == pytest.approx([1.5 * b / (128 / 255) for b in (0.5, 1, 1.5, 2)])
    assert demo.attack_for("aa", run).eps == pytest.approx(0.3)
    config = copy.deepcopy(cfg.load_config(DEMO))
    config["scale_map"]["eps_cap"] = None  # without the cap 32/255 is past the image range, and the config says so
    with pytest.raises(cfg.ConfigError, match=r"scales to 1\.2 on digits.*scale_map\.eps_cap"):
        cfg.resolve(config)


def test_lines_over_budgets_refuse_other_columns_and_tables_refuse_a_bare_sweep():
    config = copy.deepcopy(cfg.load_config(SMOKE))
    config["targets"]["caat_figure8"]["columns"]["AA"] = "aa"
    with pytest.raises(cfg.ConfigError, match="caat_figure8.columns: a `lines` figure over attack budgets"):
        cfg.resolve(config)
    config = copy.deepcopy(cfg.load_config(SMOKE))
    config["targets"]["caat_table1"]["columns"]["pgd"] = "caat_pgd"
    with pytest.raises(cfg.ConfigError, match="caat_table1.columns.pgd: unknown attack 'caat_pgd'"):
        cfg.resolve(config)


@pytest.fixture()
def smoke(tmp_path):
    overlay = tmp_path / "results.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"},
                                       "scale_map": {"test_examples": None}}))  # exact fixture accuracies
    return cfg.load_catalog(SMOKE + [overlay])


def test_figure8_draws_accuracy_over_attack_budgets_from_metrics(smoke):
    target = smoke.targets["caat_figure8"]
    assert {job for _, job in smoke.evaluations("caat_figure8")} == {
        "clean", *(f"caat_{a}@{b}_255" for a in ("pgd", "fgsm") for b in (8, 16, 24, 32))}
    for i, row in enumerate(target.rows):
        write_metrics(smoke, row.run, "clean", 0.9)
        for k, b in enumerate((8, 16, 24, 32)):
            write_metrics(smoke, row.run, f"caat_pgd@{b}_255", 0.5 - 0.1 * k)
            write_metrics(smoke, row.run, f"caat_fgsm@{b}_255", 0.6 - 0.1 * k)
    fig = make_figure(smoke, "caat_figure8")  # a panel per attack (FGSM, PGD), a line per trained model
    assert [ax.get_title() for ax in fig.axes] == ["FGSM", "PGD"]
    for ax in fig.axes:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        # each trained model by its series, with the training budget that ran (tradeoff.report.what_ran.here_clause)
        ran_eps = {"8/255": 0.3, "12/255": 0.45}
        assert [line.get_label() for line in lines] == [
            f"{row.series} — here δ {ran_eps[row.series.split('δ=')[1]]}" for row in target.rows]
        assert len({line.get_color() for line in lines}) == len(lines)
        # the paper's budgets, each with the budget that ran at this scale (32/255 capped at the image range)
        assert [t.get_text() for t in ax.get_xticklabels()] == [
            "0", "8/255\n(0.3)", "16/255\n(0.6)", "24/255\n(0.9)", "32/255\n(1)"]
        assert "in brackets: the budget run at this scale" in ax.get_xlabel()
    pgd = next(line for line in fig.axes[1].get_lines() if line.get_label().startswith(target.rows[0].series))
    assert list(pgd.get_xdata()) == pytest.approx([0, 8 / 255, 16 / 255, 24 / 255, 32 / 255])
    assert list(pgd.get_ydata()) == pytest.approx([90, 50, 40, 30, 20])
    plt.close(fig)
    paths = build_target(smoke, "caat_figure8")
    assert all(p.stat().st_size > 1000 for p in paths)


def test_figure1_bars_table1s_runs_of_g_circ_and_g_star(paper, smoke):
    """CA-AT Figure 1 (right): SA and adversarial accuracy of ResNet-18 on CIFAR-10 trained with g∘ (the mean of
    g_c and g_a: vanilla λ = 0.5) and with g* (CA-AT, Table 1's γ = 0.8) against PGD: Table 1's own runs, so the
    figure trains nothing; it builds from their metrics."""
    target = paper.targets["caat_figure1"]
    runs = [row.run for row in target.rows]
    assert runs == ["cifar10-resnet18-vanilla-ce-lambda0_5", "cifar10-resnet18-caat-ce-gamma0_8"]
    assert set(runs) <= {row.run for row in paper.targets["caat_table1"].rows}
    vanilla, caat = (paper.runs[r] for r in runs)
    assert (vanilla.method.name, vanilla.method.get("lam"), caat.method.name, caat.method.get("gamma")) == (
        "vanilla", 0.5, "caat", 0.8)
    assert {(s.arch, s.dataset, s.method.get("attack")["type"]) for s in (vanilla, caat)} == {
        ("resnet18", "cifar10", "pgd")}
    assert "caat_figure1" in paper.leaf_targets("caat")
    for run, (sa, adv) in zip(runs, ((0.8, 0.4), (0.85, 0.45))):
        write_metrics(smoke, run, "clean", sa)
        write_metrics(smoke, run, "caat_pgd@8_255", adv)
    fig = make_figure(smoke, "caat_figure1")
    heights = sorted(round(p.get_height(), 6) for p in fig.axes[0].patches)
    assert heights == [40, 45, 80, 85]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [row.label for row in target.rows]
    plt.close(fig)
    assert all(p.stat().st_size > 1000 for p in build_target(smoke, "caat_figure1"))


def test_figure3_draws_a_panel_per_series_from_curves(tmp_path):
    overlay = tmp_path / "results.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"}}))
    paper = cfg.load_catalog(PAPER + [overlay])
    target = paper.targets["caat_figure3a"]
    for row in target.rows:
        write_curves(paper, row.run, [{"epoch": 1, "train_mu": 0.5}, {"epoch": 2, "train_mu": 0.7}])
    assert curve_panels(target) == 4
    fig = make_figure(paper, "caat_figure3a")
    assert [ax.get_title() for ax in fig.axes] == [
        "CIFAR-10, ResNet-18", "CIFAR-10, ResNet-34", "CIFAR-100, ResNet-18", "CIFAR-100, ResNet-34"]
    assert all(ax.get_ylabel() == "μ (gradient conflict)" for ax in fig.axes)
    assert all([line.get_label() for line in ax.get_lines()] == ["vanilla λ=0.5", "vanilla λ=1", "CA-AT γ=0.8",
                                                                 "CA-AT γ=0.9"] for ax in fig.axes)
    plt.close(fig)
    # rows without series: one panel per curve column, as before
    assert curve_panels(TargetSpec.from_dict({"kind": "figure", "curve_columns": ["a", "b"], "rows": [{"key": "k", "run": "r"}]})) == 2
