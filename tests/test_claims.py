"""The papers' claims as the papers state them, and verdicts that say why (config/claims.yaml,
tradeoff.report.claims): one test image counted once, a margin for "not worse", Holm within each paper, untestable
where this scale cannot decide, and a summary that opens with what the scale can and cannot say."""

from __future__ import annotations

import html
import re

import pytest
import yaml
from scipy.stats import binomtest

from helpers import ROOT
from report_fixtures import write_measurement
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
    assert "every model is at 0% under every column" in found[4].because
    assert "one training job at this scale" in found[5].because
    assert "not testable in this configuration: t has no column 'pgd200'" in found[6].because
    assert found[7].because == "the estimate goes against the claim, not significantly"
    holds = found[0]
    assert holds.test.diff == pytest.approx(100 * 20 / 64) and holds.test.lo < holds.test.diff < holds.test.hi
    assert holds.test.detectable is not None and holds.test.images == N
    text = claims.line(holds)
    assert re.search(r"Difference \+31\.2 points, 95% interval \[\+\d+\.\d, \+\d+\.\d\], n = 64 test images", text)
    assert "the smallest difference detected with 80% power at this n" in text


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


def test_not_worse_is_judged_on_a_margin_not_on_absent_evidence(tmp_path):
    """One image lower of 64: the old rule said "holds" (not significantly lower); at a 2-point margin Newcombe's
    interval cannot exclude a 2-point loss on 64 images, so it is inconclusive; at 10 points it holds; 30 images
    lower fails."""
    catalog = _catalog(tmp_path)
    _write(catalog, GEN, clean=range(0, 40), pgd20=range(1, 30))
    _write(catalog, AT, clean=range(0, 40), pgd20=range(0, 30))
    _write(catalog, HALF, clean=range(0, 40), pgd20=range(0, 60))
    worse = {"kind": "not_worse", "target": "t", "columns": ["pgd20"], "row": "generalist", "than": "at_beta1"}
    path = _claims(tmp_path, [worse, {**worse, "margin": 10}, {**worse, "than": "at_beta0.5"}],
                   papers=["A", "B", "C"], margin=2)
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["inconclusive", "holds", "fails"]
    assert found[0].test.lo < -2 < found[0].test.diff
    assert "; margin 2 points" in claims.line(found[0]) and "; margin 10 points" in claims.line(found[1])
    without = _claims(tmp_path, [worse])
    with pytest.raises(cfg.ConfigError, match="a not_worse claim needs a margin"):
        claims.load_claims(catalog, without)


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
    assert "most 5%, and of any false “fails” at most 5%" in claims.tally(together)


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


def test_front_and_trend_claims_have_intervals_and_a_criterion(tmp_path):
    front = {"kind": "figure", "plot": "front", "title": "front",
             "rows": [{"key": "a", "run": GEN, "series": "CA-AT"}, {"key": "b", "run": HALF, "series": "vanilla"},
                      {"key": "c", "run": NT, "series": "vanilla"}],
             "columns": {"SA": "clean", "AA": "pgd20"}}
    catalog = _catalog(tmp_path, {"t": TABLE, "f": front})
    _write(catalog, GEN, clean=range(0, 62), pgd20=range(0, 40), pgd100=range(0, 38))
    _write(catalog, HALF, clean=range(0, 50), pgd20=range(0, 20), pgd100=range(0, 20))
    _write(catalog, NT, clean=range(0, 60), pgd20=set(), pgd100=set())
    _write(catalog, AT, clean=range(0, 60), pgd20=range(0, 30), pgd100=range(0, 30))
    path = _claims(tmp_path, [
        {"kind": "front", "target": "f", "columns": ["SA", "AA"], "row": "CA-AT", "than": "vanilla"},
        {"kind": "front", "target": "f", "columns": ["SA", "AA"], "row": "vanilla", "than": "CA-AT"},
        {"kind": "trend", "target": "t", "columns": ["nat", "pgd20", "pgd100"], "row": "generalist", "than": None},
        {"kind": "trend", "target": "t", "columns": ["pgd20", "pgd100"], "row": "at_beta1", "than": None},
    ], papers=["A", "B", "C", "D"])
    found = claims.verdicts(catalog, path)
    assert [f.verdict for f in found] == ["holds", "fails", "holds", "inconclusive"]
    assert found[0].test.lo > 0 and "the area each front dominates, bootstrap over the test images" in found[0].test.how
    assert "points of area" in claims.line(found[0])
    assert found[3].because == "an exact tie: the outcomes agree on every test image"


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


def test_a_mean_that_balances_to_zero_is_no_effect_to_power():
    """Per-image differences of several columns are fractions (±1/3 ...): where they balance, their mean is float
    noise (~1e-17), not an effect that some astronomical number of test images would detect."""
    import numpy as np

    d = np.array([1 / 3, -1 / 3, 2 / 3, -2 / 3, 1 / 3, -1 / 3] * 60)
    d[0] += 1e-16  # the float noise of summing thirds in another order
    detectable, needed = stats.power_figures(d)
    assert needed is None and detectable is not None
    test = stats.Test(0.5, 0.5, 100 * float(np.mean(d)), -1.0, 1.0, len(d), detectable, needed, "mean", 360)
    assert claims._inconclusive(test, 360) == ("the estimate is zero: the images that favour the claim and those "
                                               "against it balance")


def test_several_columns_that_must_all_hold_show_the_one_most_against_the_claim():
    """`all`: where several columns tie at p = 1 for the claim (a column where both rows are at 0% among them), the
    estimate shown is the column most against it, not the first tied one."""
    import numpy as np

    n = 100
    zero = np.zeros((1, n))
    against = np.zeros((1, n))
    against[0, :30] = 1.0  # `than` right on 30 images where `row` is wrong
    favour = np.zeros((1, n))
    favour[0, 30:31] = 1.0  # ... and `row` right on one image where `than` is wrong (p for the claim just below 1)
    a = np.stack([zero[0], favour[0]])[None]  # row: under column 1 wrong everywhere
    b = np.stack([zero[0], against[0]])[None]
    test = stats.combined(a, b, "all")
    assert test.diff == pytest.approx(-29.0) and test.p_against < 1e-6 and test.p_for == 1.0
