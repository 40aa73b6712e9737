"""The power figures of a verdict are those of the whole procedure that decides it: its leaves' tests, the rule
that combines them and its Holm level in its paper's family. Planting the stated difference (the smallest detected
with 80% power) on real predictions, the verdict layer (``claims.decide``) says "holds" in 80% ± 5% of DRAWS draws,
for each kind; resampling the stated number of images needed, likewise. And a not_worse claim's margin lets the
paper's own numbers satisfy the paper's own claim at the paper's scale.

The claim under test sits in a family of FAMILY claims of its paper (the others ties, never significant): it faces
Holm's level 0.05 / FAMILY = 0.01, the level its figures are stated at. The alternatives hold what the figures hold
at the observed: each image's discordance (a difference planted by images trading places between the rows, one
uniform per image shared by every column so that the columns stay as correlated as the real ones), the spread
between seeds; see tests/claims_sim.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from claims_sim import (
    DRAWS,
    ROBUST,
    claim,
    exchanged,
    front_claim,
    pair,
    plane,
    plant,
    plant_front,
    real,
    resample,
    seeded,
    sweep,
    verdict,
)
from threadpoolctl import threadpool_limits

from tradeoff import config as cfg
from tradeoff.report import claims, stats

FAMILY = 5
LOW, HIGH = stats.POWER - 0.05, stats.POWER + 0.05


@pytest.fixture(scope="module")
def rows():
    return real()


@pytest.fixture(autouse=True)
def one_thread():
    with threadpool_limits(limits=1):
        yield


def _planted(a0, b0, c):
    """Draws with delta planted: the images resampled, the rows exchanged image by image, delta planted."""
    def draw(delta, rng):
        x = resample(np.stack([a0, b0]), rng)
        a, b = plant(*exchanged(x[0], x[1], rng), delta, rng)
        return pair(c, a, b)
    return draw


def _trend(rows):
    first, middle, last = rows[0][:, 1], rows[0][:, 3], rows[0][:, 6]
    c = claim("trend", ["pgd20", "mim", "aa"], than=None)
    def evidence(cells):
        return claims.Evidence(c, [claims.Steps("a", cells, ["pgd20", "mim", "aa"])])
    def draw(delta, rng):
        x = resample(np.stack([first, middle, last]), rng)
        f, l = plant(*exchanged(x[0][:, None], x[2][:, None], rng), delta, rng)
        return evidence([f[:, 0], x[1], l[:, 0]])
    return evidence([first, middle, last]), draw


def _front(rows):
    c = front_claim()
    a, b = exchanged(*rows, np.random.default_rng(3))
    def draw(delta, rng):
        x = resample(np.stack(rows), rng)
        return plane(c, *plant_front(*sweep(*exchanged(x[0], x[1], rng)), delta, rng))
    return plane(c, *sweep(a, b)), draw


def _seeds(rows):
    """Five seeds a row over 2,000 images, the seeds' differences scattered by 3 points: the stated figure from one
    such set (its seeds' effects exactly that spread); the draws with the spread its variance components estimate."""
    c = claim()
    base = rows[0][:, [1]], rows[1][:, [1]]
    a0, b0 = seeded(*base, 0.03 * np.array([-1.2649, -0.6325, 0.0, 0.6325, 1.2649]), np.random.default_rng(11), 2000)
    _, ms_seed, _, ms_resid = stats.mean_squares((a0 - b0)[:, 0])
    spread = np.sqrt(max(ms_seed - ms_resid, 0.0) / 2000)
    def draw(delta, rng):
        return pair(c, *seeded(*base, delta + rng.normal(0, spread, 5), rng, 2000))
    return pair(c, a0, b0), draw


def _kinds(rows):
    a, b = rows
    out = {}
    for name, columns, combine in (("one column", [1], None), ("all", ROBUST, "all"), ("any", ROBUST, "any"),
                                   ("mean", ROBUST, "mean")):
        c = claim(combine=combine)
        out[name] = (pair(c, a[:, columns], b[:, columns]), _planted(a[:, columns], b[:, columns], c))
    c = claim("not_worse", share=0.1)
    out["not_worse"] = (pair(c, a[:, [6]], b[:, [6]]), _planted(a[:, [6]], b[:, [6]], c))
    out["trend"] = _trend(rows)
    out["front"] = _front(rows)
    out["several seeds"] = _seeds(rows)
    return out


KINDS = ["one column", "all", "any", "mean", "not_worse", "trend", "front", "several seeds"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_stated_difference_is_detected_with_the_stated_power(rows, kind):
    observed, draw = _kinds(rows)[kind]
    stated = verdict(observed, FAMILY, figures=True)
    assert stated.level == pytest.approx(stats.ALPHA / FAMILY)
    delta = stated.test.detectable / 100
    rng = np.random.default_rng(38)
    holds = sum(verdict(draw(delta, rng), FAMILY).verdict == "holds" for _ in range(DRAWS)) / DRAWS
    print(f"{kind}: stated {100 * delta:+.2f} points at level {stated.level:.3g}: holds in {holds:.3f} of {DRAWS}")
    assert LOW <= holds <= HIGH


def test_the_images_needed_are_those_at_which_the_observed_difference_holds_with_the_stated_power(rows):
    """`all` over six robust columns (the procedure the former figure misdescribed: it powered the worst column
    alone, at the unadjusted level): at the stated number of images, resampled from the observed ones (their
    differences kept), the claim holds in 80% of draws."""
    a, b = rows[0][:, ROBUST], rows[1][:, ROBUST]
    # a diluted copy of the real pair (b as right as a on 60% of a's images), so that 360 images are too few
    rng = np.random.default_rng(5)
    keep = rng.random(a.shape[-1]) < 0.6
    b = np.where(keep & (a > b), a, b)
    c = claim(combine="all")
    stated = verdict(pair(c, a, b), FAMILY, figures=True)
    needed = stated.test.needed
    assert needed > a.shape[-1]
    found = [verdict(pair(c, *resample(np.stack([a, b]), rng, needed)), FAMILY).verdict for _ in range(DRAWS)]
    rate = found.count("holds") / DRAWS
    print(f"all: {needed} images needed at level {stated.level:.3g}: holds in {rate:.3f} of {DRAWS}")
    assert LOW <= rate <= HIGH


def test_the_power_figures_are_at_the_holm_level_the_claim_faces(rows):
    """The same observed outcomes alone in their family (level 0.05) and among 7 claims (0.05 / 7): the detectable
    difference and the images needed grow with the family (the former figure used 0.05 whatever the family)."""
    a, b = rows[0][:, [6]], rows[1][:, [6]]
    b = np.where((np.random.default_rng(5).random(a.shape) < 0.7) & (a > b), a, b)
    alone, among = (verdict(pair(claim(), a, b), m, figures=True) for m in (1, 7))
    assert alone.level == pytest.approx(0.05) and among.level == pytest.approx(0.05 / 7)
    assert among.test.detectable > alone.test.detectable and among.test.needed > alone.test.needed
    assert f"at the level Holm leaves it ({among.level:.2g})" in claims.line(among)


# ------------------------------------------------------------------------------------------ the paper's own numbers


def _paper_pair(n: int, a: float, b: float, rng, nested: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Two models' outcomes on n images with the paper's accuracies, their errors independent (the least favourable
    plausible pairing for a paired test: real models' errors correlate, which narrows the interval), or ``nested``
    (the less accurate right only where the other is: the most favourable)."""
    def outcomes(p, order):
        x = np.zeros(n)
        x[order[:round(p * n)]] = 1.0
        return x
    order = rng.permutation(n)
    return outcomes(a, order if nested else rng.permutation(n))[None, None], outcomes(b, order)[None, None]


def _family(paper: str) -> int:
    """How many of the paper's claims have a test: the family the claim faces at the paper scale."""
    return sum(1 for c in claims.load_claims(cfg.load_catalog([cfg.ROOT / "config" / "config.yaml"]))
               if c["paper"] == paper and c.get("test"))


@pytest.mark.parametrize("claim_id, numbers", [
    ("generalist-keeps-robustness", {"aa": [(46.07, 48.20)]}),                     # Table 1(a): AA 46.07 vs 48.20
    ("zipper-tinyimagenet-maintains", {"nat": [(48.1, 41.10), (48.1, 43.28)],     # Zipper Table 4
                                       "aa": [(19.03, 15.44), (19.03, 17.76)]}),
])
def test_the_papers_own_numbers_satisfy_the_papers_own_claim_with_the_margin_used(claim_id, numbers):
    """At the paper's scale (10,000 test images), in the paper's family at its Holm level, the shipped margin lets
    the paper's own numbers hold, even with independent errors; a margin of 2 points (the former one) fails
    Generalist's own "the same level" once the test images are enough (46.07 is 2.13 below 48.20: here 200,000
    images of models whose errors nest)."""
    shipped = next(c for c in claims.load_claims(cfg.load_catalog([cfg.ROOT / "config" / "config.yaml"]))
                   if c["id"] == claim_id)
    rng = np.random.default_rng(7)
    parts = []
    for column, pairs in numbers.items():
        for k, (ours, reference) in enumerate(pairs):
            a, b = _paper_pair(10_000, ours / 100, reference / 100, rng)
            parts.append(claims.Pair(f"pair {k}", a, b, [column]))
    family = _family(shipped["paper"])
    ties = [pair(claim(paper=shipped["paper"], id=f"tie{i}"), *(2 * [np.tile([[[0.0, 1.0]]], 25)]))
            for i in range(family - 1)]
    v = claims.decide([claims.Evidence(shipped, parts)] + ties)[0]
    assert v.family == family and v.verdict == "holds", claims.line(v)
    if claim_id == "generalist-keeps-robustness":
        two_points = {**shipped, "test": {**shipped["test"], "margin": {"share": 2 / 48.20, "reason": "2 points"}}}
        a, b = _paper_pair(200_000, 0.4607, 0.4820, rng, nested=True)
        former = claims.decide([claims.Evidence(two_points, [claims.Pair("p", a, b, ["aa"])])] + ties)[0]
        assert former.verdict == "fails"
