"""The GPU node check's report (:mod:`tradeoff.pipeline.bench.gpucheck`): whether it passed (``passed``: something
measured, every comparison within its tolerance, nothing missing, no section failed), its verdict in words
(``verdict``: the report's first line and the console's say the same), the Markdown of every section
(``format_report``), and the JSON and Markdown files, each written atomically (``write_report``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tradeoff.pipeline.bench.check_imports import missing
from tradeoff.pipeline.bench.check_rehearsal import REHEARSAL, REHEARSAL_TARGET
from tradeoff.storage.atomic import atomic_write_text


def measured(report: dict) -> bool:
    """Whether any section measured something: a step compared, a bench timed, an attack timed, a run trained in
    both precisions, a rehearsal's epochs. A check whose every section ran out of time, was skipped or failed
    measured nothing, and is no pass."""
    return bool(report["methods"] or report["bench_train"] or (report["bench_eval"] or {}).get("attacks")
                or (report["bf16_against_fp32"] or {}).get("attacks") or (report["rehearsal"] or {}).get("methods"))


def verdict(report: dict) -> str:
    """The check's verdict in words: the report's first line and the console's say the same."""
    if not measured(report):
        said = "NOTHING MEASURED: every section ran out of time, was skipped or failed"
    elif report["ok"]:
        said = "no step comparison finished" if not report["methods"] else "every comparison within its tolerance"
    else:
        said = "NOT OK: a comparison out of its tolerance, a package missing, a section failed or the check stopped"
    short = [k for k, row in (report.get("sections") or {}).items() if row["status"] != "done"]
    return said + (f"; sections not done: {', '.join(short)} (see Sections)" if short else "")


def passed(report: dict) -> bool:
    """Something measured, every comparison within its tolerance, nothing missing, no section failed, the rehearsal
    passed."""
    if not measured(report):
        return False
    methods = report["methods"]
    ok = all(row[key]["ok"] for row in methods.values()
             for key in ("gpu_vs_cpu", "bf16_vs_fp32", "parallel_vs_serial") if key in row)
    imported = report.get("imports") or {}
    ok = ok and not missing(imported) and imported.get("torch_ok", True)
    ok = ok and "error" not in report["rehearsal"] and not report.get("terminated")
    return ok and not any(row["status"] == "error" for row in report["sections"].values())


def device_slug(device: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:60]


def _f(value: Any, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def format_report(report: dict) -> str:
    budget = f", budget {report['budget_s']:.0f} s" if report.get("budget_s") else ""
    lines = [f"# gpu-check on {report['device']}", "",
             f"Scale {report['scale']}{' (--cpu-only: the CPU against itself)' if report['cpu_only'] else ''}; "
             f"{verdict(report)}; {report['seconds']:.0f} s{budget}.", ""]
    lines += _section_lines(report.get("sections") or {}) + _import_lines(report.get("imports") or {})
    lines += ["", "## a. One training step per method", "",
              "Tolerances: " + "; ".join(f"{k}: |loss diff| <= {t['rel']:g} x loss + {t['abs']:g}, update cosine >= "
                                         f"{t['cosine']:g}, norms within {t['norm_rel']:g}"
                                         for k, t in report["tolerances"].items()), "",
              "| method | run | GPU vs CPU (loss diff, cosine) | bf16 vs fp32 (loss diff, cosine) | syncs/step | ok |",
              "|---|---|---|---|---:|---|"]
    for name, row in report["methods"].items():
        a, b = row["gpu_vs_cpu"], row["bf16_vs_fp32"]
        ok = a["ok"] and b["ok"] and row.get("parallel_vs_serial", {"ok": True})["ok"]
        lines.append(f"| {name} | {row['run']} | {_f(a['loss_diff'])}, {_f(a['cosine'], '.6f')} | "
                     f"{_f(b['loss_diff'])}, {_f(b['cosine'], '.4f')} | {_f(row['syncs_per_step'], 'd')} | "
                     f"{'yes' if ok else 'NO'} |")
    gen = report["methods"].get("generalist", {}).get("parallel_vs_serial")
    if gen:
        lines += ["", f"Generalist parallel (CUDA streams: {gen['streams']}) vs serial: loss diff {_f(gen['loss_diff'])}, "
                      f"cosine {_f(gen['cosine'], '.7f')}; a step {_f(gen['parallel_step_s'] * 1e3, '.1f')} ms vs "
                      f"{_f(gen['serial_step_s'] * 1e3, '.1f')} ms serial"]
    lines += ["", "## b. bench-train against the plan (the config's runtime settings; of peak: of the precision's "
                  "own peak; planned: `tradeoff plan`'s formula at its assumed fraction of peak)", "",
              "| job | precision | batch | steps (halves differ) | images/s | s/epoch | planned s/epoch | "
              "measured / planned | TFLOP/s | of peak |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["bench_train"]:
        layout = ", channels_last" if r["channels_last"] else ""
        lines.append(f"| {r['label']} ({r['run']}) | {r['precision']}{layout} | {r['batch_size']} | "
                     f"{r.get('steps', '-')} ({_f(r.get('halves_differ'), '.1%')}) | {r['images_per_s']:.0f} | {r['seconds_per_epoch']:.1f} | "
                     f"{_f(r.get('planned_s_per_epoch'), '.1f')} | {_f(r.get('measured_over_planned'), '.2f')} | "
                     f"{r['achieved_tflops']:.1f} | {_f(r['fraction_of_peak'], '.1%')} |")
    cal = report.get("recalibrated") or {}
    if cal:
        lines += ["", f"The plan's constant recalibrated: achieved fraction of peak {_f(cal['measured_fraction'], '.1%')} "
                      f"measured ({cal['benches']} bench(es)) against {cal['assumed_fraction']:.0%} assumed; "
                      f"{cal['how']}."]
    ev = report["bench_eval"]
    lines += ["", f"## c. bench-eval: {ev.get('run', '-')} on up to {ev.get('images', '-')} images, "
                  f"{ev.get('model', '-')}", "",
              "| attack | images | seconds | images/s | minutes per 10,000 |", "|---|---:|---:|---:|---:|"]
    for name, r in (ev.get("attacks") or {}).items():
        lines.append(f"| {name} ({r['type']}) | {r.get('images', ev.get('images'))} | {r['seconds']:.1f} | "
                     f"{r['images_per_s']:.0f} | {r['minutes_per_10k']:.1f} |")
    lines += ["", "## Targets (docs/gpu.md; judged on an H100 only)", "", "| target | goal | measured | met | how |",
              "|---|---:|---:|---|---|"]
    for name, t in report["targets"].items():
        met = "-" if t["met"] is None else ("yes" if t["met"] else "no")
        lines.append(f"| {name} | <= {t['target']:g} | {_f(t['measured'], '.3g')} | {met} | {t['how']} |")
    lines += _precision_lines(report["bf16_against_fp32"]) + _rehearsal_lines(report["rehearsal"])
    return "\n".join(lines) + "\n"


def _section_lines(sections: dict) -> list[str]:
    if not sections:
        return []
    lines = ["## Sections (by value; each with its share of the budget and what earlier ones left)", "",
             "| section | status | seconds | allowed (s) | note |", "|---|---|---:|---:|---|"]
    for key, row in sections.items():
        note = str(row.get("note", "")).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {key}. {row['title']} | {row['status']} | {_f(row.get('seconds'), '.1f')} | "
                     f"{_f(row.get('allowance_s'), '.0f')} | {note} |")
    return lines + [""]


def _import_lines(found: dict) -> list[str]:
    if not found:
        return []
    lines = [f"Python {found['python']}, PyTorch {found['torch']} (at least {found['min_torch']}: "
             f"{'yes' if found['torch_ok'] else 'NO'}), CUDA {found['cuda'] or '-'}, cuDNN {found['cudnn'] or '-'}; "
             f"CUDA devices: {', '.join(found['devices']) or 'none'}.", "",
             "| package | for | version |", "|---|---|---|"]
    for module, row in {**found["modules"], **found["optional"]}.items():
        lines.append(f"| {module} | {row['for']} | {row.get('version') or 'MISSING: ' + row['missing']} |")
    return lines


def _rehearsal_lines(r: dict) -> list[str]:
    lines = ["", f"## e. {REHEARSAL_TARGET} rehearsal at paper shape (Snakemake, {REHEARSAL})", ""]
    if not r:
        return lines + ["Not run (see Sections)."]
    if "skipped" in r:
        return lines + [f"Skipped: {r['skipped']}."]
    lines.append(f"`{r['command']}`: exit {r['returncode']} after {r['seconds']:.0f} s, {r['test_examples']} test "
                 "images, the paper's batch sizes, attacks uncapped.")
    if "error" in r:
        return lines + ["", "```", r["error"], "```"]
    lines += ["", f"Planned on {r['plan_device']} in {r['plan_precision']} ({r['plan_basis']}).", "",
              "| method | run | epochs | batch | measured s/epoch | planned s/epoch | measured / planned |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for m in r["methods"]:
        lines.append(f"| {m['method']} | {m['run']} | {m['epochs']} | {m['batch_size']} | "
                     f"{_f(m['measured_s_per_epoch'], '.2f')} | {_f(m['planned_s_per_epoch'], '.2f')} | "
                     f"{_f(m['measured_over_planned'], '.2f')} |")
    return lines


def _precision_lines(p: dict) -> list[str]:
    lines = ["", "## d. bf16 against fp32 (the same run and seed, trained twice)", ""]
    if not p:
        return lines + ["Not run (see Sections)."]
    if "skipped" in p:
        return lines + [f"Skipped: {p['skipped']}."]
    lines += [f"`{p['run']}` at the {p['scale']} scale, seed {p['seed']}, on {p['examples']} test images; exact "
              "McNemar test of the two models' per-example outcomes.",
              "", "| attack | fp32 | bf16 | p (exact McNemar) |", "|---|---:|---:|---:|"]
    for name in p["attacks"]:
        lines.append(f"| {name} | {100 * p['fp32'][name]:.1f}% | {100 * p['bf16'][name]:.1f}% | "
                     f"{p['p_value'][name]:.3g} |")
    return lines


def write_report(report: dict, paths: tuple[Path, Path]) -> tuple[Path, Path]:
    """The report as JSON and Markdown, each written atomically (a kill mid-write leaves the previous one)."""
    json_path, md_path = paths
    json_path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(json.dumps(report, default=lambda o: None))  # drops the steps' tensors and methods
    atomic_write_text(json_path, json.dumps(data, indent=1) + "\n")
    atomic_write_text(md_path, format_report(report))
    return json_path, md_path
