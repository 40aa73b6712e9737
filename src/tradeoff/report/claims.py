"""The papers' claims, checked at the scale that ran: ``config/claims.yaml`` (beside the config, like ``reference/``).

Each claim quotes the paper's words, says where they stand, and names the test that decides it on our measurements
(metrics and predictions files only, vouched for as a table's; :mod:`tradeoff.report.tables`):

- ``better``: row ``row`` is more accurate than row ``than`` of a table (or figure) under ``columns`` (one column,
  or several pooled: a claim over budgets or attacks). One-sided exact McNemar test on the paired per-example
  predictions (the discordant examples of every column pooled); ``holds`` at p < 0.05, ``fails`` when the opposite
  one-sided test is significant (or, pooled over columns, when any column is significantly reversed), else
  ``inconclusive``, with the number of test examples that the observed discordance would need to decide it.
- ``not_worse``: row ``row`` keeps the accuracy of row ``than`` ("maintaining robustness"): ``fails`` when it is
  significantly lower (one-sided exact McNemar), ``holds`` when it is not and the point estimate is at least as
  high, else ``inconclusive`` (no non-inferiority margin is tested: the paper states none).
- ``trend``: row ``row``'s accuracy falls as the budget grows over ``columns`` (in order): ``holds`` when every step
  is a decrease or a tie and the first-to-last decrease is significant (one-sided exact McNemar), ``fails`` when a
  step is a significant increase, else ``inconclusive``.
- ``front``: in a figure's SA–robust plane (``columns``: [clean, robust]), the points of series ``row`` dominate
  those of ``than``: ``holds`` when every Pareto point of ``than`` is weakly dominated by a point of ``row`` and not
  the reverse, ``fails`` when the reverse holds, else ``inconclusive`` (the fronts cross). Point estimates: a front
  has no paired test.

A claim whose rows are one training job at this scale, or whose measurements are missing, is ``inconclusive`` and
says why. The verdicts open ``summary.md`` (:mod:`tradeoff.report.summary`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..config import Catalog, load_yaml
from ..errors import ConfigError
from . import stats, tables

KINDS = ("better", "not_worse", "trend", "front")
VERDICTS = ("holds", "fails", "inconclusive")
KEYS = {"id", "paper", "where", "says", "test"}
TEST_KEYS = {"kind", "target", "columns", "row", "than"}


@dataclass
class Verdict:
    claim: dict
    verdict: str          # holds | fails | inconclusive
    because: str          # the numbers behind it


def claims_file(catalog: Catalog) -> Path:
    return Path(catalog.reference_dir).parent / "claims.yaml"


def load_claims(catalog: Catalog, path: Path | None = None) -> list[dict]:
    """The claims, checked against the catalog: every key known, every target, row and column one of the target's.
    ConfigError naming the claim and the key."""
    path = path or claims_file(catalog)
    if not path.exists():
        return []
    data = load_yaml(path) or {}
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ConfigError(f"{path}: expected `claims:`, a list of claims")
    seen = set()
    for i, claim in enumerate(claims):
        where = f"{path.name}: claims[{i}]"
        if not isinstance(claim, dict) or set(claim) != KEYS:
            raise ConfigError(f"{where}: a claim has exactly the keys {sorted(KEYS)}; got "
                              f"{sorted(claim) if isinstance(claim, dict) else claim!r}")
        where = f"{path.name}: claim {claim['id']}"
        if claim["id"] in seen:
            raise ConfigError(f"{where}: the id repeats")
        seen.add(claim["id"])
        test = claim["test"]
        if not isinstance(test, dict) or set(test) != TEST_KEYS:
            raise ConfigError(f"{where}.test: expected exactly the keys {sorted(TEST_KEYS)}")
        if test["kind"] not in KINDS:
            raise ConfigError(f"{where}.test.kind: unknown kind {test['kind']!r}; allowed: {list(KINDS)}")
        if not isinstance(test["columns"], list) or not test["columns"]:
            raise ConfigError(f"{where}.test.columns: a non-empty list of the target's columns")
    return claims


def missing(catalog: Catalog, test: dict) -> str | None:
    """What a claim's test names that this configuration lacks (an overlay may replace a target's rows or
    columns), or None: such a claim cannot be tested here, and its verdict says why (a typo shows there too)."""
    target = catalog.targets.get(test["target"])
    if target is None or target["kind"] == "group":
        return f"no table or figure {test['target']!r} in this configuration"
    absent = [c for c in test["columns"] if c not in target["columns"]]
    if absent:
        return f"{test['target']} has no column {', '.join(map(repr, absent))} here; its columns: {list(target['columns'])}"
    names = {row.get("series") for row in target["rows"]} if test["kind"] == "front" else \
        {row["key"] for row in target["rows"]}
    for key in ("row", "than"):
        if test[key] not in names and not (test["kind"] == "trend" and key == "than" and test[key] is None):
            return (f"{test[key]!r} is not a {'series' if test['kind'] == 'front' else 'row'} of {test['target']} "
                    f"here; its {'series' if test['kind'] == 'front' else 'rows'}: {sorted(n for n in names if n)}")
    return None


def examples_needed(only_row: int, only_than: int, examples: int) -> int | None:
    """Test examples that a one-sided exact McNemar test would need to reach p < ALPHA if the discordant examples
    kept their observed rate and split, or None when the split does not favour the row."""
    from scipy.stats import binomtest

    discordant = only_row + only_than
    if discordant == 0 or only_row <= only_than:
        return None
    share, rate = only_row / discordant, discordant / examples
    m = discordant
    while m < 10**7:
        if binomtest(math.ceil(share * m), m, 0.5, alternative="greater").pvalue < stats.ALPHA:
            return math.ceil(m / rate)
        m = math.ceil(m * 1.25)
    return None


def _cells(catalog: Catalog, test: dict) -> tuple[dict, dict, dict] | str:
    """(row key -> run, column -> attack, row key -> label) of a claim's target, or why it cannot be tested."""
    target = catalog.targets[test["target"]]
    runs = {row["key"]: row["run"] for row in target["rows"]}
    return runs, {c: target["columns"][c] for c in test["columns"]}, \
        {row["key"]: row.get("label") or row["key"] for row in target["rows"]}


def _pair(catalog: Catalog, run_a: str, run_b: str, attack: str) -> tuple[tables.Ours, tables.Ours]:
    return tables.measure(catalog, run_a, attack), tables.measure(catalog, run_b, attack)


def _same_job(catalog: Catalog, a: str, b: str) -> bool:
    return [catalog.train_id[r] for r in catalog.row_runs(a)] == [catalog.train_id[r] for r in catalog.row_runs(b)]


def _paired(catalog: Catalog, test: dict) -> tuple[list, list[str]] | Verdict | str:
    runs, columns, _ = _cells(catalog, test)
    a, b = runs[test["row"]], runs[test["than"]]
    if _same_job(catalog, a, b):
        return f"{test['row']} and {test['than']} are one training job at this scale: one model, nothing to compare"
    pairs, texts = [], []
    for column, attack in columns.items():
        for job in catalog.column_jobs(attack):
            x, y = _pair(catalog, a, b, job)
            if x.value is None or y.value is None or not x.bits or not y.bits:
                return f"{job} not measured (yet) for both rows"
            pairs.append((column, job, x, y))
            texts.append(f"{job}: {x.value:.1f} vs {y.value:.1f}")
    return pairs, texts


def _better(catalog: Catalog, claim: dict) -> Verdict:
    test = claim["test"]
    found = _paired(catalog, test)
    if isinstance(found, str):
        return Verdict(claim, "inconclusive", found)
    pairs, texts = found
    bits = [pair for _, _, x, y in pairs for pair in zip(x.bits, y.bits)]
    p_up = stats.mcnemar_one_sided(bits)
    p_down = stats.mcnemar_one_sided([(b, a) for a, b in bits])
    reversed_columns = [job for _, job, x, y in pairs
                        if stats.mcnemar_one_sided(list(zip(y.bits, x.bits))) < stats.ALPHA]
    only_row, only_than = stats.pooled(bits)
    examples = sum(len(a) for a, _ in bits)
    numbers = (f"{'; '.join(texts)} (%); discordant examples {only_row} for {test['row']}, {only_than} for "
               f"{test['than']} of {examples}; one-sided exact McNemar p = {p_up:.3g}")
    if only_row + only_than == 0:
        return Verdict(claim, "inconclusive", f"{numbers}; no test example separates the two rows")
    if test["kind"] == "better":
        if p_down < stats.ALPHA:
            return Verdict(claim, "fails", f"{numbers}; the opposite is significant, p = {p_down:.3g}")
        if reversed_columns:
            return Verdict(claim, "fails", f"{numbers}; but significantly reversed under {', '.join(reversed_columns)}")
        if p_up < stats.ALPHA:
            return Verdict(claim, "holds", numbers)
    else:  # not_worse
        if p_down < stats.ALPHA:
            return Verdict(claim, "fails", f"{numbers}; significantly lower, p = {p_down:.3g}")
        if only_row >= only_than:
            return Verdict(claim, "holds", f"{numbers}; not lower (no non-inferiority margin tested)")
    needed = examples_needed(only_row, only_than, examples)
    power = (f"; at the observed rates about {needed:,} test examples would decide it" if needed else
             "; the point estimate goes against the claim")
    return Verdict(claim, "inconclusive", f"{numbers}{power}")


def _trend(catalog: Catalog, claim: dict) -> Verdict:
    test = claim["test"]
    runs, columns, _ = _cells(catalog, test)
    run = runs[test["row"]]
    cells = []
    for attack in columns.values():
        for job in catalog.column_jobs(attack):
            o = tables.measure(catalog, run, job)
            if o.value is None or not o.bits:
                return Verdict(claim, "inconclusive", f"{job} not measured (yet)")
            cells.append((job, o))
    text = ", ".join(f"{job} {o.value:.1f}" for job, o in cells) + " (%)"
    rises = [(a[0], b[0]) for a, b in zip(cells, cells[1:])
             if stats.mcnemar_one_sided(list(zip(b[1].bits, a[1].bits))) < stats.ALPHA]
    if rises:
        return Verdict(claim, "fails", f"{text}; significant rise from {rises[0][0]} to {rises[0][1]}")
    p = stats.mcnemar_one_sided(list(zip(cells[0][1].bits, cells[-1][1].bits)))
    monotone = all(b[1].value <= a[1].value for a, b in zip(cells, cells[1:]))
    if monotone and p < stats.ALPHA:
        return Verdict(claim, "holds", f"{text}; first vs last one-sided exact McNemar p = {p:.3g}")
    return Verdict(claim, "inconclusive", f"{text}; first vs last p = {p:.3g}"
                   + ("" if monotone else "; not monotone"))


def _front(catalog: Catalog, claim: dict) -> Verdict:
    test = claim["test"]
    target = catalog.targets[test["target"]]
    clean, robust = (target["columns"][c] for c in test["columns"][:2])
    points: dict[str, list[tuple[float, float]]] = {}
    jobs: dict[str, set] = {}
    for row in target["rows"]:
        series = row.get("series")
        if series not in (test["row"], test["than"]):
            continue
        x, y = tables.read_metric(catalog, row["run"], clean), tables.read_metric(catalog, row["run"], robust)
        if x is None or y is None:
            return Verdict(claim, "inconclusive", f"{row['run']} not measured (yet)")
        points.setdefault(series, []).append((x, y))
        jobs.setdefault(series, set()).add(catalog.train_id[row["run"]])
    a, b = points.get(test["row"], []), points.get(test["than"], [])
    if not a or not b:
        return Verdict(claim, "inconclusive", "a series has no point")
    if jobs[test["row"]] == jobs[test["than"]]:
        return Verdict(claim, "inconclusive", "both series are the same training jobs at this scale")

    def pareto(pts):
        return [p for p in pts if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in pts)]

    def covered(front, by):
        return all(any(q[0] >= p[0] and q[1] >= p[1] for q in by) for p in front)

    fa, fb = pareto(a), pareto(b)
    text = (f"{test['row']} front {', '.join(f'({x:.1f}, {y:.1f})' for x, y in sorted(fa))}; {test['than']} front "
            f"{', '.join(f'({x:.1f}, {y:.1f})' for x, y in sorted(fb))} (clean, robust %; point estimates, no test)")
    a_wins, b_wins = covered(fb, a), covered(fa, b)
    if a_wins and not b_wins:
        return Verdict(claim, "holds", text)
    if b_wins and not a_wins:
        return Verdict(claim, "fails", text)
    return Verdict(claim, "inconclusive", text + ("; the fronts cross" if not a_wins else "; the fronts coincide"))


CHECKS = {"better": _better, "not_worse": _better, "trend": _trend, "front": _front}


def verdicts(catalog: Catalog, path: Path | None = None) -> list[Verdict]:
    """Every claim's verdict at this scale, in the file's order. A target whose files cannot be vouched for makes
    its claims inconclusive, naming the file."""
    out = []
    for claim in load_claims(catalog, path):
        lacking = missing(catalog, claim["test"])
        if lacking:
            out.append(Verdict(claim, "inconclusive", f"not testable in this configuration: {lacking}"))
            continue
        try:
            out.append(CHECKS[claim["test"]["kind"]](catalog, claim))
        except tables.ReportError as exc:
            out.append(Verdict(claim, "inconclusive", f"refused: {exc}"))
    return out


def markdown(found: list[Verdict], scale: str) -> list[str]:
    """The verdicts as Markdown lines: a count, then one line per claim (the paper's words, where, the verdict and
    the numbers behind it)."""
    counts = {v: sum(1 for f in found if f.verdict == v) for v in VERDICTS}
    out = [f"## The papers' claims at the {scale} scale", "",
           f"{len(found)} claims (config/claims.yaml): {counts['holds']} hold, {counts['fails']} fail, "
           f"{counts['inconclusive']} inconclusive at this power.", ""]
    for f in found:
        c = f.claim
        out.append(f"- **{f.verdict}** — {c['paper']}, {c['where']}: “{c['says']}” ({c['test']['kind']} on "
                   f"{c['test']['target']}) — {f.because}")
    return out
