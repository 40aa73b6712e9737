"""The papers' claims as the papers state them, and verdicts that say why (config/claims.yaml,
tradeoff.report.claims): one test image counted once, a margin for "not worse", Holm within each paper, untestable
where this scale cannot decide, and a summary that opens with what the scale can and cannot say."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import ROOT
from report_fixtures import write_measurement
from scipy.stats import binomtest

from tradeoff import config as cfg
from tradeoff.report import claims, stats
from tradeoff.report.summary import build_summary

PAPER = [ROOT / "config" / "config.yaml"]
DEMO = PAPER + [ROOT / "config" / "demo.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
PAPERS = ROOT.parent / "shared" / "papers"
NT, AT, HALF = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"
GEN = "cifar10-resnet18-generalist"
N = 64
TABLE = {"kind": "table", "title": "Table 1(a): CIFAR-10, ResNet-18, eps = 8/255", "reference": "table1a",
         "compare": "at_beta1",
         "rows": [{"key": "nt", "run": NT}, {"key": "at_beta1", "run": AT}, {"key": "at_beta0.5", "run": HALF},
                  {"key": "generalist", "run": GEN}],
         "columns": {"nat": "clean", "pgd20": "pgd20", "pgd100": "pgd100"}}


def _catalog(tmp_path, targets=None):
    body = {"paths": {"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
            "runtime": {"eval_unit": "attack"}, "targets": targets or {"t": TABLE}}
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(body, allow_unicode=True, sort_keys=False))
    return cfg.load_catalog(SMOKE + [path])


def _bits(ones: set[int] | range) -> str:
    return "".join("1" if i in ones else "0" for i in range(N))


def _write(catalog, run, **columns):
    """Per-example outcomes of a run under each attack (a set of the images it gets right)."""
    for attack, ones in columns.items():
        write_measurement(catalog, run, attack, _bits(ones), **({"selected_epoch": 1} if attack else {}))


def _claims(tmp_path, tests: list[dict], papers=None, **top) -> "Path":
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({**top, "claims": [
        {"id": f"c{i}", "paper": (papers or ["P"] * len(tests))[i], "where": "Table 1", "says": "it is better",
         "test": t} for i, t in enumerate(tests)]}, allow_unicode=True))
    return path


def _better(row, than, columns, **extra):
    return {"kind": "better", "target": "t", "columns": columns, "row": row, "than": than, **extra}


# ------------------------------------------------------------------------------------------ one image once


def test_a_near_copy_column_does_not_turn_an_inconclusive_claim_into_holds(tmp_path):
    """PGD-100 repeating PGD-20 on every image: pooling their discordant pairs (the old test) doubled the evidence;
    each combination keeps the image the unit, so the copy adds nothing, and n is said in test images."""
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(N), pgd20=range(0, 30), pgd100=range(0, 30))
    _write(catalog, AT, clean=range(N), pgd20=range(5, 30), pgd100=range(5, 30))   # 5 discordant, all for GEN
    path = _claims(tmp_path, [_better("generalist", "at_beta1", ["pgd20"])] +
                   [_better("generalist", "at_beta1", ["pgd20", "pgd100"], combine=c) for c in stats.COMBINE],
                   papers=["A", "B", "C", "D"])
    found = claims.verdicts(catalog, path)
    assert found[0].test.p_for == pytest.approx(0.5 ** 5)          # exact McNemar, 5 of 5
    for f in found[1:]:      # the copy adds no evidence: all and mean keep the one column's p, any (Holm) doubles it
        combine = f.claim["test"]["combine"]
        expected = 2 * found[0].test.p_for if combine == "any" else found[0].test.p_for
        assert f.test.p_for == pytest.approx(expected, rel=0.05, abs=0.002), combine
        assert f.test.images == N
    # the former test pooled both columns' discordant pairs: 10 of 10, p = 0.001, "holds"
    assert binomtest(10, 10, 0.5, alternative="greater").pvalue < 0.002 < found[0].test.p_for
    assert f"n = {N} test images" in claims.line(found[3])


def test_several_columns_declare_how_they_combine(tmp_path):
    catalog = _catalog(tmp_path)
    bad = _claims(tmp_path, [_better("generalist", "at_beta1", ["nat", "pgd20"])])
    with pytest.raises(cfg.ConfigError, match=r"claim c0.test.combine: several columns combine as one of "
                                              r"\['all', 'any', 'mean'\]"):
        claims.load_claims(catalog, bad)


# ------------------------------------------------------------------------------------------ verdicts say why


def test_each_verdict_and_its_reason(tmp_path):
    target = {**TABLE, "rows": TABLE["rows"] + [{"key": "rst", "run": AT}]}
    catalog = _catalog(tmp_path, {"t": target})
    _write(catalog, GEN, clean=range(0, 60), pgd20=range(0, 30), pgd100=set())
    _write(catalog, AT, clean=range(0, 40), pgd20=range(3, 30), pgd100=set())
    _write(catalog, HALF, clean=range(0, 60), pgd20=range(0, 30), pgd100=set())
    _write(catalog, NT, clean=range(0, 64), pgd20=set(), pgd100=set())
    path = _claims(tmp_path, [
        _better("generalist", "at_beta1", ["nat"]),                      # 20 of 20 discordant: holds
        _better("at_beta1", "generalist", ["nat"]),                      # the reverse: fails
        _better("generalist", "at_beta1", ["pgd20"]),                    # 3 of 3: p = 0.125, inconclusive
        _better("generalist", "at_beta0.5", ["pgd20"]),                  # identical outcomes: an exact tie
        _better("generalist", "at_beta1", ["pgd100"]),                   # both at 0%: untestable
        _better("rst", "at_beta1", ["nat"]),                             # one training job
        _better("generalist", "at_beta1", ["pgd200"]),                   # not in this configuration
        _better("at_beta1", "generalist", ["pgd20"]),                    # the estimate against the claim
    ], papers=[f"P{i}" for i in range(8)])
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["holds", "fails", "inconclusive", "inconclusive", "untestable here",
                                          "untestable here", "untestable here", "inconclusive"]
    assert "about" in found[2].because and "test images would detect it with 80% power" in found[2].because
    assert "this scale's test split" in found[2].because
    assert found[3].because == "an exact tie: the outcomes agree on every test image"
    assert found[4].because == "every compared column has both rows at 0%: no test image can separate them"
    assert "one training job at this scale" in found[5].because
    assert "not testable in this configuration: t has no column 'pgd200'" in found[6].because
    assert found[7].because == "the estimate goes against the claim, not significantly"
    holds = found[0]
    assert holds.test.diff == pytest.approx(100 * 20 / 64) and holds.test.lo < holds.test.diff < holds.test.hi
    assert holds.test.detectable is not None and holds.test.images == N
    text = claims.line(holds)
    assert re.search(r"Difference \+31\.2 points \(generalist vs at_beta1 under nat\), 95% interval "
                     r"\[\+\d+\.\d, \+\d+\.\d\], n = 64 test images \(one seed\)", text)
    assert "the smallest difference detected with 80% power at this n, the whole procedure at the level Holm " \
           "leaves it (0.05)" in text


def test_a_row_selected_before_its_mechanism_and_an_unmet_premise_are_untestable(tmp_path):
    catalog = _catalog(tmp_path)
    early = {"selected_epoch": 1, "mechanism": {"epoch": 2, "what": "γ < 1 from epoch 2"}}
    for attack, ones in {"clean": range(60), "pgd20": range(30)}.items():
        write_measurement(catalog, GEN, attack, _bits(ones), **early)
    _write(catalog, AT, clean=range(0, 40), pgd20=range(3, 30))
    _write(catalog, HALF, clean=range(0, 40), pgd20=range(0, 20))
    _write(catalog, NT, clean=range(0, 64), pgd20=range(0, 20))
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [
        {"id": "early", "paper": "P", "where": "T", "says": "s", "test": _better("generalist", "at_beta1", ["nat"])},
        {"id": "premise", "paper": "Q", "where": "T", "says": "s", "test": _better("at_beta0.5", "nt", ["pgd20"]),
         "premise": {"target": "t", "columns": ["nat"], "row": "nt", "than": "at_beta0.5", "within": 2}},
        {"id": "met", "paper": "R", "where": "T", "says": "s", "test": _better("at_beta0.5", "nt", ["pgd20"]),
         "premise": {"target": "t", "columns": ["pgd20"], "row": "nt", "than": "at_beta0.5", "within": 2}},
        {"id": "theorem", "paper": "R", "where": "T", "says": "s", "untestable": "a theorem"}]}, allow_unicode=True))
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["untestable here", "untestable here", "inconclusive", "untestable here"]
    assert "selected at epoch 1, before its mechanism acts (from epoch 2" in found[0].because
    assert found[1].because.startswith("its premise is unmet: nt minus at_beta0.5 under nat is +37.5 points")
    assert found[3].because == "a theorem"


def _worse(**margin):
    return {"kind": "not_worse", "target": "t", "columns": ["pgd20"], "row": "generalist", "than": "at_beta1",
            "margin": {"reason": "a test's", **margin}}


def test_not_worse_is_judged_on_a_margin_in_the_claims_terms(tmp_path):
    """One image lower of 64: the old rule said "holds" (not significantly lower). The margin is a share of the
    reference's accuracy at this scale, declared per claim with its reason: a hundredth of it (0.5 points here)
    cannot be excluded on 64 images, inconclusive; a third (10 points) holds; 30 images lower fails."""
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 40), pgd20=range(1, 30))
    _write(catalog, AT, clean=range(0, 40), pgd20=range(0, 30))
    _write(catalog, HALF, clean=range(0, 40), pgd20=range(0, 60))
    path = _claims(tmp_path, [_worse(share=0.01), _worse(share=1 / 3), {**_worse(share=0.1), "than": "at_beta0.5"}],
                   papers=["A", "B", "C"])
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["inconclusive", "holds", "fails"]
    assert found[0].margin == pytest.approx(0.01 * 100 * 30 / 64) and found[1].margin == pytest.approx(100 * 10 / 64)
    assert found[0].test.lo < -found[0].margin < found[0].test.hi      # the interval straddles -margin
    assert "; margin 0.47 points (1% of than's accuracy: a test's)" in claims.line(found[0])
    assert "; margin 16 points (33.3333% of than's accuracy: a test's)" in claims.line(found[1])
    # the smallest true difference at which it holds with 80% power may be a loss, never below -margin
    assert -found[1].margin < found[1].test.detectable < 0


@pytest.mark.parametrize("margin, message", [
    (None, r"a not_worse claim declares its margin as \{share: a fraction of than's accuracy in \(0, 1\), reason"),
    (2, r"got 2"),
    ({"share": 0.1}, r"got \{'share': 0.1\}"),
    ({"share": 1.5, "reason": "r"}, r"got \{'reason': 'r', 'share': 1.5"),
    ({"share": 0.1, "reason": " "}, r"got \{'reason': ' '"),
])
def test_a_not_worse_claim_declares_its_margin_as_a_share_with_its_reason(tmp_path, margin, message):
    catalog = _catalog(tmp_path)
    worse = {"kind": "not_worse", "target": "t", "columns": ["pgd20"], "row": "generalist", "than": "at_beta1"}
    with pytest.raises(cfg.ConfigError, match=rf"claim c0\.test\.margin: .*{message}"):
        claims.load_claims(catalog, _claims(tmp_path, [worse if margin is None else {**worse, "margin": margin}]))
    with pytest.raises(cfg.ConfigError, match=r"no file-wide margin; each not_worse claim declares its own"):
        claims.load_claims(catalog, _claims(tmp_path, [_worse(share=0.1)], margin=2))


def test_holm_within_each_paper(tmp_path):
    """Two claims at p = 1/32 each: each holds alone; as one paper's family Holm makes both inconclusive."""
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 40), pgd20=range(0, 30))
    _write(catalog, AT, clean=range(5, 40), pgd20=range(5, 30))
    tests = [_better("generalist", "at_beta1", ["nat"]), _better("generalist", "at_beta1", ["pgd20"])]
    apart = claims.verdicts(catalog, _claims(tmp_path, tests, papers=["A", "B"]))
    assert [f.verdict for f in apart] == ["holds", "holds"]
    together = claims.verdicts(catalog, _claims(tmp_path, tests, papers=["A", "A"]))
    assert [f.verdict for f in together] == ["inconclusive", "inconclusive"]
    assert together[0].adjusted[0] == pytest.approx(2 / 32) and together[0].family == 2
    assert "Holm over the paper's 2 claims" in claims.line(together[0])
    assert ("within each paper Holm's correction keeps the chance of any false “holds” at most 5%, and separately "
            "of any false “fails” at most 5%") in claims.tally(together)


def test_a_claim_over_several_configurations_tests_every_pair(tmp_path):
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 50), pgd20=range(0, 30))
    _write(catalog, NT, clean=range(0, 64), pgd20=range(0, 30))
    _write(catalog, AT, clean=range(0, 30), pgd20=range(5, 30))
    _write(catalog, HALF, clean=range(0, 30), pgd20=range(5, 30))
    both = _better(["generalist", "nt"], ["at_beta1", "at_beta0.5"], ["nat"], combine="all")
    one_fails = _better("generalist", ["at_beta1", "nt"], ["nat"], combine="all")
    found = claims.verdicts(catalog, _claims(tmp_path, [both, one_fails], papers=["A", "B"]))
    assert found[0].verdict == "holds" and "every one of 4 pairs of rows" in found[0].test.how
    assert found[1].verdict == "fails"      # Generalist is below NT on clean: one pair reversed


def test_a_trend_has_an_interval_and_a_criterion(tmp_path):
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 62), pgd20=range(0, 40), pgd100=range(0, 38))
    _write(catalog, AT, clean=range(0, 60), pgd20=range(0, 30), pgd100=range(0, 30))
    path = _claims(tmp_path, [
        {"kind": "trend", "target": "t", "columns": ["nat", "pgd20", "pgd100"], "row": "generalist", "than": None},
        {"kind": "trend", "target": "t", "columns": ["pgd20", "pgd100"], "row": "at_beta1", "than": None},
    ], papers=["C", "D"])
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["holds", "inconclusive"]
    assert found[0].test.label == "generalist nat minus pgd100" and found[0].test.lo > 0
    assert found[1].because == "an exact tie: the outcomes agree on every test image"


# ------------------------------------------------------------------------------------------ fronts


def _front_catalog(tmp_path, rows, name="f"):
    front = {"kind": "figure", "plot": "front", "title": "front", "rows": rows,
             "columns": {"SA": "clean", "AA": "pgd20"}}
    return _catalog(tmp_path, {"t": TABLE, name: front})


FRONT = {"kind": "front", "target": "f", "columns": ["SA", "AA"], "row": "CA-AT", "than": "vanilla"}


def _area(points) -> float:
    """The former criterion: the area of the plane a series' points dominate from the origin."""
    xs = sorted(points, key=lambda p: -p[0])
    best, total = 0.0, 0.0
    for k, (x, y) in enumerate(xs):
        best = max(best, y)
        total += (x - (xs[k + 1][0] if k + 1 < len(xs) else 0.0)) * best
    return total


def test_fronts_compare_robust_accuracy_at_matched_clean_accuracy_over_the_range_both_cover(tmp_path):
    """The papers' "upper right": CA-AT's front above vanilla's at the clean accuracy both sweeps reach (59-70%),
    each front its non-dominated points joined by straight lines. Vanilla's extra point at a clean accuracy no
    CA-AT point reaches (98% clean) makes vanilla's area from the origin the larger: the former test said "fails";
    at matched clean accuracy CA-AT is 9 points above."""
    trades = "cifar10-resnet18-trades-lambda6"
    rows = [{"key": "caat_a", "run": GEN, "series": "CA-AT"}, {"key": "caat_b", "run": AT, "series": "CA-AT"},
            {"key": "vanilla_a", "run": HALF, "series": "vanilla"},
            {"key": "vanilla_b", "run": NT, "series": "vanilla"},
            {"key": "vanilla_0", "run": trades, "series": "vanilla"}]
    catalog = _front_catalog(tmp_path, rows)
    points = {GEN: (45, 26), AT: (38, 29), HALF: (45, 19), NT: (38, 22), trades: (63, 20)}   # (clean, robust) of 64
    for run, (clean, robust) in points.items():
        _write(catalog, run, clean=range(clean), pgd20=range(robust))
    found = claims.verdicts(catalog, _claims(tmp_path, [FRONT, {**FRONT, "row": "vanilla", "than": "CA-AT"}],
                                             papers=["A", "B"]))
    assert [f.verdict for f in found] == ["holds", "fails"]
    # over clean accuracy [38/64, 45/64]: CA-AT's line from 29 to 26 images (mean 27.5), vanilla's from 22 towards
    # its 98% point's 20 (vanilla's 45/64 point, 19, lies below that line: off its front), 22 to 21.44 (mean 21.72)
    assert found[0].test.diff == pytest.approx(100 * (27.5 - 21.72) / 64) and found[0].test.lo > 0
    assert "over 59.4–70.3% (the clean accuracy both fronts cover)" in found[0].test.how
    assert "points of robust accuracy at matched clean accuracy" in claims.line(found[0])
    caat = [(points[r][0] / N, points[r][1] / N) for r in (GEN, AT)]
    vanilla = [(points[r][0] / N, points[r][1] / N) for r in (HALF, NT, trades)]
    assert _area(vanilla) > _area(caat)        # the former criterion: vanilla's front "dominates a larger area"


def test_fronts_that_share_no_clean_accuracy_are_untestable_and_a_thinned_sweep_names_what_it_lacks(tmp_path):
    rows = [{"key": "caat_gamma0.8", "run": GEN, "series": "CA-AT", "label": "γ=0.8"},
            {"key": "vanilla_lambda0.5", "run": HALF, "series": "vanilla", "label": "λ=0.5"},
            {"key": "vanilla_lambda1", "run": NT, "series": "vanilla", "label": "λ=1"}]
    catalog = _front_catalog(tmp_path, rows, "caat_figure6a")
    _write(catalog, GEN, clean=set(range(60)), pgd20=set(range(30)))
    _write(catalog, HALF, clean=set(range(40)), pgd20=set(range(20)))
    _write(catalog, NT, clean=set(range(50)), pgd20=set(range(10)))
    front = {**FRONT, "target": "caat_figure6a"}
    found = claims.verdicts(catalog, _claims(tmp_path, [front]))
    assert found[0].verdict == "untestable here"
    assert "the two fronts share no range of clean accuracy (93.8–93.8% against 62.5–78.1%)" in found[0].because
    _write(catalog, HALF, clean=set(range(62)), pgd20=set(range(20)))
    _write(catalog, NT, clean=set(range(50)), pgd20=set(range(25)))
    found = claims.verdicts(catalog, _claims(tmp_path, [front]))
    # CA-AT's one point (60, 30 of 64) against vanilla's line from (50, 25) to (62, 20) there: 20.8
    assert found[0].verdict != "untestable here" and found[0].test.diff == pytest.approx(100 * (30 - 25 + 50 / 12) / 64)
    # the paper's Figure 6(a) sweeps λ over 5 values and γ over 6: the scale's thinning is said, point by point
    assert ("caat_figure6a at this scale: the paper's sweep less vanilla λ=0, λ=0.25, λ=0.75 and CA-AT γ=0.7, "
            "γ=0.75, γ=0.85, γ=0.9, γ=1") in found[0].because


# ------------------------------------------------------------------------------------------ the shipped claims


def _words(text: str) -> str:
    """Text as a run of lower-case words and numbers, markup gone: LaTeX commands and math-italic letters as the
    letters they spell, letters and digits split apart (the papers' extracted text glues "8𝛾0.8")."""
    import unicodedata

    text = unicodedata.normalize("NFKC", text)
    for command, letter in (("varepsilon", "ε"), ("epsilon", "ε"), ("gamma", "γ"), ("beta", "β"),
                            ("lambda", "λ"), ("delta", "δ")):
        text = re.sub(rf"\\{command}", letter, text)
    return " ".join(re.findall(r"[^\W\d_]+|\d+", text.lower()))


def _quoted(says: str, paper: str) -> bool:
    """Whether the quote's words stand in the paper in order, each within a few words of markup of the last."""
    words = _words(says).split()
    pattern = r"\b" + r"(?: \S+){0,12}? ".join(map(re.escape, words)) + r"\b"
    return re.search(pattern, paper) is not None


def test_every_claim_quotes_its_papers_words():
    if not PAPERS.is_dir():
        pytest.skip(f"{PAPERS} is not here")
    found = claims.load_claims(cfg.load_catalog(PAPER))
    texts = {"Generalist": ["generalist_cvpr2023.md", "generalist_cvpr2023_appendix.md"],
             "Zipper": ["zipper_iclr_submission.md", "zipper_rebuttal.md"], "CA-AT": ["caat.txt"]}
    words = {paper: _words(" ".join((PAPERS / f).read_text() for f in files)) for paper, files in texts.items()}
    wrong = [c["id"] for c in found if not _quoted(c["says"], words[c["paper"].split(" (")[0]])]
    assert not wrong, f"not the paper's words: {wrong}"
    assert not _quoted("Generalist consistently improves robust accuracy", words["Generalist"])


def test_the_shipped_claims_cover_the_papers_one_quote_one_claim():
    for files in (PAPER, DEMO, SMOKE):
        found = claims.load_claims(cfg.load_catalog(files))
        assert len(found) >= 24
        assert {c["paper"].split(" (")[0] for c in found} == {"Generalist", "Zipper", "CA-AT"}
        assert len({c["says"] for c in found}) == len(found)
    catalog = cfg.load_catalog(PAPER)
    # at the paper scale every claim names only what the catalog has
    assert [c["id"] for c in found if c.get("test") and claims.missing(catalog, c["test"])] == []
    ids = {c["id"] for c in found}
    assert {"zipper-tinyimagenet-nrob", "caat-stronger-training-vanilla", "caat-stronger-training-caat",
            "generalist-not-slower", "caat-cifar100", "zipper-l2", "zipper-increasing-gamma"} <= ids


# ------------------------------------------------------------------------------------------ the summary


def _sentences(text: str) -> list[str]:
    return [s for s in (x.strip() for x in re.split(r"(?<=[.:;])\s+|\n", text)) if len(s) > 3]


def test_the_summary_opens_with_what_the_scale_can_say_and_the_html_carries_every_sentence(tmp_path):
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 60), pgd20=range(0, 30), pgd100=range(0, 30))
    _write(catalog, AT, clean=range(0, 40), pgd20=range(3, 30), pgd100=range(3, 30))
    _write(catalog, HALF, clean=range(0, 60), pgd20=range(0, 30), pgd100=range(0, 30))
    _write(catalog, NT, clean=range(0, 64), pgd20=set(), pgd100=set())
    (tmp_path / "claims.yaml").write_text((ROOT / "config" / "claims.yaml").read_text())
    paths = build_summary(catalog)
    md, page = paths["md"].read_text(), paths["html"].read_text()
    lines = md.splitlines()
    assert lines[2] == "## What the smoke scale can and cannot say"
    scale = lines[4]
    assert "8×8 digits" in scale or "digits" in scale
    for said in ("seed", "test images", "epoch"):
        assert said in scale.lower(), said
    assert md.index("## What the smoke scale") < md.index("## The papers' claims at the smoke scale")
    # NT's clean 64/64 against the paper's 93.04: on digits, not CIFAR-10, so not listed as a difference (and a
    # column that is "—" on every row is left out)
    assert "paper outside our 95% interval" not in md
    # every sentence of the Markdown, markup (links and the embedded image) aside, is in the HTML
    inline = re.sub(r"</?(?:a|b|code)\b[^>]*>", "", page)  # inline marks: no word boundary
    plain = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", inline)))
    text = re.sub(r"[*#|]", " ", re.sub(r"`", "", re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", md)))
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("Each tested claim's difference"))
    missing = [s for s in _sentences(text) if re.sub(r"\s+", " ", s.strip(" -")) not in plain
               and not set(s) <= set("-| ")]
    assert not missing, missing[:5]


def _pair(a, b, columns=None, **test):
    """A claim of paper P on arrays, (seeds, columns, images) each (claims.decide, as verdicts runs it)."""
    columns = columns or [f"col{i}" for i in range(a.shape[1])]
    claim = {"id": test.pop("id", "c"), "paper": test.pop("paper", "P"), "where": "w", "says": "s",
             "test": {"kind": "better", "target": "t", "columns": columns, "row": "a", "than": "b", **test}}
    return claims.Evidence(claim, [claims.Pair("a vs b", np.asarray(a, float), np.asarray(b, float), columns)])


def _ties(m, paper="P"):
    x = np.zeros((1, 1, 50))
    x[..., :25] = 1
    return [_pair(x, x.copy(), id=f"tie{i}", paper=paper) for i in range(m)]


def test_a_mean_that_balances_to_zero_is_no_effect_to_power():
    """Per-image differences of several columns are fractions (±1/3 ...): where they balance, their mean is float
    noise (~1e-17), not an effect that some astronomical number of test images would detect."""
    n = 360
    a, b = np.zeros((1, 3, n)), np.zeros((1, 3, n))
    a[0, 0, :60], b[0, 1, :60] = 1, 1               # one column for a, another for b, on the same images
    a[0, 2, 60:120], b[0, 2, 120:180] = 1, 1
    v = claims.decide([_pair(a, b, combine="mean")])[0]
    assert v.verdict == "inconclusive" and v.test.needed is None
    assert v.because == "the estimate is zero: the images that favour the claim and those against it balance"


# ------------------------------------------------------------------------------------------ said where decided


def test_a_verdict_shows_the_pair_and_column_its_decisive_p_comes_from():
    """`all`: the claim holds only if its worst column does, so "inconclusive" shows that column (the largest p
    for the claim), and "fails" the column whose p against it decides (Holm's smallest): never an estimate from
    one column beside a p-value from another."""
    n = 100
    a, b = np.zeros((1, 3, n)), np.zeros((1, 3, n))
    a[0, 0, :20] = 1                                  # col0: 20 images for a: significant
    a[0, 1, :4], b[0, 1, 4:6] = 1, 1                  # col1: 4 for, 2 against: the weakest for the claim
    a[0, 2, :12] = 1                                  # col2: 12 for
    v = claims.decide([_pair(a, b, combine="all")])[0]
    assert v.verdict == "inconclusive" and v.test.label == "a vs b under col1"
    assert v.test.diff == pytest.approx(2.0) and v.test.p_for == pytest.approx(stats.paired(a[:, 1], b[:, 1]).p_for)
    b[0, 2, 50:80] = 1                                # col2 now 12 for, 30 against: significantly against
    v = claims.decide([_pair(a, b, combine="all")])[0]
    assert v.verdict == "fails" and v.test.label == "a vs b under col2" and v.test.hi < 0


def test_significant_before_correction_says_after_holm_over_how_many_claims():
    """7 images for the claim, none against: McNemar's p = 1/128 and a 95% interval that excludes zero, yet not
    significant among the paper's 9 claims (Holm's level 0.05 / 9): the verdict says so, with the number."""
    a, b = np.zeros((1, 1, 64)), np.zeros((1, 1, 64))
    a[0, 0, :7] = 1
    v = claims.decide([_pair(a, b)] + _ties(8))[0]
    assert v.verdict == "inconclusive" and v.test.lo > 0 and v.test.p_for == pytest.approx(1 / 128)
    assert v.because.startswith("the estimate favours the claim and its 95% interval (a vs b under col0) excludes "
                                "0 before correction, but it is not significant after Holm over the paper's 9 claims")
    assert v.level == pytest.approx(0.05 / 9)
    # an `any` claim's p is corrected over its columns too, and says so
    a2, b2 = np.concatenate([a, a], axis=1), np.concatenate([b, b], axis=1)
    b2[0, 1] = 0
    b2[0, 1, 10:12] = 1
    v = claims.decide([_pair(a2, b2, combine="any")] + _ties(4))[0]
    assert "excludes 0 before correction, but it is not significant after Holm over its 2 columns and the paper's " \
           "5 claims" in v.because
    # against an `all` claim, Holm runs over its columns: said too
    v = claims.decide([_pair(b2, a2, combine="all")] + _ties(4))[0]
    assert v.because.startswith("the estimate goes against the claim, and its 95% interval (a vs b under col0) "
                                "excludes 0 before correction, not significantly after Holm over its 2 columns and "
                                "the paper's 5 claims")


# ------------------------------------------------------------------------------------------ degenerate columns


def test_columns_where_both_rows_are_at_0_or_100_percent_are_left_out_and_counted(tmp_path):
    """A 0% against 0% column separates nothing: under `all` it kept a claim from ever holding (McNemar p = 1, read
    "inconclusive", as if more images could decide); under `mean` it diluted the test. Left out and counted; a
    claim left with no column is untestable."""
    n = 200
    a, b = np.zeros((1, 4, n)), np.zeros((1, 4, n))
    a[0, 0, :30] = 1                                  # a real difference under col0
    a[0, 3], b[0, 3] = 1, 1                           # col3: both at 100%
    v = claims.decide([_pair(a, b, combine="all")])[0]
    assert v.verdict == "holds"
    assert v.because.endswith("(3 of 4 columns at 0% or 100% for both rows (2 at 0%, 1 at 100%): not tested)")
    mean = claims.decide([_pair(a, b, combine="mean")])[0]
    assert mean.test.diff == pytest.approx(15.0)      # col0's 15 points, not diluted to 3.75 by three idle columns
    only = claims.decide([_pair(a[:, 1:3], b[:, 1:3], combine="all")])[0]
    assert only.verdict == "untestable here"
    assert only.because == "every compared column has both rows at 0%: no test image can separate them"


# ------------------------------------------------------------------------------------------ one test, one count


def test_claims_that_are_one_test_at_this_scale_are_tested_and_counted_once(tmp_path):
    """Two tables whose rows are the same training jobs at this scale (Table 1(b) and Zipper's copy of it, or
    Table 1(a) and 1(b) where one architecture stands for both): their claims are one test, tallied once; pairs of
    rows that are the same jobs (CA-AT's ResNet-34 rows at the demo scale) are one pair."""
    twin = {**TABLE, "title": "the same rows again"}
    target = {**TABLE, "rows": TABLE["rows"] + [{"key": "rst", "run": AT}]}
    catalog = _catalog(tmp_path, {"t": target, "u": twin})
    _write(catalog, GEN, clean=range(0, 60), pgd20=range(0, 30), pgd100=range(0, 30))
    _write(catalog, AT, clean=range(0, 40), pgd20=range(3, 30), pgd100=range(3, 30))
    first = _better("generalist", ["at_beta1", "rst"], ["nat", "pgd20"], combine="all")
    second = {**_better("generalist", "at_beta1", ["nat", "pgd20"], combine="all"), "target": "u"}
    found = claims.verdicts(catalog, _claims(tmp_path, [first, second, _better("generalist", "at_beta1", ["nat"])],
                                             papers=["A", "B", "A"]))
    assert found[0].same_as is None and found[1].same_as == "c0"
    assert found[1].verdict == found[0].verdict and found[1].test is found[0].test
    assert found[1].because.startswith("= claim c0 at this scale (the same jobs under the same columns): ")
    assert "1 of 2 pairs of rows are the same training jobs as another pair at this scale: counted once" in \
        found[0].because
    assert found[0].family == 2 and found[2].family == 2     # paper A: c0 and c2; c1 is c0's test, not B's family
    assert claims.tally(found).startswith("3 claims (config/claims.yaml), 2 distinct tests at this scale: ")
    assert "; 1 repeats another claim's test (the same jobs under the same columns) and is counted with it" in \
        claims.tally(found)


# ------------------------------------------------------------------------------------------ seeds as the unit


def _seeds(diffs: list[float], n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Seeds of two rows whose per-seed differences are ``diffs`` (fractions) over n images: each seed's a right on
    a different half of the images, b on the same half less (or more) the difference's images."""
    rng = np.random.default_rng(0)
    a, b = np.zeros((len(diffs), 1, n)), np.zeros((len(diffs), 1, n))
    for s, d in enumerate(diffs):
        order = rng.permutation(n)
        right = order[: n // 2]
        a[s, 0, right] = 1
        b[s, 0, right] = 1
        k = round(abs(d) * n)
        if d > 0:
            b[s, 0, right[:k]] = 0
        else:
            b[s, 0, order[n // 2: n // 2 + k]] = 1
    return a, b


def test_seeds_are_the_unit_of_a_method_claim():
    """Five seeds whose per-seed differences are +5, -4, +4, -3, +2 points over 4,000 images: one lucky seed
    apart, no evidence. The former test (a sign-flip over images of the seeds' mean outcomes) gave p = 0.0005;
    a test that counts the seeds (the crossed model of seeds and images) about 0.34, and n says the seeds."""
    a, b = _seeds([0.05, -0.04, 0.04, -0.03, 0.02])
    v = claims.decide([_pair(a, b)])[0]
    assert v.verdict == "inconclusive" and v.seeds == 5
    assert 0.25 < v.test.p_for < 0.45 and v.test.lo < 0 < v.test.hi
    former = stats._sign_flip_p((a - b).mean(axis=0)[0])[0]
    assert former < 0.002
    assert "n = 4,000 test images × 5 seeds" in claims.line(v)
    assert "crossed random-effects model over 5 seeds and 4,000 images" in v.test.how
    # consistent seeds hold, and the variation between seeds bounds what more test images can do
    steady = claims.decide([_pair(*_seeds([0.05, 0.04, 0.045, 0.055, 0.05]))])[0]
    assert steady.verdict == "holds"
    few = claims.decide([_pair(*_seeds([0.004, -0.002, 0.006, 0.0, 0.002]))] + _ties(4))[0]
    assert few.verdict == "inconclusive"


# ------------------------------------------------------------------------------------------ the tally


def test_the_tally_says_what_holm_bounds_per_paper_and_per_tail():
    a, b = np.zeros((1, 1, 64)), np.zeros((1, 1, 64))
    a[0, 0, :20] = 1
    found = claims.decide([_pair(a, b, paper="P"), _pair(a, b, paper="Q", id="d"), _pair(a, b, paper="R", id="e")])
    text = claims.tally(found)
    assert "within each paper Holm's correction keeps the chance of any false “holds” at most 5%" in text
    assert "Over the 3 papers together the chance of some false “holds” is at most 15%" in text
