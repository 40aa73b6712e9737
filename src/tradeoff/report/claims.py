"""The papers' claims, checked at the scale that ran: ``config/claims.yaml`` (beside the config, like ``reference/``).

Each claim quotes the paper's words (one quote, one claim), says where they stand, and names the test that decides
it on our measurements (metrics and predictions files only, vouched for as a table's:
:mod:`tradeoff.report.table_model`).
The statistics are :mod:`tradeoff.report.stats`'s; a test image is the unit of every test (its outcomes under every
column and seed of a claim kept together), and where a scale trains several seeds so is the training run:

- ``better``: each row of ``row`` is more accurate than each row of ``than`` (each a key or a list of keys: a claim
  over several configurations tests every pair within one paper dataset and architecture, pairs that are the same
  training jobs once, and every pair must hold) under ``columns``. Several columns declare ``combine``: ``all``
  (every column must hold: intersection-union, p = the largest p), ``any`` (Holm over them) or ``mean`` (the mean
  over columns: one test of each image's mean difference). Columns where both rows are at 0% (or both at 100%)
  separate nothing: they are left out of the combination and counted; a claim left with none is untestable here.
- ``not_worse``: ``row`` is not below ``than`` by more than its ``margin`` (``share`` of ``than``'s accuracy under
  the column at this scale, declared per claim with its ``reason``): a t-test of each image's a - (1 - share) b.
- ``trend``: ``row``'s accuracy falls over ``columns`` in order: the first column above the last; against it, a
  significant rise at some step (Holm over the steps).
- ``front``: in a figure's clean-robust plane, series ``row``'s front (its non-dominated points joined by straight
  lines) lies above series ``than``'s at matched clean accuracy, over the clean accuracy both cover (the papers'
  "upper right"): the mean gap between the fronts there, its standard error by a bootstrap over the test images; a
  sweep this scale thins is named with the points it lacks.

A claim may state a ``premise`` (rows at the same level within ``within`` points, as a claim that holds one method at
another's clean accuracy): where the premise is shown unmet, the claim is untestable here. Claims whose tests
coincide at this scale (the same jobs under the same columns, the same rule) are tested once and counted once
(``same_as``). The one-sided p-values of every distinct testable claim of a paper are Holm-adjusted over that paper's
claims, for the claim and against it separately: ``holds`` where the claim's adjusted p < 0.05, ``fails`` where the
opposite's is, else ``inconclusive`` (with why); ``untestable here`` where this scale cannot decide it (the reason in
one clause). A verdict shows the estimate and interval of the pair and column its decisive p-value comes from, and
the power figures of the whole procedure at the level it faces (:mod:`tradeoff.report.stats`).

:func:`verdicts` reads the files (:func:`gather`: each claim's outcomes, as :class:`Evidence`) and decides
(:func:`decide`, on arrays alone: the simulations of ``tests/test_claims_null.py`` and ``tests/test_claims_power.py``
run the very same decisions thousands of times).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from tradeoff.config import Catalog, load_yaml
from tradeoff.core.errors import ConfigError
from tradeoff.report import stats, table_model
from tradeoff.report import what_ran as ran
from tradeoff.report.records import ReportError, _entry, measurement, read_json

KINDS = ("better", "not_worse", "trend", "front")
VERDICTS = ("holds", "fails", "inconclusive", "untestable here")
KEYS = {"id", "paper", "where", "says", "test"}
OPTIONAL = {"premise", "untestable"}
TEST_KEYS = {"kind", "target", "columns", "row", "than"}
TEST_OPTIONAL = {"combine", "margin"}
PREMISE_KEYS = {"target", "columns", "row", "than", "within"}
MARGIN_KEYS = {"share", "reason"}


@dataclass
class Verdict:
    """One claim's verdict at this scale."""

    claim: dict                         # the claim as the file states it
    verdict: str                        # one of VERDICTS
    because: str                        # why, one clause (what was left untested, in brackets)
    # the figures of the pair and column the decisive p-value comes from (for "fails" the p against the claim,
    # else the p for it): diff, lo, hi (points), images, seeds; the claim's combined p-values (before Holm) in
    # p_for, p_against; the power figures of the whole procedure at ``level`` in detectable, needed
    test: stats.Test | None = None
    numbers: str = ""                   # the measurements behind it
    adjusted: tuple[float, float] | None = None   # (for, against): Holm over the paper's distinct claims
    split: int | None = None            # the scale's test split, in images
    family: int = 0                     # the paper's distinct testable claims (Holm's family)
    margin: float | None = None         # a not_worse claim's margin, in points at this scale (of the shown pair)
    same_as: str | None = None          # the id of the claim whose test this one repeats at this scale (tallied once)
    seeds: int = 1                      # training runs (seeds) per row, said beside n
    level: float | None = None          # the one-sided level the claim's p must fall below to hold (Holm, its family)
    notes: list[str] = field(default_factory=list)   # what was left out of the test (degenerate columns, ...)
    combined: stats.Test | None = None  # the whole combined test (its leaves in .parts)


# ------------------------------------------------------------------------------------------ the evidence


@dataclass
class Pair:
    """One pair of rows of a better / not_worse claim under its columns."""

    label: str                          # "generalist vs trades_lambda6" (with the target where there are several)
    a: np.ndarray                       # (seeds, columns, images)
    b: np.ndarray
    columns: list[str]
    images: str = "test"                # which test images (parts on the same images correlate)


@dataclass
class Steps:
    """A trend claim's row under its columns in order."""

    label: str
    cells: list[np.ndarray]             # (seeds, images) per column
    columns: list[str]
    images: str = "test"


@dataclass
class Plane:
    """A front claim's clean-robust plane: each series' points, (clean, robust) outcomes of (seeds, images)."""

    label: str
    a: list[tuple[np.ndarray, np.ndarray]]
    b: list[tuple[np.ndarray, np.ndarray]]
    images: str = "test"


@dataclass
class Evidence:
    """What a claim's test reads at this scale, as arrays: :func:`decide` needs nothing else."""

    claim: dict
    parts: list                         # Pair, Steps or Plane
    numbers: str = ""
    split: int | None = None
    key: tuple | None = None            # claims with equal keys are one test at this scale
    notes: list[str] = field(default_factory=list)


def claims_file(catalog: Catalog) -> Path:
    return Path(catalog.reference_dir).parent / "claims.yaml"


def _names(value) -> list:
    return value if isinstance(value, list) else [value]


def load_file(catalog: Catalog, path: Path | None = None) -> dict:
    """The claims file as read: its claims, checked (:func:`load_claims`)."""
    path = path or claims_file(catalog)
    if not path.exists():
        return {"claims": []}
    data = load_yaml(path) or {}
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ConfigError(f"{path}: expected `claims:`, a list of claims")
    if "margin" in data:
        raise ConfigError(f"{path.name}: margin: no file-wide margin; each not_worse claim declares its own "
                          f"(test.margin: {{share: ..., reason: ...}})")
    seen = set()
    for i, claim in enumerate(claims):
        where = f"{path.name}: claims[{i}]"
        if not isinstance(claim, dict) or not KEYS - {"test"} <= set(claim) <= KEYS | OPTIONAL:
            raise ConfigError(f"{where}: a claim has the keys {sorted(KEYS)} (and optionally {sorted(OPTIONAL)}); "
                              f"got {sorted(claim) if isinstance(claim, dict) else claim!r}")
        where = f"{path.name}: claim {claim['id']}"
        if claim["id"] in seen:
            raise ConfigError(f"{where}: the id repeats")
        seen.add(claim["id"])
        if claim.get("untestable"):
            if claim.get("test") is not None:
                raise ConfigError(f"{where}: an untestable claim has no test")
            continue
        test = claim.get("test")
        if not isinstance(test, dict) or not TEST_KEYS <= set(test) <= TEST_KEYS | TEST_OPTIONAL:
            raise ConfigError(f"{where}.test: expected the keys {sorted(TEST_KEYS)} (and optionally "
                              f"{sorted(TEST_OPTIONAL)})")
        if test["kind"] not in KINDS:
            raise ConfigError(f"{where}.test.kind: unknown kind {test['kind']!r}; allowed: {list(KINDS)}")
        if not isinstance(test["columns"], list) or not test["columns"]:
            raise ConfigError(f"{where}.test.columns: a non-empty list of the target's columns")
        several = test["kind"] in ("better", "not_worse") and len(test["columns"]) > 1
        if (several or "combine" in test) and test.get("combine") not in stats.COMBINE:
            raise ConfigError(f"{where}.test.combine: several columns combine as one of "
                              f"{list(stats.COMBINE)}; got {test.get('combine')!r}")
        if "margin" in test and test["kind"] != "not_worse":
            raise ConfigError(f"{where}.test.margin: only a not_worse claim has a margin")
        if test["kind"] == "not_worse":
            margin = test.get("margin")
            share = margin.get("share") if isinstance(margin, dict) else None
            if (not isinstance(margin, dict) or set(margin) != MARGIN_KEYS or isinstance(share, bool)
                    or not isinstance(share, (int, float)) or not 0 < share < 1
                    or not isinstance(margin.get("reason"), str) or not margin["reason"].strip()):
                raise ConfigError(f"{where}.test.margin: a not_worse claim declares its margin as {{share: a "
                                  f"fraction of than's accuracy in (0, 1), reason: why that share}}; got {margin!r}")
        premise = claim.get("premise")
        if premise is not None and (not isinstance(premise, dict) or set(premise) != PREMISE_KEYS):
            raise ConfigError(f"{where}.premise: expected exactly the keys {sorted(PREMISE_KEYS)}")
    return {"claims": claims}


def load_claims(catalog: Catalog, path: Path | None = None) -> list[dict]:
    """The claims, every key known (ConfigError naming the claim and the key)."""
    return load_file(catalog, path)["claims"]


def share(claim: dict) -> float:
    """A not_worse claim's margin as a share of than's accuracy (0 for the other kinds)."""
    test = claim.get("test") or {}
    return float(test["margin"]["share"]) if test.get("kind") == "not_worse" else 0.0


def missing(catalog: Catalog, test: dict) -> str | None:
    """What a claim's test (or premise) names that this configuration lacks (an overlay may replace a target's rows
    or columns), or None: such a claim cannot be tested here, and its verdict says why (a typo shows there too)."""
    for name in _names(test["target"]):
        target = catalog.targets.get(name)
        if target is None or target.kind == "group" or not target.columns:
            return f"no table or figure {name!r} with columns in this configuration"
        absent = [c for c in test["columns"] if c not in target.columns]
        if absent:
            return f"{name} has no column {', '.join(map(repr, absent))} here; its columns: {list(target.columns)}"
        front = test.get("kind") == "front"
        names = {row.series for row in target.rows} if front else {row.key for row in target.rows}
        for key in ("row", "than"):
            if test.get("kind") == "trend" and key == "than":
                continue
            for row in _names(test[key]):
                if row not in names:
                    return (f"{row!r} is not a {'series' if front else 'row'} of {name} here; its "
                            f"{'series' if front else 'rows'}: {sorted(n for n in names if n)}")
    return None


class _Untestable(Exception):
    """This scale cannot decide the claim; the message says why in one clause."""


def _runs(catalog: Catalog, test: dict) -> dict[str, str]:
    return {row.key: row.run for row in catalog.targets[test["target"]].rows}


def _measure(catalog: Catalog, run: str, job: str, what: str) -> tuple[table_model.Ours, np.ndarray]:
    """A row's measurement under one evaluation and its per-image outcomes (seeds, examples): 0/1 correctness, or
    for NROB the share of an image's corrupted copies classified right. _Untestable where it is missing or the row
    was selected before its mechanism acts."""
    o = table_model.measure(catalog, run, job)
    if o.value is None or not (o.bits or o.kind == "nrob"):
        raise _Untestable(f"{job} is not measured (yet) for {what}")
    if o.failed:  # checked before it is judged: a failed attack's number is not robustness (a ⊘ cell of its table)
        raise _Untestable(f"the attack failed at {job} for {what}: {o.failed}")
    early = table_model.early(o)
    if early:
        raise _Untestable(f"{what} was selected at epoch {', '.join(map(str, o.selected))}, before its mechanism "
                          f"acts (from epoch {early.get('epoch')}: {early.get('what')}; a ‡ row of its table)")
    if o.kind != "nrob":
        return o, stats.outcomes(o.bits)
    return o, np.stack([_nrob_scores(catalog, r, job) for r in catalog.row_runs(run)])


def _said(o: table_model.Ours) -> str:
    """A measurement as a verdict quotes it: its value, and where a written audit finds its column overstated, so."""
    return f"{o.value:.1f}" + ("" if o.overstates is None else f" ({table_model.OVERSTATES} overstates by "
                                                               f"{o.overstates:.1f}: the attack's number, not the "
                                                               "model's robustness)")


def _nrob_scores(catalog: Catalog, run: str, job: str) -> np.ndarray:
    """Each test image's share of corrupted copies (every corruption and severity) classified right, from the
    predictions file, checked against its metrics file's NROB."""
    train = catalog.train_id[run]
    path = catalog.predictions_file(train, job)
    found = _entry(catalog, path, read_json(path), job).get("corrupted_correct")
    bits = [b for per in (found or {}).values() if isinstance(per, dict) for b in per.values()]
    if not bits or any(not isinstance(b, str) or len(b) != len(bits[0]) for b in bits):
        raise ReportError(f"{path}: no per-image outcomes under the corruptions (field 'corrupted_correct')")
    scores = stats.outcomes(bits).mean(axis=0)
    m = measurement(catalog, run, job)
    if m is None or abs(float(scores.mean()) - m.accuracy) > 1e-6:
        raise ReportError(f"{path}: its per-image outcomes do not give the NROB of its metrics file")
    return scores


def _jobs(catalog: Catalog, test: dict) -> list[str]:
    target = catalog.targets[test["target"]]
    return [job for column in test["columns"] for job in catalog.column_jobs(target.columns[column])]


def _trained(catalog: Catalog, run: str) -> tuple[str, ...]:
    """The training jobs of a row (one per seed)."""
    return tuple(catalog.train_id[r] for r in catalog.row_runs(run))


def _group(catalog: Catalog, run: str) -> tuple[str, str]:
    spec = catalog.model_spec(run)
    return spec.paper_dataset, spec.paper_arch


def _images(catalog: Catalog, run: str) -> str:
    """Which test images a row is measured on (rows on the same dataset share them)."""
    return str(getattr(catalog.model_spec(run), "dataset", ""))


def _split(catalog: Catalog, run: str, job: str) -> int | None:
    """The scale's test split (its images), as the measurement records it."""
    m = measurement(catalog, catalog.row_runs(run)[0], job)
    size = m.record.get("test_size") if m else None
    return int(size) if isinstance(size, (int, float)) or (isinstance(size, str) and size.isdigit()) else None


def _pair(catalog: Catalog, test: dict, row: str, than: str, label: str) -> tuple[Pair, list[str], int | None]:
    """One pair's outcomes under every column of the claim, (seeds, columns, examples) each."""
    runs = _runs(catalog, test)
    if _trained(catalog, runs[row]) == _trained(catalog, runs[than]):
        raise _Untestable(f"{row} and {than} are one training job at this scale")
    a, b, texts = [], [], []
    jobs = _jobs(catalog, test)
    for job in jobs:
        (x, xa), (y, yb) = _measure(catalog, runs[row], job, row), _measure(catalog, runs[than], job, than)
        a.append(xa)
        b.append(yb)
        texts.append(f"{row} {_said(x)} vs {than} {_said(y)} under {job}")
    seeds = min(m.shape[0] for m in a + b)
    pair = Pair(label, np.stack([m[:seeds] for m in a], axis=1), np.stack([m[:seeds] for m in b], axis=1),
                list(test["columns"]), _images(catalog, runs[row]))
    return pair, texts, _split(catalog, runs[row], jobs[0])


def _pairs(catalog: Catalog, test: dict) -> tuple[list[tuple[str, str]], int]:
    """Every (row, than) pair of a claim over several configurations, within one paper dataset and architecture,
    pairs that are the same training jobs as an earlier pair once; and how many were such repeats."""
    runs = _runs(catalog, test)
    out, seen, repeats = [], set(), 0
    for r in _names(test["row"]):
        for t in _names(test["than"]):
            if _group(catalog, runs[r]) != _group(catalog, runs[t]):
                continue
            jobs = (_trained(catalog, runs[r]), _trained(catalog, runs[t]))
            if jobs in seen:
                repeats += 1
                continue
            seen.add(jobs)
            out.append((r, t))
    return out, repeats


def _premise(catalog: Catalog, premise: dict) -> tuple[str | None, tuple]:
    """Why a claim's premise is unmet (the rows' difference lies wholly outside ±within points at 95%), or None;
    and the premise's key (its jobs)."""
    lacking = missing(catalog, premise)
    if lacking:
        raise _Untestable(f"its premise cannot be checked here: {lacking}")
    pair, _, _ = _pair(catalog, premise, premise["row"], premise["than"], "")
    test = stats.paired(pair.a[:, 0], pair.b[:, 0])
    within = float(premise["within"])
    runs = _runs(catalog, premise)
    key = ("premise", _trained(catalog, runs[premise["row"]]), _trained(catalog, runs[premise["than"]]),
           tuple(_jobs(catalog, premise)), within)
    if test.lo > within or test.hi < -within:
        return (f"its premise is unmet: {premise['row']} minus {premise['than']} under {premise['columns'][0]} is "
                f"{test.diff:+.1f} points [{test.lo:+.1f}, {test.hi:+.1f}], not within ±{within:g} (the same "
                f"level)"), key
    return None, key


def _paper_rows(catalog: Catalog, name: str) -> list[dict]:
    """A target's rows as the paper-scale config file (``config.yaml`` beside ``reference/``) writes them, or []."""
    path = Path(catalog.reference_dir).parent / "config.yaml"
    try:
        rows = ((load_yaml(path) or {}).get("targets") or {}).get(name, {}).get("rows")
    except (OSError, ConfigError, AttributeError):
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _thinned(catalog: Catalog, name: str, series: list[str]) -> str | None:
    """The points of a front's series that the paper draws and this scale does not (its sweep thinned), or None."""
    here = {row.key for row in catalog.targets[name].rows}
    lacking: dict[str, list[str]] = {}
    for row in _paper_rows(catalog, name):
        if row.get("series") in series and row.get("key") not in here:
            lacking.setdefault(row["series"], []).append(str(row.get("label") or row.get("key")))
    if not lacking:
        return None
    return (f"{name} at this scale: the paper's sweep less " +
            " and ".join(f"{s} {', '.join(labels)}" for s, labels in lacking.items()))


def _gather_one(catalog: Catalog, test: dict, several: bool) -> tuple[list, list[str], int | None, list, list[str]]:
    """One target's part of a claim: (parts, measurement texts, split, key parts, notes)."""
    kind, name = test["kind"], test["target"]
    prefix = f"{name}: " if several else ""
    if kind in ("better", "not_worse"):
        pairs, repeats = _pairs(catalog, test)
        if not pairs:
            raise _Untestable("no row and compared row share a paper dataset and architecture")
        runs = _runs(catalog, test)
        parts, texts, split, keys = [], [], None, []
        for row, than in pairs:
            pair, found, size = _pair(catalog, test, row, than, f"{prefix}{row} vs {than}")
            parts.append(pair)
            texts += found
            split = split or size
            keys.append((_trained(catalog, runs[row]), _trained(catalog, runs[than]), tuple(_jobs(catalog, test))))
        notes = [f"{prefix}{repeats} of {repeats + len(pairs)} pairs of rows are the same training jobs as another "
                 f"pair at this scale: counted once"] if repeats else []
        return parts, texts, split, keys, notes
    runs = _runs(catalog, test)
    if kind == "trend":
        row, cells, texts = test["row"], [], []
        for job in _jobs(catalog, test):
            o, out = _measure(catalog, runs[row], job, row)
            cells.append(out)
            texts.append(f"{job} {_said(o)}")
        seeds = min(c.shape[0] for c in cells)
        steps = Steps(f"{prefix}{row}", [c[:seeds] for c in cells], list(test["columns"]), _images(catalog, runs[row]))
        key = [(_trained(catalog, runs[row]), tuple(_jobs(catalog, test)))]
        return [steps], [f"{prefix}{row}: " + ", ".join(texts)], _split(catalog, runs[row], _jobs(catalog, test)[0]), \
            key, []
    # front: one clean-robust plane per robust column, every plane must hold
    target = catalog.targets[name]
    clean = target.columns[test["columns"][0]]
    planes, texts, split, keys = [], [], None, []
    for robust_column in test["columns"][1:]:
        robust = target.columns[robust_column]
        series: dict[str, list] = {test["row"]: [], test["than"]: []}
        jobs: dict[str, list] = {test["row"]: [], test["than"]: []}
        images = ""
        for row in target.rows:
            if row.series not in series or _trained(catalog, row.run) in jobs[row.series]:
                continue   # a point that is another point's training job at this scale: drawn once
            (x, xo), (y, yo) = (_measure(catalog, row.run, clean, row.key),
                                _measure(catalog, row.run, robust, row.key))
            seeds = min(xo.shape[0], yo.shape[0])
            series[row.series].append((xo[:seeds], yo[:seeds]))
            jobs[row.series].append(_trained(catalog, row.run))
            texts.append(f"{row.key} ({x.value:.1f}, {y.value:.1f} {robust_column})")
            split = split or _split(catalog, row.run, clean)
            images = images or _images(catalog, row.run)
        if set(jobs[test["row"]]) == set(jobs[test["than"]]):
            raise _Untestable("both series are the same training jobs at this scale")
        planes.append(Plane(f"{prefix}{test['row']} vs {test['than']} in the {test['columns'][0]}–{robust_column} "
                            f"plane", series[test["row"]], series[test["than"]], images))
        keys.append((tuple(sorted(jobs[test["row"]])), tuple(sorted(jobs[test["than"]])),
                     tuple(catalog.column_jobs(clean)), tuple(catalog.column_jobs(robust))))
    thin = _thinned(catalog, name, [test["row"], test["than"]])
    notes = [thin] if thin else []
    return planes, [f"{name}: " + "; ".join(texts) + " (clean, robust %)"], split, keys, notes


def _merged(notes: list[str]) -> list[str]:
    """Notes that differ only in the target they name said once, naming every target ("caat_figure4a, caat_figure4b
    at this scale: ...")."""
    out: dict[str, list[str]] = {}
    for note in notes:
        head, sep, rest = note.partition(" at this scale: ")
        key = rest if sep else note
        out.setdefault(key, []).append(head if sep else "")
    return [f"{', '.join(heads)} at this scale: {rest}" if heads[0] else rest for rest, heads in out.items()]


def gather(catalog: Catalog, path: Path | None = None) -> list[Verdict | Evidence]:
    """Every claim's evidence at this scale, in the file's order: an :class:`Evidence` of its outcomes, or a
    Verdict "untestable here" saying why. A target whose files cannot be vouched for makes its claims untestable,
    naming the file."""
    out: list[Verdict | Evidence] = []
    for claim in load_file(catalog, path)["claims"]:
        if ran.generated(catalog):
            out.append(Verdict(claim, "untestable here", "this scale's data are generated files: its numbers measure "
                                                         "nothing about the methods"))
            continue
        if claim.get("untestable"):
            out.append(Verdict(claim, "untestable here", str(claim["untestable"])))
            continue
        lacking = missing(catalog, claim["test"])
        if lacking:
            out.append(Verdict(claim, "untestable here", f"not testable in this configuration: {lacking}"))
            continue
        try:
            test = claim["test"]
            key: list = [test["kind"], test.get("combine"), share(claim)]
            if claim.get("premise"):
                unmet, premise_key = _premise(catalog, claim["premise"])
                if unmet:
                    raise _Untestable(unmet)
                key.append(premise_key)
            names = _names(test["target"])
            parts, texts, split, keys, notes = [], [], None, [], []
            for name in names:
                p, t, s, k, n = _gather_one(catalog, {**test, "target": name}, len(names) > 1)
                parts += p
                texts += t
                split = split or s
                keys += k
                notes += n
        except _Untestable as exc:
            out.append(Verdict(claim, "untestable here", str(exc)))
        except ReportError as exc:
            out.append(Verdict(claim, "untestable here", f"refused: {exc}"))
        else:
            out.append(Evidence(claim, parts, "; ".join(texts), split, (*key, frozenset(keys)), _merged(notes)))
    return out


# ------------------------------------------------------------------------------------------ the decision


def _degenerate(a: np.ndarray, b: np.ndarray) -> str | None:
    """'0%' or '100%' where both rows are there on every image and seed of a column (a: (seeds, images)), else None."""
    if not np.any(a) and not np.any(b):
        return "0%"
    if np.all(a == 1) and np.all(b == 1):
        return "100%"
    return None


def _tested(evidence: Evidence) -> tuple[stats.Test, list[str]]:
    """The claim's combined test from its arrays, and what it left out (columns where both rows are at 0% or 100%,
    which separate nothing). _Untestable where nothing is left to test."""
    claim = evidence.claim
    test = claim["test"]
    kind, combine, s = test["kind"], test.get("combine", "all"), share(claim)
    if kind in ("better", "not_worse"):
        found, floored, total = [], {"0%": 0, "100%": 0}, 0
        for pair in evidence.parts:
            keep = []
            for c, column in enumerate(pair.columns):
                total += 1
                level = _degenerate(pair.a[:, c], pair.b[:, c])
                if level:
                    floored[level] += 1
                else:
                    keep.append(c)
            if not keep:      # a pair with no column left: nothing of it to test (its columns are counted)
                continue
            found.append(stats.combined(pair.a[:, keep], pair.b[:, keep], combine, s,
                                        [pair.columns[c] for c in keep], pair.label, pair.images))
        notes = []
        at = [level for level, k in floored.items() if k]
        if at:
            n = sum(floored.values())
            notes.append(f"{n} of {total} columns at {at[0]} for both rows: not tested" if len(at) == 1 else
                         f"{n} of {total} columns at 0% or 100% for both rows ({floored['0%']} at 0%, "
                         f"{floored['100%']} at 100%): not tested")
        if not found:
            level = "0%" if floored["0%"] else "100%"
            raise _Untestable(f"every compared column has both rows at {level}"
                              + (" (or 100%)" if floored["0%"] and floored["100%"] else "")
                              + ": no test image can separate them")
        return stats.every(found, "pairs of rows"), notes
    if kind == "trend":
        steps = evidence.parts
        found = []
        for part in steps:
            if all(not np.any(c) for c in part.cells):
                raise _Untestable(f"{part.label} is at 0% under every column: no test image can show a fall")
            found.append(stats.trend(part.cells, part.columns, part.label, part.images))
        return stats.every(found, "tables or figures"), []
    planes, notes, dropped = [], [], 0
    for plane in evidence.parts:
        if all(not np.any(r) for _, r in plane.a + plane.b):
            dropped += 1
            continue
        try:
            planes.append(stats.front(plane.a, plane.b, plane.label, plane.images))
        except stats.NoCommonRange as exc:
            raise _Untestable(f"{plane.label}: {exc}: the fronts cannot be compared at matched clean "
                              f"accuracy") from None
    if dropped:
        notes.append(f"{dropped} of {len(evidence.parts)} planes with every point at 0% robust accuracy: not tested")
    if not planes:
        raise _Untestable("every point of both series is at 0% robust accuracy: no test image can separate them")
    return stats.every(planes, "clean-robust planes"), notes


def decide(items: list[Verdict | Evidence], figures: bool = True) -> list[Verdict]:
    """The verdicts of gathered claims (:func:`gather`), in order: each distinct test once (a claim whose test
    repeats an earlier one's at this scale is ``same_as`` it and gets its verdict), the p-values Holm-adjusted within
    each paper over its distinct testable claims (for and against separately), the power figures of the whole
    procedure at the level each claim faces there. ``figures=False`` leaves the power figures out (they decide no
    verdict: the simulations of the tests' null and power run the same decisions thousands of times without them;
    an inconclusive verdict's reason then names no number of images)."""
    out: list[Verdict] = []
    first: dict[tuple, Verdict] = {}
    for item in items:
        if isinstance(item, Verdict):
            out.append(item)
            continue
        if item.key is not None and item.key in first:
            out.append(Verdict(item.claim, "", "", numbers=item.numbers, split=item.split,
                               same_as=first[item.key].claim["id"]))
            continue
        try:
            combined, notes = _tested(item)
        except _Untestable as exc:
            left = f" ({'; '.join(item.notes)})" if item.notes else ""
            out.append(Verdict(item.claim, "untestable here", str(exc) + left, numbers=item.numbers,
                               split=item.split, notes=list(item.notes)))
            continue
        v = Verdict(item.claim, "", "", numbers=item.numbers, split=item.split, notes=list(item.notes) + notes,
                    combined=combined, seeds=max(leaf.seeds for leaf in stats.leaves(combined)))
        if item.key is not None:
            first[item.key] = v
        out.append(v)
    for paper in dict.fromkeys(v.claim["paper"] for v in out):
        family = [v for v in out if v.claim["paper"] == paper and v.combined is not None]
        p_for = [v.combined.p_for for v in family]
        for i, (v, a_for, a_against) in enumerate(zip(family, stats.holm(p_for),
                                                      stats.holm([v.combined.p_against for v in family]))):
            v.adjusted, v.family = (a_for, a_against), len(family)
            v.level = stats.holm_level(p_for[:i] + p_for[i + 1:], len(family))
            _word(v, figures)
    by_id = {v.claim["id"]: v for v in out}
    for v in out:
        if v.same_as is not None:
            t = by_id[v.same_as]
            v.verdict, v.test, v.adjusted, v.family, v.margin = t.verdict, t.test, t.adjusted, t.family, t.margin
            v.seeds, v.level, v.combined, v.notes = t.seeds, t.level, t.combined, t.notes
            v.because = f"= claim {v.same_as} at this scale (the same jobs under the same columns): {t.because}"
    return out


def verdicts(catalog: Catalog, path: Path | None = None) -> list[Verdict]:
    """Every claim's verdict at this scale, in the file's order (:func:`gather`, then :func:`decide`)."""
    return decide(gather(catalog, path))


def _word(v: Verdict, figures: bool = True) -> None:
    """A tested verdict's word, reason, shown estimate and power figures."""
    c, (p_for, p_against) = v.combined, v.adjusted
    side = "against" if p_against < stats.ALPHA <= p_for else "for"
    shown = stats.decisive(c, side)
    detectable, needed = stats.power_figures(c, v.level) if figures else (None, None)
    how = c.how if shown is c else f"{c.how}; the estimate shown, {shown.label}: {shown.how}"
    v.test = replace(shown, p_for=c.p_for, p_against=c.p_against, how=how, rule="leaf", parts=[],
                     detectable=detectable, needed=needed, differing=c.differing, seeds=v.seeds)
    v.margin = shown.margin if v.claim["test"]["kind"] == "not_worse" else None
    left = f" ({'; '.join(v.notes)})" if v.notes else ""
    if p_for < stats.ALPHA:
        v.verdict, v.because = "holds", f"significant for the claim after Holm over the paper's {v.family} claims"
    elif p_against < stats.ALPHA:
        v.verdict, v.because = "fails", f"significant against the claim after Holm over the paper's {v.family} claims"
    else:
        v.verdict, v.because = "inconclusive", _inconclusive(v)
    v.because += left


def _within(v: Verdict, side: str) -> str:
    """What the claim's p on ``side`` was corrected over on its way to the shown leaf: Holm over the parts of an
    ``any`` node (for the claim) or of an ``all`` node or a trend's steps (against it), and the paper's claims."""
    corrected = {"for": ("any",), "against": ("all", "trend")}[side]
    node, inner = v.combined, []
    while node.rule != "leaf" and node.parts:
        if node.rule in corrected and len(node.parts) > 1:
            inner.append(f"its {len(node.parts) - (node.rule == 'trend')} {node.what}")
        leaf = stats.decisive(node, side)
        node = next((p for p in node.parts if _holds(p, leaf)), leaf)
        if node is leaf:
            break
    return f"after Holm over {' and '.join(inner + [f'the paper{chr(39)}s {v.family} claims'])}"


def _holds(node: stats.Test, leaf: stats.Test) -> bool:
    """Whether ``leaf`` is somewhere under ``node``."""
    return node is leaf or any(_holds(p, leaf) for p in node.parts)


def _inconclusive(v: Verdict) -> str:
    """Why a tested claim decides neither way, in one clause."""
    t, margin = v.test, v.margin or 0.0
    if v.combined.differing == 0:
        return "an exact tie: the outcomes agree on every test image"
    if abs(t.diff + margin) <= 100 * stats.TIE:
        return "the estimate is zero: the images that favour the claim and those against it balance"
    bound = f"{-margin:g}" if margin else "0"
    if t.diff + margin < 0.0:
        if t.hi < -margin:
            return (f"the estimate goes against the claim, and its 95% interval ({t.label}) excludes {bound} before "
                    f"correction, not significantly {_within(v, 'against')}")
        return "the estimate goes against the claim, not significantly"
    level = f"at the level Holm leaves it ({v.level:.2g}, one-sided)"
    if t.lo > -margin:
        head = (f"the estimate favours the claim and its 95% interval ({t.label}) excludes {bound} before correction, "
                f"but it is not significant {_within(v, 'for')}")
    else:
        head = "the estimate favours the claim, not significantly"
    if t.needed is None:
        if v.seeds > 1:
            return (f"{head}: with these {v.seeds} seeds, whose results vary, no number of test images would detect "
                    f"it with {stats.POWER:.0%} power {level}")
        return head
    split = v.split
    holds = "" if split is None else (f"; this scale's test split holds {split:,}" if t.needed <= split else
                                      f", more than this scale's test split ({split:,}) holds")
    return f"{head}: about {t.needed:,} test images would detect it with {stats.POWER:.0%} power {level}{holds}"


def _test_spec(claim: dict) -> str:
    test = claim["test"]
    rows = " and ".join(map(str, _names(test["row"])))
    if test["kind"] == "trend":
        return f"trend of {rows} over {', '.join(test['columns'])} on {', '.join(_names(test['target']))}"
    than = " and ".join(map(str, _names(test["than"])))
    extra = f", combine {test['combine']}" if test.get("combine") else ""
    return f"{test['kind'].replace('_', ' ')}: {rows} vs {than} under {', '.join(test['columns'])} on " \
           f"{', '.join(_names(test['target']))}{extra}"


def _n(v: Verdict) -> str:
    return f"n = {v.test.images:,} test images" + (f" × {v.seeds} seeds" if v.seeds > 1 else " (one seed)")


def line(v: Verdict) -> str:
    """One verdict as one plain-text paragraph: the verdict and why, the paper's words, the difference of the pair
    and column the decisive p-value comes from with its interval and n in test images and seeds, the power figures of
    the whole procedure, the p-values, the measurements."""
    c = v.claim
    head = f"{v.verdict}: {v.because}. {c['paper']}, {c['where']}: “{c['says']}”"
    if v.test is None:
        return head + (f" ({_test_spec(c)})." if c.get("test") else "" if c["says"].endswith(".") else ".")
    t = v.test
    kind = c["test"]["kind"]
    unit = "points of robust accuracy at matched clean accuracy" if kind == "front" else "points"
    text = (f"{head} ({_test_spec(c)}; {t.how}). Difference {t.diff:+.1f} {unit}" + (f" ({t.label})" if t.label else "")
            + f", 95% interval [{t.lo:+.1f}, {t.hi:+.1f}], {_n(v)}")
    if v.margin is not None:
        reason = c["test"]["margin"]["reason"]
        text += f"; margin {v.margin:.2g} points ({100 * share(c):g}% of than's accuracy: {reason})"
    if t.detectable is not None:
        what = ("the smallest true difference at which it holds" if kind == "not_worse"
                else "the smallest difference detected")
        level = "" if v.level is None else f" ({v.level:.2g})"
        text += (f"; {what} with {stats.POWER:.0%} power at this n, the whole procedure at the level Holm leaves it"
                 f"{level}: {t.detectable:+.1f} points")
    elif v.level is not None:
        text += f"; no difference is detected with {stats.POWER:.0%} power at this n and level ({v.level:.2g})"
    p_for, p_against = v.adjusted
    text += (f"; one-sided p = {t.p_for:.3g} for, {t.p_against:.3g} against (Holm over the paper's {v.family} "
             f"claims: {p_for:.3g}, {p_against:.3g}). Measured: {v.numbers}"
             + ("." if v.numbers.endswith("%)") else " (%)."))
    return text


def tally(found: list[Verdict]) -> str:
    """The tally sentence: each distinct test counted once, and what Holm bounds (per paper, per tail)."""
    distinct = [f for f in found if f.same_as is None]
    counts = {v: sum(1 for f in distinct if f.verdict == v) for v in VERDICTS}
    repeats = len(found) - len(distinct)
    papers = len({f.claim["paper"] for f in distinct if f.combined is not None})
    same = (f"; {repeats} repeat{'s' if repeats == 1 else ''} another claim's test (the same jobs under the same "
            f"columns) and {'is' if repeats == 1 else 'are'} counted with it" if repeats else "")
    overall = (f" Over the {papers} papers together the chance of some false “holds” is at most "
               f"{min(papers * stats.ALPHA, 1):.0%} (and of some false “fails” as much), not {stats.ALPHA:.0%}."
               if papers > 1 else "")
    return (f"{len(found)} claims (config/claims.yaml), {len(distinct)} distinct tests at this scale: "
            f"{counts['holds']} hold, {counts['fails']} fail, "
            f"{counts['inconclusive']} inconclusive, {counts['untestable here']} untestable here{same}. Each paper's "
            f"tested claims are one family per tail: within each paper Holm's correction keeps the chance of any "
            f"false “holds” at most {stats.ALPHA:.0%}, and separately of any false “fails” at most "
            f"{stats.ALPHA:.0%} (one-sided tests).{overall}")


def markdown(found: list[Verdict], scale: str) -> list[str]:
    """The verdicts as Markdown lines: the tally, then one line per claim."""
    out = [f"## The papers' claims at the {scale} scale", "", tally(found), ""]
    out += [f"- {line(v)}" for v in found]
    return out
