"""The papers' claims, checked at the scale that ran: ``config/claims.yaml`` (beside the config, like ``reference/``).

Each claim quotes the paper's words (one quote, one claim), says where they stand, and names the test that decides
it on our measurements (metrics and predictions files only, vouched for as a table's; :mod:`tradeoff.report.tables`).
The statistics are :mod:`tradeoff.report.stats`'s; a test image is the unit of every test (its outcomes under every
column and seed of a claim kept together):

- ``better``: each row of ``row`` is more accurate than each row of ``than`` (each a key or a list of keys: a claim
  over several configurations tests every pair within one paper dataset and architecture, and every pair must hold)
  under ``columns``. Several columns declare ``combine``: ``all`` (every column must hold: intersection-union,
  p = the largest p), ``any`` (Holm over them) or ``mean`` (the mean over columns: a paired sign-flip test over
  images of each image's summed difference).
- ``not_worse``: ``row`` is not below ``than`` by more than ``margin`` points (the file's default, or the claim's),
  judged on Newcombe's paired interval of the difference (its one-sided 95% lower bound above -margin).
- ``trend``: ``row``'s accuracy falls over ``columns`` in order: the first column above the last; against it, a
  significant rise at some step (Holm over the steps).
- ``front``: in a figure's clean-robust plane, series ``row``'s points dominate a larger area than series
  ``than``'s (the hypervolume from (0, 0)), by a bootstrap over the test images.

A claim may state a ``premise`` (rows at the same level within ``within`` points, as a claim that holds one method at
another's clean accuracy): where the premise is shown unmet, the claim is untestable here. The one-sided p-values of
every testable claim of a paper are Holm-adjusted over that paper's claims, for the claim and against it separately:
``holds`` where the claim's adjusted p < 0.05, ``fails`` where the opposite's is, else ``inconclusive`` (with why);
``untestable here`` where this scale cannot decide it (the reason in one clause). The verdicts open ``summary.md``
(:mod:`tradeoff.report.summary`), after what this scale can and cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tradeoff.config import Catalog, load_yaml
from tradeoff.core.errors import ConfigError
from tradeoff.report import what_ran as ran, stats, tables
from tradeoff.report.records import _entry, measurement, read_json
from tradeoff.report.records import measurement

KINDS = ("better", "not_worse", "trend", "front")
VERDICTS = ("holds", "fails", "inconclusive", "untestable here")
KEYS = {"id", "paper", "where", "says", "test"}
OPTIONAL = {"premise", "untestable"}
TEST_KEYS = {"kind", "target", "columns", "row", "than"}
TEST_OPTIONAL = {"combine", "margin"}
PREMISE_KEYS = {"target", "columns", "row", "than", "within"}


@dataclass
class Verdict:
    claim: dict
    verdict: str                        # one of VERDICTS
    because: str                        # why, one clause
    test: stats.Test | None = None
    numbers: str = ""                   # the measurements behind it
    adjusted: tuple[float, float] | None = None   # (for, against): Holm over the paper's claims
    split: int | None = None            # the scale's test split, in images
    family: int = 0                     # the paper's testable claims (Holm's family)
    margin: float | None = None         # a not_worse claim's margin, points


@dataclass
class _Cells:
    a: np.ndarray                       # (seeds, columns, examples): one pair of rows
    b: np.ndarray
    texts: list[str] = field(default_factory=list)
    split: int | None = None


def claims_file(catalog: Catalog) -> Path:
    return Path(catalog.reference_dir).parent / "claims.yaml"


def _names(value) -> list:
    return value if isinstance(value, list) else [value]


def load_file(catalog: Catalog, path: Path | None = None) -> dict:
    """The claims file as read: its ``margin`` default and its claims, checked (:func:`load_claims`)."""
    path = path or claims_file(catalog)
    if not path.exists():
        return {"margin": None, "claims": []}
    data = load_yaml(path) or {}
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ConfigError(f"{path}: expected `claims:`, a list of claims")
    margin = data.get("margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0):
        raise ConfigError(f"{path.name}: margin: a non-negative number of points")
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
        if test["kind"] == "not_worse" and test.get("margin", margin) is None:
            raise ConfigError(f"{where}.test.margin: a not_worse claim needs a margin (or the file's `margin:`)")
        premise = claim.get("premise")
        if premise is not None and (not isinstance(premise, dict) or set(premise) != PREMISE_KEYS):
            raise ConfigError(f"{where}.premise: expected exactly the keys {sorted(PREMISE_KEYS)}")
    return {"margin": margin, "claims": claims}


def load_claims(catalog: Catalog, path: Path | None = None) -> list[dict]:
    """The claims, every key known (ConfigError naming the claim and the key)."""
    return load_file(catalog, path)["claims"]


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


def _measure(catalog: Catalog, run: str, job: str, what: str) -> tuple[tables.Ours, np.ndarray]:
    """A row's measurement under one evaluation and its per-image outcomes (seeds, examples): 0/1 correctness, or
    for NROB the share of an image's corrupted copies classified right. _Untestable where it is missing or the row
    was selected before its mechanism acts."""
    o = tables.measure(catalog, run, job)
    if o.value is None or not (o.bits or o.kind == "nrob"):
        raise _Untestable(f"{job} is not measured (yet) for {what}")
    if o.failed:  # checked before it is judged: a failed attack's number is not robustness (a ⊘ cell of its table)
        raise _Untestable(f"the attack failed at {job} for {what}: {o.failed}")
    early = tables.early(o)
    if early:
        raise _Untestable(f"{what} was selected at epoch {', '.join(map(str, o.selected))}, before its mechanism "
                          f"acts (from epoch {early.get('epoch')}: {early.get('what')}; a ‡ row of its table)")
    if o.kind != "nrob":
        return o, stats.outcomes(o.bits)
    return o, np.stack([_nrob_scores(catalog, r, job) for r in catalog.row_runs(run)])


def _said(o: tables.Ours) -> str:
    """A measurement as a verdict quotes it: its value, and where a written audit finds its column overstated, so."""
    return f"{o.value:.1f}" + ("" if o.overstates is None else f" ({tables.OVERSTATES} overstates by "
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
        raise tables.ReportError(f"{path}: no per-image outcomes under the corruptions (field 'corrupted_correct')")
    scores = stats.outcomes(bits).mean(axis=0)
    m = measurement(catalog, run, job)
    if m is None or abs(float(scores.mean()) - m.accuracy) > 1e-6:
        raise tables.ReportError(f"{path}: its per-image outcomes do not give the NROB of its metrics file")
    return scores


def _jobs(catalog: Catalog, test: dict) -> list[str]:
    target = catalog.targets[test["target"]]
    return [job for column in test["columns"] for job in catalog.column_jobs(target.columns[column])]


def _same_job(catalog: Catalog, a: str, b: str) -> bool:
    return [catalog.train_id[r] for r in catalog.row_runs(a)] == [catalog.train_id[r] for r in catalog.row_runs(b)]


def _group(catalog: Catalog, run: str) -> tuple[str, str]:
    spec = catalog.model_spec(run)
    return spec.paper_dataset, spec.paper_arch


def _split(catalog: Catalog, run: str, job: str) -> int | None:
    """The scale's test split (its images), as the measurement records it."""
    m = measurement(catalog, catalog.row_runs(run)[0], job)
    size = m.record.get("test_size") if m else None
    return int(size) if isinstance(size, (int, float)) or (isinstance(size, str) and size.isdigit()) else None


def _pair(catalog: Catalog, test: dict, row: str, than: str) -> _Cells:
    """One pair's outcomes under every column of the claim, (seeds, columns, examples) each."""
    runs = _runs(catalog, test)
    if _same_job(catalog, runs[row], runs[than]):
        raise _Untestable(f"{row} and {than} are one training job at this scale")
    a, b, texts = [], [], []
    for job in _jobs(catalog, test):
        (x, xa), (y, yb) = _measure(catalog, runs[row], job, row), _measure(catalog, runs[than], job, than)
        a.append(xa)
        b.append(yb)
        texts.append(f"{row} {_said(x)} vs {than} {_said(y)} under {job}")
    seeds = min(m.shape[0] for m in a + b)
    return _Cells(np.stack([m[:seeds] for m in a], axis=1), np.stack([m[:seeds] for m in b], axis=1), texts,
                  _split(catalog, runs[row], _jobs(catalog, test)[0]))


def _pairs(catalog: Catalog, test: dict) -> list[tuple[str, str]]:
    """Every (row, than) pair of a claim over several configurations, within one paper dataset and architecture."""
    runs = _runs(catalog, test)
    return [(r, t) for r in _names(test["row"]) for t in _names(test["than"])
            if _group(catalog, runs[r]) == _group(catalog, runs[t])]


def _floor(cells: _Cells) -> str | None:
    """Why no test image can separate the rows (both at 0%, or both at 100%, under every column), or None."""
    a, b = cells.a.mean(axis=(0, 2)), cells.b.mean(axis=(0, 2))
    if all(x == y == 0.0 for x, y in zip(a, b)):
        return "every model is at 0% under every column: no test image can separate them"
    if all(x == y == 1.0 for x, y in zip(a, b)):
        return "every model is at 100% under every column: no test image can separate them"
    return None


def _floored(cells: _Cells) -> int:
    """How many of a pair's columns have both rows at 0% or both at 100%."""
    a, b = cells.a.mean(axis=(0, 2)), cells.b.mean(axis=(0, 2))
    return sum(1 for x, y in zip(a, b) if x == y and x in (0.0, 1.0))


def _premise(catalog: Catalog, premise: dict) -> str | None:
    """Why a claim's premise is unmet (the rows' difference lies wholly outside ±within points at 95%), or None."""
    lacking = missing(catalog, premise)
    if lacking:
        raise _Untestable(f"its premise cannot be checked here: {lacking}")
    cells = _pair(catalog, premise, premise["row"], premise["than"])
    test = stats.paired(cells.a[:, 0, :], cells.b[:, 0, :])
    within = float(premise["within"])
    if test.lo > within or test.hi < -within:
        return (f"its premise is unmet: {premise['row']} minus {premise['than']} under {premise['columns'][0]} is "
                f"{test.diff:+.1f} points [{test.lo:+.1f}, {test.hi:+.1f}], not within ±{within:g} (the same level)")
    return None


def _test(catalog: Catalog, claim: dict, margin: float | None) -> tuple[stats.Test, str, int | None]:
    """A claim's test over every table or figure it names (all must hold), its measurements and test split."""
    test = claim["test"]
    if claim.get("premise"):
        unmet = _premise(catalog, claim["premise"])
        if unmet:
            raise _Untestable(unmet)
    found = [_one(catalog, {**test, "target": name}, margin) for name in _names(test["target"])]
    return (stats.every([f[0] for f in found], "tables or figures"), "; ".join(f[1] for f in found),
            next((f[2] for f in found if f[2]), None))


def _one(catalog: Catalog, test: dict, margin: float | None) -> tuple[stats.Test, str, int | None]:
    kind = test["kind"]
    if kind in ("better", "not_worse"):
        pairs = _pairs(catalog, test)
        if not pairs:
            raise _Untestable("no row and compared row share a paper dataset and architecture")
        cells = [_pair(catalog, test, row, than) for row, than in pairs]
        floors = [_floor(c) for c in cells]
        if all(floors):
            raise _Untestable(floors[0])
        points = float(test.get("margin", margin) or 0.0) if kind == "not_worse" else 0.0
        found = [stats.combined(c.a, c.b, test.get("combine", "all"), points / 100.0) for c in cells]
        texts = "; ".join(t for c in cells for t in c.texts)
        columns = sum(c.a.shape[1] for c in cells)
        floored = sum(_floored(c) for c in cells)
        if floored:
            texts += (f"; {floored} of {columns} compared columns have both rows at 0% (or 100%): no test image "
                      f"separates them there")
        return stats.every(found, "pairs of rows"), texts, next((c.split for c in cells if c.split), None)
    runs = _runs(catalog, test)
    if kind == "trend":
        row, outs, texts = test["row"], [], []
        for job in _jobs(catalog, test):
            o, out = _measure(catalog, runs[row], job, row)
            outs.append(out)
            texts.append(f"{job} {_said(o)}")
        if all(float(o.mean()) == 0.0 for o in outs):
            raise _Untestable(f"{row} is at 0% under every column: no test image can show a fall")
        return stats.trend(outs), f"{row}: " + ", ".join(texts), _split(catalog, runs[row], _jobs(catalog, test)[0])
    # front: one clean-robust plane per robust column, every plane must hold
    target = catalog.targets[test["target"]]
    clean = target.columns[test["columns"][0]]
    planes, texts, split = [], [], None
    for robust_column in test["columns"][1:]:
        robust = target.columns[robust_column]
        series: dict[str, list] = {test["row"]: [], test["than"]: []}
        jobs: dict[str, set] = {test["row"]: set(), test["than"]: set()}
        for row in target.rows:
            if row.series not in series:
                continue
            (x, xo), (y, yo) = (_measure(catalog, row.run, clean, row.key),
                                _measure(catalog, row.run, robust, row.key))
            series[row.series].append((xo, yo))
            jobs[row.series].add(tuple(catalog.train_id[r] for r in catalog.row_runs(row.run)))
            texts.append(f"{row.key} ({x.value:.1f}, {y.value:.1f} {robust_column})")
            split = split or _split(catalog, row.run, clean)
        if jobs[test["row"]] == jobs[test["than"]]:
            raise _Untestable("both series are the same training jobs at this scale")
        planes.append(stats.front(series[test["row"]], series[test["than"]]))
    return stats.every(planes, "clean-robust planes"), f"{test['target']}: " + "; ".join(texts) + \
        " (clean, robust %)", split


def _inconclusive(test: stats.Test, split: int | None) -> str:
    """Why a tested claim decides neither way, in one clause."""
    if test.differing == 0:
        return "an exact tie: the outcomes agree on every test image"
    if abs(test.diff) <= 100 * stats.TIE:
        return "the estimate is zero: the images that favour the claim and those against it balance"
    if test.diff < 0.0:
        return "the estimate goes against the claim, not significantly"
    if test.needed is None:
        return "the estimate favours the claim, not significantly"
    holds = "" if split is None else (f"; this scale's test split holds {split:,}" if test.needed <= split else
                                      f", more than this scale's test split ({split:,}) holds")
    return (f"the estimate favours the claim, not significantly: about {test.needed:,} test images would detect it "
            f"with {stats.POWER:.0%} power{holds}")


def verdicts(catalog: Catalog, path: Path | None = None) -> list[Verdict]:
    """Every claim's verdict at this scale, in the file's order, the p-values Holm-adjusted within each paper (for
    and against separately). A target whose files cannot be vouched for makes its claims untestable, naming the file."""
    loaded = load_file(catalog, path)
    out: list[Verdict] = []
    for claim in loaded["claims"]:
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
            test, numbers, split = _test(catalog, claim, loaded["margin"])
        except _Untestable as exc:
            out.append(Verdict(claim, "untestable here", str(exc)))
        except tables.ReportError as exc:
            out.append(Verdict(claim, "untestable here", f"refused: {exc}"))
        else:
            margin = float(claim["test"].get("margin", loaded["margin"]) or 0.0) \
                if claim["test"]["kind"] == "not_worse" else None
            out.append(Verdict(claim, "", "", test, numbers, split=split, margin=margin))
    for paper in dict.fromkeys(v.claim["paper"] for v in out):
        family = [v for v in out if v.claim["paper"] == paper and v.test is not None]
        for v, p_for, p_against in zip(family, stats.holm([v.test.p_for for v in family]),
                                       stats.holm([v.test.p_against for v in family])):
            v.adjusted, v.family = (p_for, p_against), len(family)
            if p_for < stats.ALPHA:
                v.verdict, v.because = "holds", "significant for the claim after Holm over the paper's claims"
            elif p_against < stats.ALPHA:
                v.verdict, v.because = "fails", "significant against the claim after Holm over the paper's claims"
            else:
                v.verdict, v.because = "inconclusive", _inconclusive(v.test, v.split)
    return out


def _test_spec(claim: dict) -> str:
    test = claim["test"]
    rows = " and ".join(map(str, _names(test["row"])))
    if test["kind"] == "trend":
        return f"trend of {rows} over {', '.join(test['columns'])} on {', '.join(_names(test['target']))}"
    than = " and ".join(map(str, _names(test["than"])))
    extra = f", combine {test['combine']}" if test.get("combine") else ""
    return f"{test['kind'].replace('_', ' ')}: {rows} vs {than} under {', '.join(test['columns'])} on " \
           f"{', '.join(_names(test['target']))}{extra}"


def line(v: Verdict) -> str:
    """One verdict as one plain-text paragraph: the verdict and why, the paper's words, the difference with its
    interval and n in test images, the power figures, the p-values, the measurements."""
    c = v.claim
    head = f"{v.verdict}: {v.because}. {c['paper']}, {c['where']}: “{c['says']}”"
    if v.test is None:
        return head + (f" ({_test_spec(c)})." if c.get("test") else "" if c["says"].endswith(".") else ".")
    t = v.test
    unit = "points of area" if c["test"]["kind"] == "front" else "points"
    text = (f"{head} ({_test_spec(c)}; {t.how}). Difference {t.diff:+.1f} {unit}, 95% interval [{t.lo:+.1f}, "
            f"{t.hi:+.1f}], n = {t.images:,} test images")
    if t.detectable is not None:
        text += f"; the smallest difference detected with {stats.POWER:.0%} power at this n: {t.detectable:.1f} points"
    if v.margin is not None:
        text += f"; margin {v.margin:g} points"
    p_for, p_against = v.adjusted
    text += (f"; one-sided p = {t.p_for:.3g} for, {t.p_against:.3g} against (Holm over the paper's {v.family} "
             f"claims: {p_for:.3g}, {p_against:.3g}). Measured: {v.numbers}"
             + ("." if v.numbers.endswith("%)") else " (%)."))
    return text


def tally(found: list[Verdict]) -> str:
    counts = {v: sum(1 for f in found if f.verdict == v) for v in VERDICTS}
    return (f"{len(found)} claims (config/claims.yaml): {counts['holds']} hold, {counts['fails']} fail, "
            f"{counts['inconclusive']} inconclusive, {counts['untestable here']} untestable here. Each paper's claims "
            f"are one family: Holm's correction keeps the chance of any false “holds” among a paper's claims at "
            f"most {stats.ALPHA:.0%}, and of any false “fails” at most {stats.ALPHA:.0%} (one-sided tests, each "
            f"tail its own family).")


def markdown(found: list[Verdict], scale: str) -> list[str]:
    """The verdicts as Markdown lines: the tally, then one line per claim."""
    out = [f"## The papers' claims at the {scale} scale", "", tally(found), ""]
    out += [f"- {line(v)}" for v in found]
    return out
