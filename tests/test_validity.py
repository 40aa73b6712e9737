"""Judgments on valid measurements only (issue 37): an adversarial example that breaks the threat model or a model's
non-finite logits never count as a success (tradeoff.attacks.base.judge, AutoAttack's chain, the evaluation's counts,
kept through a resume and over shards); a robust accuracy that a known bound rules out, or survivors crowded into one
class, is an attack failure, marked in every format and never judged (tradeoff.evaluation.bound,
tradeoff.report.records.attack_failure, the tables, the figure, the claims); a column a written audit finds overstated
is marked, and the build writes the audits its tables read (audit.build)."""

from __future__ import annotations

import csv
import json
import warnings

import pytest
import torch
import yaml
from helpers import ROOT, build_attack
from report_fixtures import outcomes, write_measurement
from torch import nn

from tradeoff import attacks
from tradeoff import config as cfg
from tradeoff.attacks.loop import COUNTS, run_attack
from tradeoff.core.spec import AttackSpec
from tradeoff.evaluation.bound import bound_record, constant_probes, whole_range
from tradeoff.evaluation.shards import shard_range
from tradeoff.evaluation.state import EvalState
from tradeoff.report import claims, records, table_model, table_render, tables

FILES = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]
DEMO = [ROOT / "config" / "config.yaml", ROOT / "config" / "demo.yaml"]
NT, AT, HALF = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"
N = 64


def _cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, 10)).eval()


@pytest.fixture(scope="module")
def data():
    model = _cnn()
    torch.manual_seed(1)
    x = torch.rand(40, 1, 8, 8)
    with torch.no_grad():
        y = model(x).argmax(1)  # every example correct clean
    return model, x, y


PGD = AttackSpec.from_dict({"type": "pgd", "eps": 0.1, "steps": 2, "step_size": 0.05, "random_start": True})


# ------------------------------------------------------------------------------ 3. no invalid example counts


def _with_first_pixel(x: torch.Tensor, value: float) -> torch.Tensor:
    out = x.clone()
    out[:, 0, 0, 0] = value
    return out


# each kind of invalid adversarial example (at the budget it is planted at): NaN, outside the eps-ball, below 0
PLANTED = {"non_finite": (0.1, lambda x, eps: _with_first_pixel(x, float("nan"))),
           "outside_budget": (0.1, lambda x, eps: (x + 3 * eps * torch.sign(x - 0.5)).clamp(0, 1)),
           "outside_range": (5.0, lambda x, eps: _with_first_pixel(x, -0.05))}


@pytest.mark.parametrize("why", list(PLANTED))
def test_an_invalid_adversarial_example_breaks_nothing_and_is_counted(data, monkeypatch, why):
    """Before: robust() took argmax of whatever the attack returned, so a NaN image (read as class 0), an image
    outside the eps-ball or outside [0, 1] could count as broken. Now the clean prediction stands, and the metrics
    count it."""
    model, x, y = data
    eps, plant = PLANTED[why]
    monkeypatch.setattr(attacks.ATTACKS["pgd"], "_perturb", lambda self, xb, yb: plant(xb, self.eps))
    out = run_attack(model, x, y, AttackSpec.from_dict({**PGD.as_dict(), "eps": eps}), seed=0, batch_size=16)
    assert torch.equal(out.robust_correct, out.clean_correct)  # nothing broken: every example robust
    assert out.invalid["invalid_examples"] == len(x) and out.invalid[why] == len(x)
    assert set(out.invalid) == set(COUNTS)


def test_a_valid_example_still_counts_as_broken(data):
    model, x, y = data
    strong = AttackSpec.from_dict({"type": "pgd", "eps": 0.5, "steps": 10, "step_size": 0.1, "random_start": True})
    out = run_attack(model, x, y, strong, seed=0, batch_size=16)
    assert out.accuracy < out.clean_accuracy and out.invalid["invalid_examples"] == 0


class _NaNOn(nn.Module):
    """Logits that are NaN where the input's first pixel is above ``threshold`` (every input by default)."""

    def __init__(self, model, threshold=-1.0):
        super().__init__()
        self.model, self.threshold = model, threshold

    def forward(self, x):
        out = self.model(x)
        bad = (x.flatten(1)[:, 0] > self.threshold)[:, None]
        return torch.where(bad, torch.full_like(out, float("nan")), out)


def test_non_finite_logits_are_never_a_correct_class(data):
    """argmax reads a row of NaN logits as class 0: before, every class-0 example of a model that outputs NaN counted
    as correct clean (and robust). Now no example is, and the clean pass's non-finite logits are counted."""
    model, x, _ = data
    y = torch.zeros(len(x), dtype=torch.long)
    out = run_attack(_NaNOn(model), x, y, PGD, seed=0, batch_size=16)
    assert not out.clean_correct.any() and not out.robust_correct.any()
    assert out.invalid["non_finite_logits_clean"] == len(x)


def test_non_finite_logits_on_a_valid_adversarial_example_count_as_broken_and_are_counted(data, monkeypatch):
    model, x, y = data
    wrapped = _NaNOn(model, threshold=2.0)  # finite on the clean images (in [0, 1]) ...
    monkeypatch.setattr(attacks.ATTACKS["pgd"], "_perturb",  # ... NaN where the attack raises the first pixel past 2
                        lambda self, xb, yb: torch.cat([xb[:, :, :1] * 0 + 1.0, xb[:, :, 1:]], 2))
    spec = AttackSpec.from_dict({**PGD.as_dict(), "eps": 1.0})
    clean = run_attack(wrapped, x, y, spec, seed=0, batch_size=16)
    assert clean.invalid["non_finite_logits"] == 0  # 1.0 is finite: the first pixel stays below 2
    wrapped.threshold = 0.99
    out = run_attack(wrapped, x, y, spec, seed=0, batch_size=16)
    flagged = int((x.flatten(1)[:, 0] <= 0.99).sum())  # those with a finite clean pass, NaN at the adversarial one
    assert out.invalid["non_finite_logits"] == flagged and out.invalid["invalid_examples"] == 0
    assert not out.robust_correct.any()


class _NaNGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class _NaNGradientModel(nn.Module):
    """A model whose input gradient is NaN everywhere (its outputs are the model's): APGD steps to NaN images."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(_NaNGradient.apply(x))


class _Saved:
    def __init__(self):
        self.data = None

    def load(self):
        return self.data

    def save(self, data):
        self.data = json.loads(json.dumps(data))


def test_autoattack_counts_the_nan_images_of_a_nan_gradient_model_as_not_broken(data):
    """The issue's case: on a model whose input gradient is NaN, APGD-L2 returned NaN images for 289 of 360 examples,
    counted as broken. AutoAttack's own chain now judges each component's images: none broken, all counted; the
    counts are kept in its saved progress, so a resumed batch gives the same."""
    model, x, y = data
    nan_model, norm, eps = _NaNGradientModel(model), "l2", 1.0
    saved = _Saved()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aa = build_attack("autoattack", nan_model, eps=eps, norm=norm, seed=3, components=["apgd-ce"], steps=5)
        robust = aa.robust(x, y, saved)
    assert robust.all()
    assert aa.invalid()["non_finite"] > 0 and aa.invalid()["invalid_examples"] == aa.invalid()["non_finite"]
    assert saved.data["invalid"] == aa.invalid()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = build_attack("autoattack", nan_model, eps=eps, norm=norm, seed=3, components=["apgd-ce"], steps=5)
        assert torch.equal(again.robust(x, y, saved), robust)  # resumed from the saved progress: nothing to run
    assert again.invalid() == aa.invalid()


def test_the_counts_survive_a_resume_and_add_up_over_shards(data, tmp_path, monkeypatch):
    model, x, y = data
    nan_model = _NaNGradientModel(model)
    spec = AttackSpec.from_dict({"type": "apgd-ce", "norm": "l2", "eps": 1.0, "steps": 5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = run_attack(nan_model, x, y, spec, seed=1, batch_size=10)
        assert full.invalid["non_finite"] > 0 and full.robust_correct.all()
        calls = {"n": 0}
        original = attacks.ATTACKS["apgd-ce"].robust

        def dies_on_third_batch(self, *args):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt("killed")
            return original(self, *args)

        monkeypatch.setattr(attacks.ATTACKS["apgd-ce"], "robust", dies_on_third_batch)
        path = tmp_path / "state"
        with pytest.raises(KeyboardInterrupt):
            run_attack(nan_model, x, y, spec, seed=1, batch_size=10, state=EvalState(path, "k"))
        resumed = run_attack(nan_model, x, y, spec, seed=1, batch_size=10, state=EvalState(path, "k"))
        assert resumed.invalid == full.invalid
        parts = [run_attack(nan_model, x[a:b], y[a:b], spec, seed=1, batch_size=10, first_batch=f)
                 for f, a, b in (shard_range(len(x), 10, k, 2) for k in range(2))]
    assert {k: sum(p.invalid[k] for p in parts) for k in COUNTS} == full.invalid


# ------------------------------------------------------------------------------------------------ 1. the bound


class _ByBrightness(nn.Module):
    """A classifier of 10 classes by the mean brightness of the image (class k for mean in [k/10, (k+1)/10))."""

    def forward(self, x):
        mean = x.flatten(1).mean(1)
        centres = (torch.arange(10, dtype=x.dtype) + 0.5) / 10
        return -100 * (mean[:, None] - centres[None]) ** 2


def _images(n=50, seed=0):
    """Images with both a 0 and a 1 pixel (as digits have): every constant image is at L-inf distance >= 0.5."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 8, 8, generator=g)
    x[:, 0, 0, 0], x[:, 0, 0, 1] = 0.0, 1.0
    return x


def _spec(eps, norm="linf"):
    return AttackSpec.from_dict({"type": "pgd", "norm": norm, "eps": eps, "steps": 1, "step_size": eps,
                                 "random_start": False})


def test_the_mid_grey_image_bounds_what_a_stuck_attack_may_leave_robust():
    """At L-inf 0.5 the mid-grey image is within the budget of every image in [0, 1]: at most the examples of its
    class can be robust. An attack that returns x (stuck) leaves all robust; the bound names the others."""
    model, x = _ByBrightness(), _images()
    y = model(x).argmax(1)
    grey = int(model(torch.full((1, 1, 8, 8), 0.5)).argmax(1))
    probes, ruled = constant_probes(model, x, y, _spec(0.5))
    assert [p["level"] for p in probes if p["reachable"]] == [0.5] and probes[5]["class"] == grey
    assert torch.equal(ruled, y != grey)
    record = bound_record(probes, ruled, False, y, torch.ones_like(ruled), torch.ones_like(ruled))
    assert record["robust_despite"] == (y != grey).nonzero().flatten().tolist() and record["ruled_out"] > 0
    assert record["accuracy_bound"] == pytest.approx(float((y == grey).float().mean()))
    below, _ = constant_probes(model, x, y, _spec(0.49))
    assert not any(p["reachable"] for p in below)  # nothing reachable below the bound: nothing claimed


def test_at_the_whole_range_any_correctly_classified_image_of_another_class_is_reachable():
    model, x = _ByBrightness(), _images()
    y = model(x).argmax(1)
    assert whole_range(_spec(1.0), x) and not whole_range(_spec(0.99), x)
    assert whole_range(_spec(8.0, "l2"), x) and not whole_range(_spec(7.9, "l2"), x)
    probes, ruled = constant_probes(model, x, y, _spec(1.0))
    record = bound_record(probes, torch.zeros_like(ruled), True, y, torch.ones_like(ruled), torch.ones_like(ruled))
    assert record["whole_range"] and record["ruled_out"] == len(y) and record["accuracy_bound"] == 0.0


def test_the_l2_bound_is_per_image():
    """L2: the mid-grey image is within eps of x where ||x - 0.5||_2 <= eps, image by image."""
    model, x = _ByBrightness(), _images()
    y = model(x).argmax(1)
    distance = (x.flatten(1) - 0.5).norm(dim=1)
    eps = float(distance.median())
    probes, ruled = constant_probes(model, x, y, _spec(eps, "l2"))
    grey = next(p for p in probes if p["level"] == 0.5)
    assert grey["reachable"] == int((distance <= eps * (1 - 1e-6)).sum())
    near = distance <= eps * (1 - 1e-6)
    assert (ruled[near] | (y[near] == grey["class"])).all()  # every image near it of another class is ruled out


def test_merged_shards_give_the_unsharded_bound():
    model, x = _ByBrightness(), _images(40)
    y = model(x).argmax(1)
    y[::3] = (y[::3] + 1) % 10
    spec = _spec(0.6)
    clean = model(x).argmax(1) == y
    probes, ruled = constant_probes(model, x, y, spec)
    whole = bound_record(probes, ruled, False, y, clean, clean)
    halves = [constant_probes(model, x[a:b], y[a:b], spec) for a, b in ((0, 25), (25, 40))]
    merged = bound_record([{**p, "reachable": halves[0][0][i]["reachable"] + halves[1][0][i]["reachable"]}
                           for i, p in enumerate(halves[0][0])], torch.cat([h[1] for h in halves]), False, y, clean,
                          clean)
    assert merged == whole and whole["robust_despite"]


# ------------------------------------------------------------------------------------ the report: failed cells


TRUST = {"kind": "table", "title": "Validity", "reference": "table1a", "compare": "at_beta1",
         "rows": [{"key": "nt", "run": NT}, {"key": "at_beta1", "run": AT}, {"key": "at_beta0.5", "run": HALF}],
         "columns": {"nat": "clean", "pgd20": "pgd20", "aa": "aa"}}


def _catalog(tmp_path, targets=None, audit_build=None):
    path = tmp_path / "overlay.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    body = {"paths": {"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
            "runtime": {"eval_unit": "attack"}, "targets": targets or {"validity": TRUST}}
    if audit_build is not None:
        body["audit"] = {"build": audit_build}
    path.write_text(yaml.safe_dump(body, allow_unicode=True, sort_keys=False))
    return cfg.load_catalog(FILES + [path])


def _despite(examples: list[int], bound=0.1) -> dict:
    return {"bound": {"probes": [{"level": 0.5, "class": 3, "reachable": N}], "whole_range": False,
                      "ruled_out": N - 6, "accuracy_bound": bound, "robust_despite": examples}}


def _fill(catalog, failed: dict | None = None, labels=None):
    """Clean, PGD-20 and AA outcomes per run; ``failed``: {(run, attack): record overrides}."""
    failed = failed or {}
    for i, (run, (clean, pgd, aa)) in enumerate({NT: (60, 20, 18), AT: (50, 30, 26), HALF: (55, 28, 25)}.items()):
        write_measurement(catalog, run, "clean", outcomes(clean, N, offset=i), labels=labels)
        for attack, robust in (("pgd20", pgd), ("aa", aa)):
            write_measurement(catalog, run, attack, outcomes(robust, N, offset=i), labels=labels,
                              clean=outcomes(clean, N, offset=i), **failed.get((run, attack), {}))


def test_a_cell_the_bound_rules_out_is_marked_in_every_format_never_bold_and_its_claim_untestable(tmp_path):
    """The case: PGD at a budget that reaches the mid-grey image leaves images robust that it could have made grey
    (class 3). The cell is ⊘ in md, csv, tex and html, with the legend's line and a note saying what was expected;
    it is not bold (it would be the column's best) nor compared; a claim on it is untestable."""
    catalog = _catalog(tmp_path)
    robust_at = [i for i, b in enumerate(outcomes(30, N, offset=1)) if b == "1"]
    _fill(catalog, {(AT, "pgd20"): _despite(robust_at[:5])})
    table = tables.build(catalog, "validity")
    cell = table.ours[(table_model.STRONG, "at_beta1", "pgd20")]
    assert cell.failed.startswith(f"5 of {N} test images left robust although a constant image of another class "
                                  "(grey level 0.5: class 3) lies within their budget: at most 10.0% can be robust")
    assert (table_model.STRONG, "at_beta1", "pgd20") not in table.bold
    assert (table_model.STRONG, "at_beta1", "pgd20") not in table.pvalues
    assert (table_model.STRONG, "at_beta0.5", "pgd20") in table.bold  # the best of the cells that stand
    md = table_render.render_markdown(table)
    assert f"46.9{table_model.FAILED} [" in md and "**46.9" not in md
    assert any(line.startswith(f"{table_model.FAILED}: the attack failed at this cell") for line in table.legend)
    assert any(n.startswith(f"{table_model.FAILED} AT (β=1) under PGD-20") and "at most 10.0% can be robust" in n
               for n in table.notes)
    rows = list(csv.DictReader(table_render.render_csv(table, catalog).splitlines()))
    assert next(r for r in rows if r["row"] == "at_beta1" and r["column"] == "pgd20")["attack_failed"] == cell.failed
    assert next(r for r in rows if r["row"] == "nt" and r["column"] == "pgd20")["attack_failed"] == ""
    assert r"46.9$\oslash$" in table_render.render_latex(table)
    assert f"46.9{table_model.FAILED}" in table_render.render_html(table) and "the attack failed at this cell" in \
        table_render.render_latex(table)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [
        {"id": "c", "paper": "P", "where": "T", "says": "AT is more robust",
         "test": {"kind": "better", "target": "validity", "columns": ["pgd20"], "row": "at_beta1", "than": "nt"}},
        {"id": "d", "paper": "P", "where": "T", "says": "AT is more robust under AA",
         "test": {"kind": "better", "target": "validity", "columns": ["aa"], "row": "at_beta1", "than": "nt"}}]}))
    found = claims.verdicts(catalog, path)
    assert found[0].verdict == "untestable here" and found[0].because.startswith(
        "the attack failed at pgd20 for at_beta1: 5 of 64 test images left robust")
    assert found[1].verdict != "untestable here"


def test_survivors_crowded_into_one_class_are_an_attack_failure(tmp_path):
    """The case: 36 of 37 class-3 images robust and no other (CA-AT at ε = 1 on the demo). A test plants it."""
    labels = [k % 10 for k in range(N)]
    crowded = "".join("1" if label == 3 else "0" for label in labels)  # every class-3 image, nothing else
    assert records.concentrated(tuple(labels), crowded)["class"] == 3
    catalog = _catalog(tmp_path)
    _fill(catalog)
    write_measurement(catalog, NT, "pgd20", crowded, labels=labels)
    table = tables.build(catalog, "validity")
    cell = table.ours[(table_model.STRONG, "nt", "pgd20")]
    assert cell.failed.startswith("7 of the 7 images left robust are of class 3 (10.9% of the test images; exact "
                                  "binomial p = ")
    assert f"10.9{table_model.FAILED}" in table_render.render_markdown(table)


@pytest.mark.parametrize("survivors,expected", [
    ({3: 36}, 3),                      # the case: all of one class
    ({3: 36, 1: 1}, 3),                # nearly all
    ({3: 4}, None),                    # too few to say (p = 1e-4 is not below 1e-3 / 10)
    ({c: 10 for c in range(10)}, None),  # spread
    ({0: 40, **{c: 20 for c in range(1, 10)}}, None),  # a class twice as robust as the others: legitimate
    ({0: 60, 1: 40}, None),            # half or less in one class
])
def test_the_concentration_rule(survivors, expected):
    labels = tuple(c for c in range(10) for _ in range(40))
    bits = "".join("1" if i - labels.index(c) < survivors.get(c, 0) else "0" for i, c in enumerate(labels))
    found = records.concentrated(labels, bits)
    assert (found and found["class"]) == expected


def test_a_failed_point_of_a_budget_sweep_figure_is_crossed_out_and_said(tmp_path):
    """CA-AT Figure 8's kind (lines over attack budgets): a point where the attack failed is drawn with a cross and
    the footer says what was expected; the legend defines the cross."""
    from tradeoff.report.figures import make_figure
    from tradeoff.report.style import FOOTNOTE, plt

    target = {"kind": "figure", "plot": "lines", "title": "sweep", "x_label": "attack budget",
              "rows": [{"key": "at", "run": AT, "series": "AT"}, {"key": "nt", "run": NT, "series": "NT"}],
              "columns": {"SA": "clean", "PGD": "caat_pgd"}}
    catalog = _catalog(tmp_path, {"sweep": target})
    jobs = catalog.column_jobs("caat_pgd")
    for i, run in enumerate((AT, NT)):
        write_measurement(catalog, run, "clean", outcomes(50, N, offset=i))
        for k, job in enumerate(jobs):
            robust = outcomes(max(30 - 10 * k, 6), N, offset=i)
            last = run == AT and job == jobs[-1]
            write_measurement(catalog, run, job, robust, clean=outcomes(50, N, offset=i),
                              **(_despite([j for j, b in enumerate(robust) if b == "1"], bound=0.0) if last else {}))
    fig = make_figure(catalog, "sweep")
    try:
        footer = " ".join(" ".join(t.get_text().split()) for t in fig.texts if t.get_gid() == FOOTNOTE)  # unwrapped
        legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        crosses = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() == "X" and
                   len(line.get_xdata())]
    finally:
        plt.close(fig)
    assert f"{table_model.FAILED} the attack failed: not robustness" in legend and len(crosses) == 1
    assert f"{table_model.FAILED}" in footer and "at most 0.0% can be robust" in footer


# ----------------------------------------------------------------------------------- 2. overstated columns


def _audit(catalog, model, checks, **top):
    path = catalog.layout.audit(model)["json"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"best_known": {"linf 0.3": {"accuracy": 0.156}}, "checks": checks, **top}))


def _column(name, gap, best=0.156, verdict="fail"):
    return {"name": f"column {name}", "verdict": verdict,
            "numbers": {"column": name, "gap": gap, "best_known": best}}


def test_a_column_a_built_audit_finds_overstated_is_marked_with_what_it_overstates(tmp_path):
    catalog = _catalog(tmp_path, audit_build=["validity"])
    _fill(catalog)
    _audit(catalog, AT, [_column("pgd20", 0.161), _column("aa", 0.011, verdict="pass")])
    table = tables.build(catalog, "validity")
    cell = table.ours[(table_model.STRONG, "at_beta1", "pgd20")]
    assert cell.overstates == pytest.approx(16.1) and cell.best_known == pytest.approx(15.6)
    assert table.ours[(table_model.STRONG, "at_beta1", "aa")].overstates is None
    assert f"46.9**{table_model.OVERSTATES} [" in table_render.render_markdown(table)  # still the best under PGD-20
    assert any(n.startswith(f"{table_model.OVERSTATES} AT (β=1) under PGD-20") and
               "overstates by 16.1 points: PGD-20's number, not the model's robustness (best known 15.6%" in n
               for n in table.notes)
    assert any(line.startswith(f"{table_model.OVERSTATES}: a written audit") for line in table.legend)
    assert r"$\uparrow$" in table_render.render_latex(table)
    row = next(r for r in csv.DictReader(table_render.render_csv(table, catalog).splitlines())
               if r["row"] == "at_beta1" and r["column"] == "pgd20")
    assert float(row["overstates"]) == pytest.approx(16.1) and float(row["best_known"]) == pytest.approx(15.6)
    path = tmp_path / "claims.yaml"  # a claim tested on the marked column says so
    path.write_text(yaml.safe_dump({"claims": [
        {"id": "c", "paper": "P", "where": "T", "says": "AT is more robust",
         "test": {"kind": "better", "target": "validity", "columns": ["pgd20"], "row": "at_beta1", "than": "nt"}}]}))
    [verdict] = claims.verdicts(catalog, path)
    assert f"at_beta1 46.9 ({table_model.OVERSTATES} overstates by 16.1: the attack's number, not the model's " \
           "robustness) vs nt 31.2 under pgd20" in verdict.numbers


def test_an_untrustworthy_audit_judges_no_column_and_an_unbuilt_one_is_not_read(tmp_path):
    catalog = _catalog(tmp_path, audit_build=["validity"])
    _fill(catalog)
    _audit(catalog, AT, [_column("pgd20", 0.161)], trustworthy=False)
    table = tables.build(catalog, "validity")
    assert table.ours[(table_model.STRONG, "at_beta1", "pgd20")].overstates is None
    assert any(n.startswith("The audit of AT (β=1)") and "no trustworthy figure" in n for n in table.notes)
    unbuilt = _catalog(tmp_path / "other", audit_build=[])
    _fill(unbuilt)
    _audit(unbuilt, AT, [_column("pgd20", 0.161)])  # written by hand (`snakemake audit_validity`), not by the build
    assert tables.build(unbuilt, "validity").ours[(table_model.STRONG, "at_beta1", "pgd20")].overstates is None


def test_the_build_audits_the_rows_of_audit_build_before_the_tables_that_read_them():
    """Snakemake's inputs and DVC's stages: at the demo Table 1(a)'s models are audited by the default build, each
    audit after the evaluations of the columns it audits, each table after its rows' audits, the summary after
    them."""
    from tradeoff.pipeline import dvc_export
    from tradeoff.report.build import target_inputs

    catalog = cfg.load_catalog(DEMO)
    models = catalog.table_models("table1a")
    assert catalog.built_audits() == models and len(models) == 9
    inputs = [str(p) for p in target_inputs(catalog, "table1a")]
    assert all(str(catalog.layout.audit(m)["json"]) in inputs for m in models)
    assert not any("/audit/" in str(p) for p in target_inputs(catalog, "caat_table1"))  # not audited by the build
    assert (AT, "pgd20") in catalog.reported_evaluations(AT) and (AT, "aa") in catalog.reported_evaluations(AT)
    jobs = dvc_export.jobs(catalog)
    assert set(jobs["audit"]) == set(models)
    stages = dvc_export.pipeline(catalog, [str(f) for f in ("config/config.yaml", "config/demo.yaml")], jobs)["stages"]
    audit = next(s["do"] for name, s in stages.items() if name.startswith("audit"))
    table = next(s["do"] for name, s in stages.items() if name.startswith("table"))
    assert str(catalog.layout.folder("metrics")) in audit["deps"] and str(catalog.layout.folder("audit")) in \
        table["deps"] and str(catalog.layout.folder("audit")) in stages["summary"]["deps"]
    assert not cfg.load_catalog(FILES).built_audits()  # the smoke scale audits nothing by default


def test_the_paper_scale_audits_every_table_a_claim_tests():
    """`audit.build` at paper scale names every table config/claims.yaml tests (the tables the summary's verdicts
    use), and a name that is no table is refused before any job."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    tested = {name for claim in claims.load_claims(catalog) for part in (claim.get("test"), claim.get("premise"))
              if part for name in ([part["target"]] if isinstance(part["target"], str) else part["target"])}
    tabled = {n for n in tested if catalog.targets[n].kind == "table"}
    assert tabled <= set(catalog.audit.build)


def test_audit_build_must_name_tables(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"audit": {"build": ["caat_figure8"]}}))
    with pytest.raises(cfg.ConfigError, match="audit.build: 'caat_figure8' is a figure with no table"):
        cfg.load_catalog(FILES + [path])
    path.write_text(yaml.safe_dump({"audit": {"build": ["tabel1a"]}}))
    with pytest.raises(cfg.ConfigError, match="audit.build: unknown target 'tabel1a'"):
        cfg.load_catalog(FILES + [path])
