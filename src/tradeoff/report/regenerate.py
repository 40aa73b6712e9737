"""Regenerating reports from the results files (``tradeoff report``): the targets named (or every one), and with
``--all`` the claims' forest plot and the summary page with its tidy file of every cell.

Each job is content-addressed (:func:`tradeoff.report.build.fresh`): one whose inputs and code are unchanged and
whose outputs are intact is skipped, so a second run with nothing changed does no work. The jobs that remain run on
``jobs`` processes (forked after the catalog and the drawing libraries are loaded, so none of them pays the start-up
again): each target's files, the claims' verdicts (and their plot), and for the summary each table's status and its
lines of the tidy file, from the very table the target's files were rendered from; the summary page is written last,
from what they returned. A target that cannot be vouched for stops the run with its one line (ReportError), as in
one process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tradeoff.config import Catalog
from tradeoff.report import build, cells, claims, summary

_CATALOG: Catalog | None = None  # the catalog of the run, inherited by the forked workers


@dataclass
class Done:
    """What a job returns to the run: the files it wrote (none when skipped) and, for the summary, what it read."""

    name: str
    paths: list[Path] = field(default_factory=list)
    skipped: bool = False
    status: dict | None = None          # the target's status on the summary
    lines: list[dict] | None = None     # its tables' lines of the tidy file
    found: list | None = None           # the claims' verdicts


def _target(name: str, stale: bool, digest: str, for_summary: bool) -> Done:
    catalog = _CATALOG
    outputs = build.target_outputs(catalog, name)
    done = Done(name, skipped=not stale)
    read: dict = {}
    if stale:
        done.paths = build.build_target(catalog, name, read)
        build.record(catalog, name, outputs, digest)
    if for_summary and catalog.targets[name].kind == "table":
        done.status, table = summary.target_status(catalog, name, keep=True, table=read.get(name))
        done.lines = cells.table_cells(catalog, table) if table is not None else []
    return done


def _claims(stale: bool, digest: str) -> Done:
    from tradeoff.report.forest import build_claims_figure  # matplotlib: only where something is drawn

    catalog = _CATALOG
    done = Done(build.CLAIMS, skipped=not stale, found=claims.verdicts(catalog))
    if stale:
        outputs = list(catalog.layout.claims_figure().values())
        done.paths = list(build_claims_figure(catalog, done.found).values())
        build.record(catalog, build.CLAIMS, outputs, digest)
    return done


def default_jobs() -> int:
    """The processors this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


def regenerate(catalog: Catalog, names: list[str], *, everything: bool = False, claims_figure: bool = False,
               force: bool = False, jobs: int = 1) -> list[Done]:
    """Build ``names`` (with ``claims_figure`` the claims' forest plot; with ``everything`` that plot and the summary
    page too), skipping what is fresh unless ``force``, on ``jobs`` processes. Returns each job's Done, in that
    order."""
    global _CATALOG
    _CATALOG = catalog
    summary_outputs = list(catalog.layout.summary().values())
    digests, stale, done = {}, {}, {}
    jobs_of = ([build.CLAIMS] if everything or claims_figure else []) + ([build.SUMMARY] if everything else [])
    for key in jobs_of:
        outputs = summary_outputs if key == build.SUMMARY else list(catalog.layout.claims_figure().values())
        digests[key] = build.digest(catalog, key)
        stale[key] = force or not build.fresh(catalog, key, outputs, digests[key])
    page = everything and stale[build.SUMMARY]
    # in waves: a group after the members it lists (its digest reads what they wrote, and its page is never older
    # than theirs, or Snakemake would make it again)
    waves: dict[int, list[str]] = {}
    for name in names:
        waves.setdefault(depth(catalog, name), []).append(name)
    for level in sorted(waves) or [0]:
        wave = waves.get(level, [])
        for name in wave:
            digests[name] = build.digest(catalog, name)
            stale[name] = force or not build.fresh(catalog, name, build.target_outputs(catalog, name), digests[name])
        tasks = []  # (function, arguments), the longest first
        if level == min(waves, default=0) and build.CLAIMS in jobs_of and (stale[build.CLAIMS] or page):
            tasks.append((_claims, (stale[build.CLAIMS], digests[build.CLAIMS])))
        tasks += [(_target, (name, stale[name], digests[name], page)) for name in wave
                  if stale[name] or (page and catalog.targets[name].kind == "table")]
        if any(function is _claims or catalog.targets[arguments[0]].kind == "figure" for function, arguments in tasks):
            import tradeoff.report.figures  # noqa: F401  (matplotlib loaded once, before the workers fork)
        gc.freeze()  # what is loaded stays: the collections that statsmodels forces then walk only what a job makes
        done.update({d.name: d for d in _run(tasks, jobs)})
    out = [done.get(name) or Done(name, skipped=True) for name in names]
    if build.CLAIMS in jobs_of:
        out.append(done.get(build.CLAIMS) or Done(build.CLAIMS, skipped=True))
    if everything and page:
        statuses = {name: done[name].status if name in done and done[name].status is not None
                    else summary.target_status(catalog, name) for name in catalog.targets}
        lines = [line for name in catalog.targets if name in done for line in done[name].lines or []]
        paths = summary.build_summary(catalog, statuses=statuses, lines=lines, found=done[build.CLAIMS].found)
        build.record(catalog, build.SUMMARY, summary_outputs, digests[build.SUMMARY])
        out.append(Done(build.SUMMARY, list(paths.values())))
    elif everything:
        out.append(Done(build.SUMMARY, skipped=True))
    return out


def depth(catalog: Catalog, name: str) -> int:
    """0 for a table or figure, 1 + its deepest member's for a group."""
    members = catalog.targets[name].targets if catalog.targets[name].kind == "group" else ()
    return 1 + max((depth(catalog, m) for m in members), default=0) if members else 0


def _run(tasks: list, jobs: int) -> list[Done]:
    """Run the tasks in this process (one job, or one task) or on ``jobs`` forked workers; the first error raised
    stops the run (the tasks not started are cancelled) and is raised here."""
    if jobs <= 1 or len(tasks) <= 1:
        return [function(*arguments) for function, arguments in tasks]
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)),
                             mp_context=multiprocessing.get_context("fork")) as pool:
        futures: list[Future] = [pool.submit(function, *arguments) for function, arguments in tasks]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f in finished and f.exception() is not None), None)
        if failed is not None:
            for f in futures:
                f.cancel()
            raise failed.exception()
        return [f.result() for f in futures]
