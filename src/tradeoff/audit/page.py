"""An audit's page: Markdown and HTML that open with the verdicts, then every check's rule, source and numbers, every
measurement, and one figure (PNG and PDF) of the curves behind the verdicts. From the audit's record alone."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..atomic import atomic_write_text
from ..report.figures import panel_figure, save_figure
from ..report.style import STYLE, axes_legend, palette, plt
from ..report.tables import html_page

MARK = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "skip": "n/a"}


def _head(record: dict) -> tuple[str, str]:
    a = record["attack"]
    title = f"Audit of {record['model']} ({record['scale']} scale)"
    failed = [c["name"] for c in record["checks"] if c["verdict"] == "fail"]
    warned = [c["name"] for c in record["checks"] if c["verdict"] == "warn"]
    step = f", step {a['step_size']:.4g}" if a.get("step_size") is not None else ""
    text = (f"{record['arch']} on {record['dataset']}, {record['examples']} test examples, clean accuracy "
            f"{100 * record['clean_accuracy']:.1f}%. Attack varied by the checks: PGD-{a['steps']} "
            f"({a.get('loss', 'ce')} loss), {a['norm']} eps {a['eps']:.4g}{step}. Verdict: "
            + (f"FAIL ({', '.join(failed)})" if failed else "WARN" if warned else "pass")
            + (f"; warnings: {', '.join(warned)}" if warned and failed else f" ({', '.join(warned)})" if warned else "")
            + f". Audit took {record['seconds']:.1f} s on {record['device']}.")
    return title, text


def markdown(record: dict, figure: str) -> str:
    title, head = _head(record)
    lines = [f"# {title}", "", head, "", "| check | verdict | numbers |", "|---|---|---|"]
    lines += [f"| {c['title']} | **{MARK[c['verdict']]}** | {c['summary']} |" for c in record["checks"]]
    lines += ["", f"![the audit's curves]({figure})", "", "## Checks, their rules and sources", ""]
    lines += [f"- **{c['title']}** ({c['name']}): {c['rule']}. *{c['source']}*" for c in record["checks"] if c["rule"]]
    lines += ["", "## Every measurement", "", "| attack | robust accuracy |", "|---|---|"]
    lines += [f"| {label} | {100 * acc:.1f}% |" for label, acc in record["measurements"].items()]
    return "\n".join(lines) + "\n"


def html_text(record: dict, figure: str) -> str:
    title, head = _head(record)
    rows = "".join(f"<tr><td>{html.escape(c['title'])}</td><td><b>{MARK[c['verdict']]}</b></td>"
                   f"<td>{html.escape(c['summary'])}</td></tr>" for c in record["checks"])
    rules = "".join(f"<li><b>{html.escape(c['title'])}</b> ({c['name']}): {html.escape(c['rule'])}. "
                    f"<i>{html.escape(c['source'])}</i></li>" for c in record["checks"] if c["rule"])
    measured = "".join(f"<tr><td>{html.escape(label)}</td><td>{100 * acc:.1f}%</td></tr>"
                       for label, acc in record["measurements"].items())
    body = (f"<h1>{html.escape(title)}</h1><p>{html.escape(head)}</p><table class='tradeoff'><thead><tr><th>check</th>"
            f"<th>verdict</th><th>numbers</th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p><img src='{html.escape(figure)}' alt='the audit curves' style='max-width: 100%'></p>"
            f"<h2>Checks, their rules and sources</h2><ul>{rules}</ul><h2>Every measurement</h2>"
            f"<table class='tradeoff'><thead><tr><th>attack</th><th>robust accuracy</th></tr></thead>"
            f"<tbody>{measured}</tbody></table>")
    return html_page(title, body)


def _by_name(record: dict) -> dict[str, dict]:
    return {c["name"]: c for c in record["checks"]}


def figure(record: dict):
    """Four panels: accuracy against the attack's steps, against the budget (to the must-fail one), the attacks at
    the budget side by side, and the loss along the gradient and a random direction."""
    checks = _by_name(record)
    with plt.rc_context(STYLE):
        fig, (steps, budget, bars, surface) = panel_figure(4)
        fig.suptitle(_head(record)[0])
        curve = checks["steps"]["numbers"]["curve"]
        steps.plot([c[0] for c in curve], [100 * c[1] for c in curve], "o-", label="1 restart")
        restarts = checks["restarts"]["numbers"]["curve"]
        steps.plot([curve[0][0]], [100 * restarts[1][1]], "s", label=f"{restarts[1][0]} restarts")
        steps.set(xscale="log", xlabel="PGD steps", ylabel="robust accuracy (%)", title="iterations", ylim=(-3, 103))
        steps.set_xticks([c[0] for c in curve], [str(c[0]) for c in curve])
        steps.minorticks_off()
        axes_legend(steps)
        eps = checks["eps"]["numbers"]
        budget.plot([c[0] for c in eps["curve"]], [100 * c[1] for c in eps["curve"]], "o-")
        budget.axvline(eps["must_fail_eps"], color="grey", ls=":", label="must-fail budget")
        budget.axhline(100 * eps["grey_bound"], color="grey", ls="--", label="mid-grey image's bound")
        budget.set(xlabel=f"eps ({record['attack']['norm']})", ylabel="robust accuracy (%)", title="budget",
                   ylim=(-3, 103))
        axes_legend(budget)
        shown = {"clean": record["clean_accuracy"]}
        shown.update({k.upper(): v for k, v in checks["losses"]["numbers"].get("accuracies", {}).items()})
        for name in ("black-box", "transfer"):
            if checks[name]["verdict"] != "skip":
                shown["Square" if name == "black-box" else "transfer"] = checks[name]["numbers"]["accuracy"]
                shown["white box"] = checks[name]["numbers"]["white_box"]
        bars.bar(range(len(shown)), [100 * v for v in shown.values()], color=palette(len(shown)))
        bars.set_xticks(range(len(shown)), list(shown), rotation=30, ha="right")
        bars.set(ylabel="accuracy (%)", title=f"attacks at eps {record['attack']['eps']:.4g}",
                 ylim=(0, 103))
        trace = checks["surface"]["numbers"]
        for i, (g, r) in enumerate(zip(trace.get("traces", {}).get("gradient", []),
                                       trace.get("traces", {}).get("random", []))):
            colour = palette(max(len(trace["traces"]["gradient"]), 1))[i]
            surface.plot(trace["t"], g, "-", color=colour, label="gradient" if i == 0 else None)
            surface.plot(trace["t"], r, "--", color=colour, label="random" if i == 0 else None)
        surface.set(xlabel="step along the direction", ylabel="cross-entropy loss", title="loss surface")
        axes_legend(surface)
    return fig


def write_page(record: dict, paths: dict[str, Path]) -> dict[str, Path]:
    """The record (JSON), the page (Markdown, HTML) and its figure (PNG, PDF) at ``paths`` (Layout.audit)."""
    fig = figure(record)
    try:
        save_figure(fig, {"png": paths["png"], "pdf": paths["pdf"]})
    finally:
        plt.close(fig)
    atomic_write_text(paths["json"], json.dumps(record, indent=1) + "\n")
    atomic_write_text(paths["md"], markdown(record, paths["png"].name))
    atomic_write_text(paths["html"], html_text(record, paths["png"].name))
    return paths
