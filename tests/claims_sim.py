"""Simulations of the claims' verdicts: claims and their outcome arrays, decided by ``claims.decide`` (what
``claims.verdicts`` runs after reading the files), on real per-image outcomes resampled, exchanged and planted.

The real outcomes (tests/data/claims_null_predictions.json) are two demo models' (the AT and IAT rows of Table 1(a),
digits, small CNN, 360 test digits) under seven columns; see tests/test_claims_null.py for how they were extracted.
"""

from __future__ import annotations

import json
import math

import numpy as np
from helpers import ROOT

from tradeoff.report import claims, stats

COLUMNS = ["clean", "pgd20", "pgd100", "mim", "cw", "square", "aa"]
ROBUST = [1, 2, 3, 4, 5, 6]
DRAWS = 1000
#: the bound on a rate that is at most 5% in truth: 5% plus two standard errors of a rate over DRAWS draws
BOUND = stats.ALPHA + 2 * math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / DRAWS)


def real() -> tuple[np.ndarray, np.ndarray]:
    """The two real models' outcomes, (1 seed, 7 columns, 360 images) each."""
    data = json.loads((ROOT / "tests" / "data" / "claims_null_predictions.json").read_text())
    a, b = ([stats.outcomes([row[c]]) for c in data["columns"]] for row in data["rows"].values())
    return np.stack(a, axis=1), np.stack(b, axis=1)


def claim(kind: str = "better", columns: list[str] | None = None, combine: str | None = None,
          share: float | None = None, paper: str = "P", id: str = "c", row="a", than="b") -> dict:
    test = {"kind": kind, "target": "t", "columns": columns or ["x"], "row": row, "than": than}
    if combine:
        test["combine"] = combine
    if share:
        test["margin"] = {"share": share, "reason": "the simulation's"}
    return {"id": id, "paper": paper, "where": "w", "says": "s", "test": test}


def pair(c: dict, a: np.ndarray, b: np.ndarray, columns: list[str] | None = None) -> claims.Evidence:
    """A better / not_worse claim's evidence: one pair of rows, a and b (seeds, columns, images)."""
    columns = columns or [f"col{i}" for i in range(a.shape[1])]
    return claims.Evidence(c, [claims.Pair("a vs b", a, b, columns)])


def ties(m: int, paper: str = "P") -> list[claims.Evidence]:
    """m claims of a paper whose rows agree on every image (an exact tie: p = 1 both ways, never significant):
    they fill a paper's family, so that a claim among them faces Holm's level 0.05 / (m + 1)."""
    x = np.zeros((1, 1, 50))
    x[..., :25] = 1
    return [pair(claim(paper=paper, id=f"tie{i}"), x, x.copy()) for i in range(m)]


def verdict(evidence: claims.Evidence, family: int = 1, figures: bool = False) -> claims.Verdict:
    """The verdict of one claim in a family of ``family`` claims (the others ties)."""
    return claims.decide([evidence] + ties(family - 1, evidence.claim["paper"]), figures=figures)[0]


def resample(x: np.ndarray, rng, n: int | None = None) -> np.ndarray:
    """Test images drawn with replacement (the last axis), every column and seed of an image together."""
    return x[..., rng.integers(0, x.shape[-1], size=n or x.shape[-1])]


def exchanged(a: np.ndarray, b: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """The null: the two rows' outcomes exchanged image by image (a fair coin per image, all its columns and
    seeds together): neither row is better, each image keeps its pattern across columns."""
    swap = rng.random(a.shape[-1]) < 0.5
    return np.where(swap, b, a), np.where(swap, a, b)


def plant(a: np.ndarray, b: np.ndarray, delta, rng, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """a and b (seeds, columns, images), exchanged (mean difference 0 in expectation), with ``delta`` (a fraction,
    one per seed or one for all) planted on every column: of the images against a in a column, the share
    delta / discordance trade places (for a negative delta, images for a), chosen by one uniform per image (``u``)
    shared by every column, so that the columns stay correlated as the real ones are. Each image keeps its
    discordance: its difference is +-1 with probabilities (psi +- delta) / 2."""
    a, b = a.copy(), b.copy()
    u = rng.random(a.shape[-1]) if u is None else u
    delta = np.broadcast_to(np.asarray(delta, dtype=float), (a.shape[0],))
    for s in range(a.shape[0]):
        for c in range(a.shape[1]):
            x, y = a[s, c], b[s, c]
            psi = float(np.mean(x != y))
            if psi == 0:
                continue
            q = min(abs(delta[s]) / psi, 1.0)
            side = (x < y) if delta[s] > 0 else (x > y)
            swap = side & (u < q)
            a[s, c], b[s, c] = np.where(swap, y, x), np.where(swap, x, y)
    return a, b


def sweep(a: np.ndarray, b: np.ndarray) -> tuple[list, list]:
    """Two series of three points from two models' columns (a front each): point k's clean outcomes the clean
    column with a fixed share of images (0, 10%, 20%) counted wrong, its robust outcomes a robust column of
    rising accuracy (AA, CW, Square): higher robust accuracy at lower clean accuracy, as a sweep draws it."""
    n = a.shape[-1]
    masks = [np.arange(n) % 10 < k for k in (10, 9, 8)]        # keep all, 90%, 80% of the images
    columns = [6, 4, 5]
    def series(x):
        return [(x[:, 0] * mask, x[:, col] * mask) for mask, col in zip(masks, columns)]
    return series(a), series(b)


def plane(c: dict, a_points: list, b_points: list) -> claims.Evidence:
    return claims.Evidence(c, [claims.Plane("a vs b", a_points, b_points)])


def front_claim(**kw) -> dict:
    return claim("front", ["SA", "AA"], row="A", than="B", **kw)


def plant_front(a_points: list, b_points: list, delta: float, rng) -> tuple[list, list]:
    """Two exchanged series (point k of each from the same two models) with delta (a fraction) planted on every
    point's robust accuracy, a's above b's: of the images where a's point is robust-wrong and b's right, the share
    delta / discordance trade places (one uniform per image shared by every point), so that each image keeps its
    discordance (the spread the power figures hold at the observed) and the gap at matched clean accuracy is delta."""
    u = rng.random(a_points[0][1].shape[-1])
    a_out, b_out = [], []
    for (ca, ra), (cb, rb) in zip(a_points, b_points):
        psi = float(np.mean(ra != rb))
        q = min(delta / psi, 1.0) if psi else 0.0
        swap = (ra < rb) & (u < q)
        a_out.append((ca, np.where(swap, rb, ra)))
        b_out.append((cb, np.where(swap, ra, rb)))
    return a_out, b_out


def seeded(base_a: np.ndarray, base_b: np.ndarray, effects: np.ndarray, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Several seeds of two rows (seeds, columns, n images): the same n test images (resampled once from the
    base), each seed's outcomes the base pair exchanged afresh (its own training noise, image by image) with that
    seed's difference ``effects[s]`` planted (the variation between training runs)."""
    idx = rng.integers(0, base_a.shape[-1], size=n)
    a0, b0 = base_a[0][:, idx], base_b[0][:, idx]
    a, b = [], []
    for effect in effects:
        x, y = exchanged(a0[None], b0[None], rng)
        x, y = plant(x, y, effect, rng)
        a.append(x[0])
        b.append(y[0])
    return np.stack(a), np.stack(b)
