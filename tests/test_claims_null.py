"""The claims' verdicts are calibrated: under the null each kind says "holds" and "fails" each at most at 5%, within
two standard errors of DRAWS draws, through the verdict layer (``claims.decide``: what ``claims.verdicts`` runs on
the arrays it reads), on real predictions.

The fixture tests/data/claims_null_predictions.json holds real per-example outcomes: two models of the demo build
(digits, small CNN, 360 test digits; `results/demo/predictions/<run>/all.json` at commit 2b501e0), each under seven
columns. It was extracted with::

    e = json.load(open(f"results/demo/predictions/{run}/all.json"))["evaluations"]
    rows[run] = {c: e[c]["robust_correct"] for c in ["clean", "pgd20", "pgd100", "mim", "cw", "square", "aa"]}

for run in cifar10-resnet18-at-beta1 and cifar10-resnet18-iat (the demo's AT and IAT rows of Table 1(a)).

The null: the test images drawn with replacement, and the two models' outcomes exchanged image by image (a fair coin
per image, all columns of the image together), so that neither row is better while every image keeps its real
pattern of outcomes across columns (PGD-20 and PGD-100 agree on almost every image: the case that counting an image
once per column got wrong). A not_worse claim's null is its margin's boundary (a's accuracy (1 - share) times b's);
a front's, two sweeps whose points are the two models' exchanged; several seeds', rows whose seeds vary as training
runs do, alike for both rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from claims_sim import (
    BOUND,
    DRAWS,
    ROBUST,
    claim,
    exchanged,
    front_claim,
    pair,
    plane,
    real,
    resample,
    seeded,
    sweep,
    verdict,
)
from threadpoolctl import threadpool_limits

from tradeoff.report import claims, stats


@pytest.fixture(scope="module")
def rows():
    return real()


@pytest.fixture(autouse=True)
def one_thread():
    # the fronts' bootstrap is a matrix product: on a shared 2-core machine one BLAS thread is the fast one
    with threadpool_limits(limits=1):
        yield


def _one(rows, rng):
    a, b = exchanged(*resample(np.stack(rows), rng), rng)
    return a, b


def _thinned(a, b, share, rng):
    """a on its margin's boundary: each image a gets right turned wrong with probability ``share``."""
    return np.where(rng.random(a.shape) < share, 0.0, a), b


def _trend(rows, rng):
    x = resample(rows[0][:, [1, 3, 6]], rng)                     # pgd20, mim, aa of one model
    order = np.argsort(rng.random((x.shape[1], x.shape[2])), axis=0)    # the columns exchanged, image by image
    x = np.take_along_axis(x, order[None], axis=1)
    return claims.Evidence(claim("trend", ["pgd20", "mim", "aa"], than=None),
                           [claims.Steps("a", [x[:, i] for i in range(3)], ["pgd20", "mim", "aa"])])


def _seeds(rows, rng, columns, combine=None):
    """Five seeds a row, the same 720 images: each seed's outcomes its own exchange of the real pair (training
    noise, image by image) with its own difference planted (the variation between runs: 3 points a seed), a's seeds
    and b's drawn alike."""
    effects = rng.normal(0, 0.03, 5) - rng.normal(0, 0.03, 5)
    a, b = seeded(rows[0][:, columns], rows[1][:, columns], effects, rng, 720)
    return pair(claim(combine=combine), a, b)


KINDS = {
    "one column": lambda r, rng: pair(claim(), *[x[:, [1]] for x in _one(r, rng)]),
    "all": lambda r, rng: pair(claim(combine="all"), *[x[:, ROBUST] for x in _one(r, rng)]),
    "any": lambda r, rng: pair(claim(combine="any"), *[x[:, ROBUST] for x in _one(r, rng)]),
    "mean": lambda r, rng: pair(claim(combine="mean"), *[x[:, ROBUST] for x in _one(r, rng)]),
    # at its real margin (a tenth of than's accuracy, the shipped claims'), on its boundary
    "not_worse clean": lambda r, rng: pair(claim("not_worse", share=0.1),
                                           *_thinned(*[x[:, [0]] for x in _one(r, rng)], 0.1, rng)),
    "not_worse pgd20": lambda r, rng: pair(claim("not_worse", share=0.1),
                                           *_thinned(*[x[:, [1]] for x in _one(r, rng)], 0.1, rng)),
    "trend": _trend,
    "front": lambda r, rng: plane(front_claim(), *sweep(*_one(r, rng))),
    "several seeds": lambda r, rng: _seeds(r, rng, [1]),
    "several seeds, mean": lambda r, rng: _seeds(r, rng, [1, 3, 6], "mean"),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_says_holds_and_fails_at_most_at_its_nominal_rate_under_the_null(rows, kind):
    rng = np.random.default_rng(38)
    found = [verdict(KINDS[kind](rows, rng)).verdict for _ in range(DRAWS)]
    holds, fails = found.count("holds") / DRAWS, found.count("fails") / DRAWS
    print(f"{kind}: holds {holds:.3f}, fails {fails:.3f} under the null ({DRAWS} draws; bound {BOUND:.4f})")
    assert holds <= BOUND and fails <= BOUND


def test_the_verdicts_of_the_simulations_are_the_verdicts_with_their_power_figures(rows):
    """The simulations decide without the power figures (figures=False), which decide no verdict: the same words."""
    rng = np.random.default_rng(1)
    for make in KINDS.values():
        evidence = make(rows, rng)
        fast, full = verdict(evidence), verdict(evidence, figures=True)
        assert fast.verdict == full.verdict and fast.test.p_for == full.test.p_for


def test_counting_an_image_once_per_column_is_what_the_null_rejects(rows):
    """The old procedure (the discordant pairs of every column pooled into one McNemar test) says "holds" far above
    5% under the same null: the calibration test above can fail."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(28)
    wrong = 0
    for _ in range(DRAWS // 5):
        a, b = exchanged(rows[0][:, [1, 2]], rows[1][:, [1, 2]], rng)     # PGD-20 and its near-copy PGD-100
        only_a, only_b = int(np.sum(a > b)), int(np.sum(a < b))
        wrong += binomtest(only_a, only_a + only_b, 0.5, alternative="greater").pvalue < stats.ALPHA
    assert wrong / (DRAWS // 5) > BOUND


def test_a_sign_flip_over_images_of_seed_means_is_what_the_multi_seed_null_rejects(rows):
    """The former multi-seed test (a sign-flip over images of the seeds' mean outcomes) under the several-seeds
    null says "holds" far above 5%: the variation between training runs is not in it."""
    rng = np.random.default_rng(38)
    wrong = 0
    for _ in range(200):
        e = _seeds(rows, rng, [1])
        wrong += stats._sign_flip_p((e.parts[0].a - e.parts[0].b)[:, 0].mean(axis=0))[0] < stats.ALPHA
    assert wrong / 200 > 0.15


def test_newcombes_interval_is_his_published_example():
    """Newcombe (1998), Stat Med 17:2635, the paired example a=36, b=12, c=2, d=0: method 10 gives
    0.0569 to 0.3404 for the difference 0.2."""
    a = np.array([1] * 48 + [0] * 2)
    b = np.array([1] * 36 + [0] * 12 + [1] * 2)
    diff, lo, hi = stats.newcombe(a, b)
    assert (round(diff, 4), round(lo, 4), round(hi, 4)) == (0.2, 0.0569, 0.3404)
    assert stats._wilson(7, 20, 1.959963984540054) == pytest.approx(stats.wilson(7, 20))


def test_holm_is_statsmodels_holm():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    for m in (1, 2, 7, 30):
        p = rng.random(m) ** 3
        p[:m // 3] = p[0]                                   # ties
        assert stats.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert stats.holm_level([0.2, 0.5], 3) == pytest.approx(0.05 / 3)
    assert stats.holm_level([0.001, 0.5], 3) == pytest.approx(0.05 / 2)   # one other holds before it


def test_the_exact_sign_flip_test_is_exact():
    """A mean over columns of 0/1 outcomes (a lattice of thirds): the exact distribution of the sign-flip sum, as
    enumerating all 2^10 sign patterns gives it; for 0/1 differences it is the exact McNemar test."""
    import itertools

    d = np.array([1, -2, 3, 1, 2, -1, 3, 3, -1, 2]) / 3
    sums = np.array([np.dot(s, np.abs(d)) for s in itertools.product([-1, 1], repeat=len(d))])
    above, below = stats._sign_flip_p(d)
    assert above == pytest.approx(np.mean(sums >= d.sum() - 1e-9)) and below == pytest.approx(
        np.mean(sums <= d.sum() + 1e-9))
    from scipy.stats import binomtest
    d = np.array([1] * 9 + [-1] * 3 + [0] * 20, dtype=float)
    assert stats._sign_flip_p(d)[0] == pytest.approx(binomtest(9, 12, 0.5, alternative="greater").pvalue)

