"""The claims' tests are calibrated on real predictions, and find a planted difference.

The fixture tests/data/claims_null_predictions.json holds real per-example outcomes: two models of the demo build
(digits, small CNN, 360 test digits; `results/demo/predictions/<run>/all.json` at commit 2b501e0), each under seven
columns. It was extracted with::

    e = json.load(open(f"results/demo/predictions/{run}/all.json"))["evaluations"]
    rows[run] = {c: e[c]["robust_correct"] for c in ["clean", "pgd20", "pgd100", "mim", "cw", "square", "aa"]}

for run in cifar10-resnet18-at-beta1 and cifar10-resnet18-iat (the demo's AT and IAT rows of Table 1(a)).

The null: the two models' outcomes exchanged test image by test image (a fair coin per image, all columns of the image
together), so that neither row is better while every image keeps its real pattern of outcomes across columns (PGD-20
and PGD-100 agree on almost every image: the case that counting an image once per column got wrong). Under it, each
kind of claim test (one column; several columns under all, any and mean; not-worse at its margin; a trend; a front)
must say "holds" and "fails" each at most at the nominal 5%, within simulation error."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers import ROOT
from tradeoff.report import stats

REPS = 200
# the rate's one-sided 99.9% simulation bound above 5% at REPS draws
BOUND = stats.ALPHA + 3.1 * math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / REPS)
ROBUST = [1, 2, 3, 4, 5, 6]  # pgd20, pgd100, mim, cw, square, aa


@pytest.fixture(scope="module")
def real():
    data = json.loads((ROOT / "tests" / "data" / "claims_null_predictions.json").read_text())
    a, b = ([stats.outcomes([row[c]]) for c in data["columns"]] for row in data["rows"].values())
    return np.stack(a, axis=1), np.stack(b, axis=1)    # (1 seed, 7 columns, 360 images)


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setattr(stats, "RESAMPLES", 400)   # Monte-Carlo p-values stay valid (the +1 rule), only coarser
    # statsmodels' Holm (multipletests) runs gc.collect() on every call: a tenth of a second in a test process
    import gc
    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def _exchanged(a, b, rng):
    swap = rng.random(a.shape[-1]) < 0.5           # one coin per image, every column of it together
    return np.where(swap, b, a), np.where(swap, a, b)


def _rates(tests) -> tuple[float, float]:
    return (sum(t.p_for < stats.ALPHA for t in tests) / len(tests),
            sum(t.p_against < stats.ALPHA for t in tests) / len(tests))


KINDS = {
    "one column": lambda a, b: stats.paired(a[:, 1], b[:, 1]),
    "all": lambda a, b: stats.combined(a[:, ROBUST], b[:, ROBUST], "all"),
    "any": lambda a, b: stats.combined(a[:, ROBUST], b[:, ROBUST], "any"),
    "mean": lambda a, b: stats.combined(a[:, ROBUST], b[:, ROBUST], "mean"),
    # at its margin's boundary: with a margin of (almost) 0 the exchanged rows sit on it (a margin above 0 takes
    # the Newcombe-interval path, which margin 0 would not: that is the exact McNemar test, the first kind)
    "not_worse": lambda a, b: stats.paired(a[:, 6], b[:, 6], margin=1e-9),
    "front": lambda a, b: stats.front([(a[:, 0], a[:, 1]), (a[:, 0], a[:, 6])], [(b[:, 0], b[:, 1]), (b[:, 0], b[:, 6])]),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_says_holds_and_fails_at_most_at_its_nominal_rate_under_the_null(real, kind):
    rng = np.random.default_rng(28)
    tests = [KINDS[kind](*_exchanged(*real, rng)) for _ in range(REPS)]
    holds, fails = _rates(tests)
    print(f"{kind}: holds {holds:.3f}, fails {fails:.3f} under the null ({REPS} draws)")
    assert holds <= BOUND and fails <= BOUND


def test_a_trend_says_holds_and_fails_at_most_at_its_nominal_rate_under_the_null(real):
    """A trend's null: one model's outcomes under three columns exchanged among the columns, image by image."""
    a = real[0][:, [1, 2, 3]]                       # pgd20, pgd100, mim of one model
    rng = np.random.default_rng(29)
    tests = []
    for _ in range(REPS):
        order = np.argsort(rng.random((a.shape[1], a.shape[2])), axis=0)    # a random order of columns per image
        shuffled = np.take_along_axis(a, order[None], axis=1)
        tests.append(stats.trend([shuffled[:, i] for i in range(3)]))
    holds, fails = _rates(tests)
    print(f"trend: holds {holds:.3f}, fails {fails:.3f} under the null ({REPS} draws)")
    assert holds <= BOUND and fails <= BOUND


def test_counting_an_image_once_per_column_is_what_the_null_rejects(real):
    """The old procedure (the discordant pairs of every column pooled into one McNemar test) says "holds" far above
    5% under the same null: the calibration test above can fail."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(28)
    wrong = 0
    for _ in range(REPS):
        a, b = _exchanged(real[0][:, [1, 2]], real[1][:, [1, 2]], rng)     # PGD-20 and its near-copy PGD-100
        only_a, only_b = int(np.sum(a > b)), int(np.sum(a < b))
        wrong += binomtest(only_a, only_a + only_b, 0.5, alternative="greater").pvalue < stats.ALPHA
    assert wrong / REPS > BOUND


def _planted(a, points, rng):
    """b: a's outcomes with `points` percent of the images a gets right turned wrong (a is better by that much)."""
    b = a.copy()
    right = np.flatnonzero(a[0, 0])
    b[0, :, rng.choice(right, size=round(points / 100 * a.shape[-1]), replace=False)] = 0
    return b


def test_a_planted_difference_is_found_by_every_kind(real):
    rng = np.random.default_rng(30)
    a = real[0][:, [1, 2, 6]]                       # pgd20, pgd100, aa: 113, 112, 57 of 360 right
    right = a[0].min(axis=0) == 1                   # images right under every column
    a = np.where(right, a, 0)                       # so that a planted loss hits every column of an image
    b = _planted(a, 8, rng)
    for combine in stats.COMBINE:
        found = stats.combined(a, b, combine)
        assert found.p_for < stats.ALPHA and found.p_against > 0.5 and found.lo > 0, combine
        assert 5 < found.diff < 11
    assert stats.paired(a[:, 0], b[:, 0], margin=0.02).p_for < stats.ALPHA
    assert stats.paired(b[:, 0], a[:, 0], margin=0.02).p_against < stats.ALPHA     # 8 points worse, margin 2
    assert stats.trend([a[:, 0], b[:, 0]]).p_for < stats.ALPHA
    clean = real[0][:, 0]
    assert stats.front([(clean, a[:, 0])], [(clean, b[:, 0])]).p_for < stats.ALPHA


def test_newcombes_interval_is_his_published_example():
    """Newcombe (1998), Stat Med 17:2635, the paired example a=36, b=12, c=2, d=0: method 10 gives
    0.0569 to 0.3404 for the difference 0.2."""
    a = np.array([1] * 48 + [0] * 2)
    b = np.array([1] * 36 + [0] * 12 + [1] * 2)
    diff, lo, hi = stats.newcombe(a, b)
    assert (round(diff, 4), round(lo, 4), round(hi, 4)) == (0.2, 0.0569, 0.3404)


def test_seeds_are_seeds_not_more_test_images(real):
    """Three seeds that happen to give the same outcomes are as much evidence as one seed about the test images: the
    bootstrap over seeds and images keeps the interval (a test counting (seed, image) pairs would narrow it by
    sqrt(3)), and n stays in test images."""
    a, b = real[0][:, 1], real[1][:, 1]
    one = stats.paired(a, b)
    three = stats.paired(a.repeat(3, axis=0), b.repeat(3, axis=0))
    assert three.images == one.images == 360
    assert three.diff == pytest.approx(one.diff)
    assert (three.hi - three.lo) > 0.85 * (one.hi - one.lo)
    mean = stats.combined(real[0][:, ROBUST].repeat(3, axis=0), real[1][:, ROBUST].repeat(3, axis=0), "mean")
    assert "sign-flip test over images of 3 seeds' mean outcomes; interval: bootstrap over seeds and images" in \
        mean.how and mean.images == 360
    # a table's test between two rows over seeds (its daggers and bold): 5 images for a, none for b, in each of
    # three identical seeds, is the exact McNemar test's 5 of 5 (p = 1/16), not 15 of 15 (p = 6e-5)
    five = "1" * 5 + "0" * 355, "0" * 360
    assert stats.mcnemar([five]) == pytest.approx(1 / 16)
    assert stats.mcnemar([five] * 3) == pytest.approx(1 / 16)


def test_the_area_a_front_dominates():
    assert stats.hypervolume(np.array([[0.5, 0.5]])) == pytest.approx(0.25)
    assert stats.hypervolume(np.array([[1.0, 0.2], [0.2, 1.0], [0.1, 0.1]])) == pytest.approx(0.2 + 0.8 * 0.2)
