"""Each kind's checks with the kind: every figure kind and every analysis is declared once (tradeoff.core.targets), with
what it needs of a target and its check; the drawing and computing registries take only declared names, and a
declaration without its drawing or its computation (or the reverse) is caught here. The configuration checks its
targets from the declarations alone, without the analyses or the report (nor matplotlib)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from helpers import ROOT

from tradeoff.config.checks import _check_target
from tradeoff.core import targets
from tradeoff.core.errors import ConfigError


def test_every_declared_figure_kind_is_drawn_and_every_drawn_kind_declared():
    from tradeoff.report import kinds
    from tradeoff.report.figures import FIGURE_KINDS  # the layout imports every module that draws a kind

    assert FIGURE_KINDS == kinds.drawn() == sorted(targets.PLOTS)
    assert all(isinstance(kind.drawing, kinds.Kind) for kind in targets.PLOTS.values())


def test_a_figure_kind_is_one_declaration_and_one_drawing():
    """The report keeps no registry of kinds of its own: a kind's drawing hangs on its one declaration, and a second
    drawing of a kind is refused."""
    from tradeoff.report import figures, kinds

    for module in (kinds, figures):  # no mapping of kind names but the declarations themselves
        assert [k for k, v in vars(module).items() if isinstance(v, dict) and "front" in v and v is not targets.PLOTS] \
            == [], module.__name__
    with pytest.raises(ValueError, match="figure kind 'front' drawn twice"):
        kinds.figure_kind("front")(lambda catalog, name, target, axes: None)
    assert targets.PLOTS["front"].drawing.draw.__name__ == "plot_front"


def test_every_declared_analysis_is_computed_and_every_computed_analysis_declared():
    from tradeoff.analysis import ANALYSES  # imports every analysis module

    assert sorted(ANALYSES) == sorted(targets.ANALYSIS_KINDS)


def test_the_declared_figure_kinds_are_the_schemas():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    target = schema["properties"]["targets"]["additionalProperties"]["properties"]
    assert sorted(target["plot"]["enum"]) == sorted(targets.PLOTS)


def test_an_undeclared_name_is_refused_at_registration():
    from tradeoff.analysis.base import ANALYSES, register
    from tradeoff.report.kinds import figure_kind

    with pytest.raises(ValueError, match=r"figure kind 'pie' is not declared in tradeoff\.core\.targets; declared: \["):
        figure_kind("pie")(lambda catalog, name, target, axes: None)
    with pytest.raises(ValueError, match=r"analysis 'saliency' is not declared in tradeoff\.core\.targets; declared: \["):
        register("saliency")(lambda catalog, target, params: {})
    assert "pie" not in targets.PLOTS and "saliency" not in ANALYSES


def test_config_and_summary_import_neither_the_layer_above_nor_matplotlib():
    """Resolving the configuration (its targets' checks included) loads no analysis, report or matplotlib; the
    summary page loads nothing of the audit."""
    code = ("import json, sys\n"
            "from tradeoff import config as cfg\n"
            "cfg.resolve(cfg.load_config([cfg.ROOT / 'config/config.yaml', cfg.ROOT / 'config/smoke.yaml']))\n"
            "config = sorted(m for m in sys.modules if m.split('.')[:2] in (['tradeoff', 'analysis'], "
            "['tradeoff', 'report']) or m.split('.')[0] == 'matplotlib')\n"
            "import tradeoff.report.summary\n"
            "print(json.dumps([config, sorted(m for m in sys.modules if m.startswith('tradeoff.audit'))]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [[], []]


# -------------------------------------------------------------------------------- each kind's check, its words

ATTACKS = {"clean": {"type": "clean"}, "pgd20": {"type": "pgd", "eps": "8/255"},
           "sweep": {"type": "pgd", "eps": ["8/255", "16/255"]}, "nrob": {"type": "corruptions", "dataset": "c"}}
RUNS = {"r1": {}, "r2": {}}
ROWS = [{"key": "a", "run": "r1"}, {"key": "b", "run": "r2"}]
EXTERNAL_ROWS = [{"key": "a", "run": "r1"}, {"key": "e", "external": "ext", "run": "ext"}]
GRID = {"name": "disagreement_grid", "right": "a", "wrong": "b", "attack": "pgd20"}


def check(**target) -> None:
    _check_target("t", {"kind": "figure", "rows": ROWS, **target}, {}, RUNS, ATTACKS, {"ext": {}})


@pytest.mark.parametrize("target", [
    {"plot": "lines", "columns": {"c": "clean", "s": "sweep"}},           # a budget sweep named whole, and clean
    {"plot": "lines", "columns": {"s": "sweep@8_255"}, "rows": [{"key": "a", "run": "r1", "x": 1}]},
    {"plot": "front", "columns": {"c": "clean", "p": "pgd20", "s": "sweep@16_255"}},
    {"plot": "per_class", "columns": {"p": "pgd20"}},
    {"plot": "curves", "curve_columns": ["loss"]},
    {"plot": "grid", "analysis": GRID},                                   # an analysis: no columns needed
    {"plot": "tsne", "analysis": {"name": "learner_tsne", "attack": "pgd20@8_255"}},
    {"plot": "bars", "columns": {"p": "pgd20"}, "rows": EXTERNAL_ROWS},
])
def test_a_target_that_its_kind_accepts(target):
    check(**target)


@pytest.mark.parametrize("target, message", [
    ({"plot": "front", "columns": {"c": "clean"}},
     "targets.t.columns: a `front` figure needs at least 2 columns, the clean one (x) first and then one robust "
     "column per panel; got ['c']"),
    ({"plot": "front", "columns": {"p": "pgd20", "c": "clean"}},
     "targets.t.columns.p: the first column of a `front` figure is its x axis, the clean accuracy: an attack of "
     "type clean; got 'pgd20'"),
    ({"plot": "lines", "columns": {"s": "sweep", "p": "pgd20"}},
     "targets.t.columns: a `lines` figure over attack budgets takes budget sweeps (and a clean column, drawn at "
     "budget 0); got ['pgd20']"),
    ({"plot": "lines", "columns": {"p": "pgd20"}},
     "targets.t.rows: a `lines` figure needs an `x` value on every row (or budget-sweep columns)"),
    ({"plot": "bars", "columns": {"s": "sweep"}},
     "targets.t.columns.s: unknown attack 'sweep'; did you mean 'sweep@8_255'? allowed: ['clean', 'nrob', 'pgd20', "
     "'sweep@16_255', 'sweep@8_255'] (a budget sweep is named <attack>@<budget label>)"),
    ({"plot": "per_class", "columns": {"p": "pgd20", "n": "nrob"}},
     "targets.t.columns.n: a `per_class` figure draws one attack's per-example results; 'nrob' measures many "
     "corrupted sets"),
    ({"plot": "curves", "columns": {"p": "pgd20"}}, "targets.t: a figure needs `curve_columns`"),
    ({"plot": "curves", "curve_columns": ["loss"], "rows": EXTERNAL_ROWS},
     "targets.t.rows[1].external: 'ext' is an external model: a figure that draws the training curves of its rows "
     "needs trained runs"),
    ({"plot": "bars", "analysis": {"name": "caat_synthetic"}, "rows": EXTERNAL_ROWS},
     "targets.t.rows[1].external: 'ext' is an external model: a figure that reads an analysis of its rows needs "
     "trained runs"),
    ({"plot": "bars"}, "targets.t: a figure needs `columns`"),
    ({"plot": "tsne", "columns": {"p": "pgd20"}},
     "targets.t.analysis: a `tsne` figure reads a learner_tsne analysis; add `analysis: {name: learner_tsne, "
     "attack: pgd20, examples: ...}`"),
    ({"plot": "grid", "analysis": {"name": "learner_tsne"}},
     "targets.t.analysis: a `grid` figure reads a disagreement_grid analysis; add `analysis: {name: "
     "disagreement_grid, right: ..., wrong: ..., attack: ...}`"),
    ({"plot": "bars", "analysis": {"name": "saliency"}},
     "targets.t.analysis.name: unknown analysis 'saliency'; allowed: ['caat_synthetic', 'disagreement_grid', "
     "'learner_tsne']"),
    ({"plot": "bars", "analysis": {"name": "caat_synthetic", "attack": "nrob"}},
     "targets.t.analysis.attack: 'nrob' measures accuracy on corrupted images, it is not an attack"),
    ({"plot": "grid", "analysis": {**GRID, "attack": "pgd7"}},
     "targets.t.analysis.attack: unknown attack 'pgd7'; allowed: ['clean', 'nrob', 'pgd20', 'sweep']"),
    ({"plot": "tsne", "analysis": {"name": "learner_tsne", "perplexity": 0}},
     "targets.t.analysis.perplexity: expected a number > 0, got 0"),
    ({"plot": "bars", "columns": {"m": "mean"}}, "targets.t.columns.m: 'mean' is a table-only column"),
])
def test_each_kinds_check_refuses_in_its_words(target, message):
    with pytest.raises(ConfigError) as caught:
        check(**target)
    assert str(caught.value) == message


def test_only_a_figure_has_an_analysis():
    with pytest.raises(ConfigError, match=r"^targets\.t\.analysis: only a figure has an analysis$"):
        _check_target("t", {"kind": "table", "rows": ROWS, "columns": {"p": "pgd20"},
                            "analysis": {"name": "caat_synthetic"}}, {}, RUNS, ATTACKS)
