"""An audit's page: Markdown and HTML that open with the best known robust accuracy (or, where the masking group fails,
"no trustworthy figure: masking" and the best adaptive figure as an upper bound only) and the three verdicts (masking,
convergence, protocol) and the overall one, then every check with its verdict, numbers and next step, every check's
rule and source, every measurement with its invalid examples and its attack's warnings, and one figure (PNG and PDF)
of the curves behind the verdicts. From the audit's record alone; every measurement's per-example flags are written
beside it (:func:`write_flags`, :func:`read_flags`), from which the headline is re-derived."""

from __future__ import annotations

import base64
import gzip
import html
import json
from pathlib import Path

import numpy as np

from tradeoff.report.figures import panel_figure, save_figure
from tradeoff.report.style import STYLE, axes_legend, palette, plt
from tradeoff.report.table_render import html_page
from tradeoff.storage.atomic import atomic_write_bytes, atomic_write_text
from tradeoff.storage.provenance import write_sidecar

MARK = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "skip": "n/a"}
WORD = {"pass": "pass", "warn": "warn", "fail": "fail", "skip": "n/a"}
EXPLAIN = {"masking": "can the gradients be trusted: gradients, graph, outputs, surface, budget, black box, transfer, "
                      "BPDA probe, randomness, AutoAttack's flags",
           "convergence": "is each reported column's attack strong enough: the columns against the best known worst "
                          "case, the audit's attack against APGD, restarts, other losses, targets, its best iterate",
           "protocol": "the authors' protocol against the strong attack"}


def verdict_lines(record: dict) -> list[str]:
    """``masking: pass``, ``convergence: fail (...)``, ``protocol: n/a``, ``overall: fail (convergence)``."""
    lines = []
    for group, verdict in record["groups"].items():
        bad = [c["name"] for c in record["checks"] if c.get("group") == group and c["verdict"] == verdict
               and verdict in ("warn", "fail")]
        lines.append(f"{group}: {WORD[verdict]}" + (f" ({', '.join(bad)})" if bad else ""))
    lines.append(f"overall: {record['overall']}")
    return lines


def _figure(h: dict) -> str:
    if not h.get("measured", h.get("accuracy") is not None):
        return f"not measured at {h['norm']} eps {h['eps']:.4g}"
    return f"{100 * h['accuracy']:.1f}% at {h['norm']} eps {h['eps']:.4g}"


def headline(record: dict) -> str:
    """The page's first line: the best known robust accuracy per budget (a budget where nothing ran: "not
    measured"); where the masking group fails, "No trustworthy figure: masking" and that figure as an upper bound only
    (Markdown: only the words in bold, never the number)."""
    found = list(record.get("best_known", {}).values())
    if not found:
        return ""
    if record.get("trustworthy", True):
        return ("**Best known robust accuracy (per example, the worst case over every attack measured at the budget: "
                "the audit's and the table's): " + "; ".join(map(_figure, found)) + ".**")
    failed = record.get("masking_failed") or []
    bounds = "; ".join(("at most " + _figure(h)) if h.get("measured", True) else _figure(h) for h in found)
    return (f"**No trustworthy figure: masking** (fails: {', '.join(failed) or 'masking'}). The best adaptive "
            "figure, an upper bound only (per example, the worst case over every attack measured, the adaptive ones "
            f"included: BPDA / straight-through and NES with APGD, EOT with the majority vote): {bounds}.")


def plain_headline(record: dict) -> str:
    """The headline without Markdown (the command's output, the HTML page)."""
    return headline(record).replace("**", "")


def _measurement_rows(record: dict) -> list[tuple[str, str, str, str]]:
    """(attack, robust accuracy, invalid examples, its warnings) of every measurement."""
    invalid, warned = record.get("invalid") or {}, record.get("attack_warnings") or {}
    rows = []
    for label, acc in record["measurements"].items():
        counts = invalid.get(label) or {}
        bad = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v and k != "invalid_examples")
        shown = (f"{counts.get('invalid_examples', 0)}" + (f" ({bad})" if bad else "")) if counts else "-"
        rows.append((label, f"{100 * acc:.1f}%", shown, "; ".join(warned.get(label, [])) or "-"))
    for label, error in (record.get("errors") or {}).items():
        rows.append((label, "not measured", "-", f"could not run: {error}"))
    return rows


def _head(record: dict) -> tuple[str, str]:
    a = record["attack"]
    title = f"Audit of {record['model']} ({record['scale']} scale)"
    step = f", step {a['step_size']:.4g}" if a.get("step_size") is not None else ""
    text = (f"{record['arch']} on {record['dataset']}, {record['examples']} test examples, clean accuracy "
            f"{100 * record['clean_accuracy']:.1f}%. Attack varied by the checks: PGD-{a['steps']} "
            f"({a.get('loss', 'ce')} loss), {a['norm']} eps {a['eps']:.4g}{step}. Audit ran on "
            f"{record['device']}.")
    return title, text


def markdown(record: dict, figure: str) -> str:
    title, head = _head(record)
    lines = [f"# {title}", "", headline(record), ""]
    lines += [f"- **{line}**" for line in verdict_lines(record)]
    lines += ["", head, "", "| group | check | verdict | numbers | next step |", "|---|---|---|---|---|"]
    lines += [f"| {c.get('group', '')} | {c['title']} | **{MARK[c['verdict']]}** | {c['summary']} | "
              f"{c.get('next', '')} |" for c in record["checks"]]
    lines += ["", f"![the audit's curves]({figure})", "", "## The groups", ""]
    lines += [f"- **{g}**: {EXPLAIN[g]}" for g in record["groups"]]
    lines += ["", "## Checks, their rules and sources", ""]
    lines += [f"- **{c['title']}** ({c['name']}): {c['rule']}. *{c['source']}*" for c in record["checks"] if c["rule"]]
    lines += ["", "## Every measurement", "", "Invalid examples (non-finite, outside the eps-ball or outside [0, 1]) "
              "count as not broken; non-finite logits on a valid one count as broken. Per-example flags: "
              f"`{record.get('flags_file', '')}`.", "",
              "| attack | robust accuracy | invalid examples | the attack's warnings |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in _measurement_rows(record)]
    return "\n".join(lines) + "\n"


def html_text(record: dict, figure: str) -> str:
    title, head = _head(record)
    rows = "".join(f"<tr><td>{html.escape(c.get('group', ''))}</td><td>{html.escape(c['title'])}</td>"
                   f"<td><b>{MARK[c['verdict']]}</b></td><td>{html.escape(c['summary'])}</td>"
                   f"<td>{html.escape(c.get('next', ''))}</td></tr>" for c in record["checks"])
    rules = "".join(f"<li><b>{html.escape(c['title'])}</b> ({c['name']}): {html.escape(c['rule'])}. "
                    f"<i>{html.escape(c['source'])}</i></li>" for c in record["checks"] if c["rule"])
    measured = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                       for row in _measurement_rows(record))
    verdicts = "".join(f"<li><b>{html.escape(line)}</b></li>" for line in verdict_lines(record))
    groups = "".join(f"<li><b>{g}</b>: {html.escape(EXPLAIN[g])}</li>" for g in record["groups"])
    first = headline(record)
    lead, _, rest = first.partition("**")[2].partition("**") if first.startswith("**") else ("", "", first)
    body = (f"<h1>{html.escape(title)}</h1><p><b>{html.escape(lead)}</b>{html.escape(rest)}</p><ul>{verdicts}</ul>"
            f"<p>{html.escape(head)}</p><table class='tradeoff'><thead><tr><th>group</th><th>check</th>"
            f"<th>verdict</th><th>numbers</th><th>next step</th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p><img src='{html.escape(figure)}' alt='the audit curves' style='max-width: 100%'></p>"
            f"<h2>The groups</h2><ul>{groups}</ul>"
            f"<h2>Checks, their rules and sources</h2><ul>{rules}</ul><h2>Every measurement</h2>"
            f"<table class='tradeoff'><thead><tr><th>attack</th><th>robust accuracy</th><th>invalid examples</th>"
            f"<th>the attack's warnings</th></tr></thead>"
            f"<tbody>{measured}</tbody></table>")
    return html_page(title, body)


def _by_name(record: dict) -> dict[str, dict]:
    return {c["name"]: c for c in record["checks"]}


def _empty(ax, text: str) -> None:
    """A panel with nothing to show says why."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")


def _why(check: dict) -> str:
    """Why a check that needs gradients shows nothing, in a few words."""
    if "graph is broken" in check["summary"]:
        return "n/a:\nthe model's graph is broken"
    if "unusable" in check["summary"]:
        return "n/a:\nthe input gradients\nare unusable"
    return "n/a"


def _attacks_panel(bars, record: dict, checks: dict) -> None:
    """The figure's panel of the attacks at the budget side by side (and the best known figure)."""
    a = record["attack"]
    shown = {"clean": record["clean_accuracy"]}
    shown.update({k.upper(): v for k, v in checks["losses"]["numbers"].get("accuracies", {}).items()})
    aa = (checks.get("autoattack") or {}).get("numbers", {}).get("accuracies", {})
    if "AutoAttack" in aa:
        shown["AutoAttack"] = aa["AutoAttack"]
    for name, key in (("targeted", "multi-targeted"), ("black-box", "Square"), ("transfer", "transfer"),
                      ("random", "random"), ("decision", "RayS"), ("bpda", "adaptive")):
        if name in checks and "accuracy" in checks[name]["numbers"]:
            shown[key] = checks[name]["numbers"]["accuracy"]
    best = next(iter(record.get("best_known", {}).values()), None)
    if best is not None and best.get("accuracy") is not None:
        shown["best known" if record.get("trustworthy", True) else "upper bound"] = best["accuracy"]
    bars.bar(range(len(shown)), [100 * v for v in shown.values()], color=palette(len(shown)))
    bars.set_xticks(range(len(shown)), list(shown), rotation=45, ha="right", fontsize="small")
    bars.set(ylabel="accuracy (%)", title=f"attacks at eps {a['eps']:.4g}", ylim=(0, 103))


def _columns_panel(cols, record: dict) -> None:
    """The figure's panel of the reported columns, each beside its best known robust accuracy."""
    reported = [c for c in record["checks"] if c["name"].startswith("column ")]
    if reported:
        cols.barh(range(len(reported)), [100 * c["numbers"]["accuracy"] for c in reported],
                  color=[{"pass": "#4c72b0", "warn": "#dd8452", "fail": "#c44e52"}.get(c["verdict"], "grey")
                         for c in reported])
        cols.set_yticks(range(len(reported)), [c["numbers"]["column"] for c in reported])
        cols.invert_yaxis()
        for i, c in enumerate(reported):
            cols.plot([100 * c["numbers"]["best_known"]] * 2, [i - 0.4, i + 0.4], color="black")
    cols.set(xlabel="robust accuracy (%)", title="columns; black: best known", xlim=(0, 103))
    if not reported:
        _empty(cols, "no reported column\n(no table shows this\nmodel, or none measured)")


def figure(record: dict):
    """Five panels: accuracy against iterations (PGD, APGD) and restarts, against the budget (to the whole-range
    one), the attacks at the budget side by side, the loss along the gradient and a random direction, and the loss
    along PGD's steps (the kept trace)."""
    checks = _by_name(record)
    with plt.rc_context(STYLE):
        fig, (steps, budget, bars, surface, trace_ax, cols) = panel_figure(6)
        fig.suptitle(_head(record)[0])
        a = record["attack"]
        numbers = checks["steps"]["numbers"] if checks["steps"]["verdict"] != "skip" else {}
        if numbers.get("curve"):
            curve = numbers["curve"]
            steps.plot([c[0] for c in curve], [100 * c[1] for c in curve], "o-", label="APGD-CE")
            steps.plot([a["steps"]], [100 * numbers["pgd"]], "s", label=f"PGD-{a['steps']}")
        restarts = checks["restarts"]["numbers"].get("curve") if checks["restarts"]["verdict"] != "skip" else None
        if restarts:
            steps.plot([a["steps"] * r for r in range(1, len(restarts) + 1)], [100 * r[1] for r in restarts], "^--",
                       label="PGD, restarts (x = steps spent)")
        steps.set(xlabel="iterations", ylabel="robust accuracy (%)", title="iterations", ylim=(-3, 103))
        if numbers.get("curve") or restarts:
            steps.set_xscale("log")
            ticks = sorted({a["steps"], *(c[0] for c in numbers.get("curve", []))})
            steps.set_xticks(ticks, [str(t) for t in ticks])
            steps.minorticks_off()
            axes_legend(steps)
        else:
            _empty(steps, _why(checks["steps"]))
        eps = checks["eps"]["numbers"]
        if eps.get("curve"):
            budget.plot([c[0] for c in eps["curve"]], [100 * c[1] for c in eps["curve"]], "o-")
            budget.axvline(eps["must_fail_eps"], color="grey", ls=":", label="whole range")
            budget.axvline(eps["grey_eps"], color="grey", ls="-.", label="mid-grey budget")
            budget.axhline(100 * eps["grey_bound"], color="grey", ls="--", label="mid-grey bound")
        budget.set(xlabel=f"eps ({a['norm']})", ylabel="robust accuracy (%)", title="budget", ylim=(-3, 103))
        axes_legend(budget)
        _attacks_panel(bars, record, checks)
        trace = checks["surface"]["numbers"]
        for i, (g, r) in enumerate(zip(trace.get("traces", {}).get("gradient", []),
                                       trace.get("traces", {}).get("random", []))):
            colour = palette(max(len(trace["traces"]["gradient"]), 1))[i]
            surface.plot(trace["t"], g, "-", color=colour, label="gradient" if i == 0 else None)
            surface.plot(trace["t"], r, "--", color=colour, label="random" if i == 0 else None)
        surface.set(xlabel="step along the direction", ylabel="cross-entropy loss", title="loss surface")
        if trace.get("traces", {}).get("gradient"):
            axes_legend(surface)
        else:
            _empty(surface, _why(checks["surface"]))
        kept = record.get("loss_trace") or {}
        losses = kept.get("losses") or []
        for i, row in enumerate(losses):
            trace_ax.plot(kept["steps"], row, "-", color=palette(max(len(losses), 1))[i])
        trace_ax.set(xlabel="PGD step", ylabel="cross-entropy loss", title=f"PGD-{a['steps']}'s loss per example")
        if not losses:
            _empty(trace_ax, _why(checks["silent"]))
        _columns_panel(cols, record)
    return fig


FLAGS_FORMAT = "tradeoff-audit-flags/1"


def write_flags(flags: dict[str, str], path: Path) -> None:
    """Every measurement's per-example robust flags ('0'/'1' strings over the audit's examples), compressed: gzip of
    a JSON object whose ``flags`` map each measurement to its bits packed eight to a byte (numpy.packbits, first
    example in the highest bit), base64; ``examples`` says how many bits each holds."""
    n = max((len(f) for f in flags.values()), default=0)
    packed = {label: base64.b64encode(np.packbits(np.frombuffer(f.encode(), dtype=np.uint8) == ord("1"))).decode()
              for label, f in flags.items()}
    text = json.dumps({"format": FLAGS_FORMAT, "examples": n, "flags": packed}, sort_keys=True)
    atomic_write_bytes(path, gzip.compress(text.encode(), mtime=0))


def read_flags(path: Path) -> dict[str, str]:
    """The per-example flags :func:`write_flags` wrote, as '0'/'1' strings."""
    data = json.loads(gzip.decompress(Path(path).read_bytes()))
    n = int(data["examples"])
    return {label: "".join("1" if b else "0" for b in np.unpackbits(
        np.frombuffer(base64.b64decode(packed), dtype=np.uint8))[:n]) for label, packed in data["flags"].items()}


def write_page(record: dict, paths: dict[str, Path]) -> dict[str, Path]:
    """The record (JSON), the page (Markdown, HTML), its figure (PNG, PDF) and, where ``paths`` names it (``flags``)
    and the record holds them (``per_example``), every measurement's per-example flags, at ``paths``
    (Layout.audit)."""
    per_example = record.get("per_example") or {}
    record = {k: v for k, v in record.items() if k != "per_example"}
    if "flags" in paths:
        record["flags_file"] = Path(paths["flags"]).name
        write_flags(per_example, paths["flags"])
    fig = figure(record)
    try:
        save_figure(fig, {"png": paths["png"], "pdf": paths["pdf"]})
    finally:
        plt.close(fig)
    # the record's bytes are what the audit computed; its time goes into the sidecar (tradeoff.storage.provenance)
    atomic_write_text(paths["json"], json.dumps({k: v for k, v in record.items() if k != "seconds"}, indent=1) + "\n")
    write_sidecar(paths["json"], {"seconds": record.get("seconds")})
    atomic_write_text(paths["md"], markdown(record, paths["png"].name))
    atomic_write_text(paths["html"], html_text(record, paths["png"].name))
    return paths
