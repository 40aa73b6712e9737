"""`tradeoff gpu-check` without a GPU: the refusal, the CPU-only run and its report, and the comparison machinery
(a "device" step made to differ is caught)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from helpers import ROOT, workflow_copy

from tradeoff import cli
from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.methods import METHODS
from tradeoff.pipeline.bench import (
    check_benches,
    check_imports,
    check_precision,
    check_rehearsal,
    check_report,
    check_steps,
    gpucheck,
)
from tradeoff.pipeline.costs import JobSizes
from tradeoff.storage.provenance import provenance, write_sidecar

CPU = torch.device("cpu")


def _files(tmp_path) -> list[str]:
    overlay = tmp_path / "paths.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n")
    return [a for f in (ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay)
            for a in ("--config", str(f))]


def test_without_cuda_it_says_so_in_one_line_and_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main([*_files(tmp_path), "gpu-check"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("tradeoff: gpu-check: no CUDA device is visible: run it on a GPU node (`tradeoff gpu-check`), or "
                   "pass --cpu-only to run the parts that work on the CPU")
    assert not (tmp_path / "results" / "smoke" / "bench").exists()


def test_cpu_only_runs_every_part_and_writes_one_report(tmp_path, capsys):
    assert cli.main([*_files(tmp_path), "gpu-check", "--cpu-only", "--images", "32", "--steps", "1",
                     "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml",
                                tmp_path / "paths.yaml"])
    device = check_report.device_slug(provenance(CPU)["device"])
    json_path, md_path = catalog.layout.gpu_check(device)
    assert str(md_path) in out and "every comparison within its tolerance" in out
    report = json.loads(json_path.read_text())
    assert report["cpu_only"] and report["ok"] and report["device"].startswith("cpu")
    assert set(report["methods"]) == {spec.method.name for spec in catalog.training_runs().values()}
    for name, row in report["methods"].items():  # the CPU against itself: exactly equal
        assert row["gpu_vs_cpu"]["loss_diff"] == 0 and row["gpu_vs_cpu"]["cosine"] == pytest.approx(1, abs=1e-12)
        assert row["bf16_vs_fp32"]["ok"] and row["syncs_per_step"] is None  # (CUDA's sync debug mode only)
    assert report["methods"]["generalist"]["parallel_vs_serial"]["ok"]
    assert [(r["run"], r["batch_size"]) for r in report["bench_train"]] == [(r, b) for r, b, _ in
                                                                            check_benches.BENCH_TRAIN]
    assert all(r["images_per_s"] > 0 and r["path"].endswith(".json") for r in report["bench_train"])
    assert set(report["bench_eval"]["attacks"]) == {"pgd20", "aa"} and report["bench_eval"]["images"] == 32
    assert set(report["targets"]) == set(check_benches.TARGETS)
    assert all(t["met"] is None for t in report["targets"].values())  # an H100's targets: not judged on a CPU
    text = md_path.read_text()
    assert text.startswith(f"# gpu-check on {report['device']}") and "| generalist |" in text


def test_the_comparison_catches_a_device_step_that_differs():
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    calls: dict[int, int] = {}

    def step(spec, runtime, **kwargs):  # each method's second step (the "device" fp32 step) is off
        out = check_steps.one_step(spec, runtime, **kwargs)
        calls[id(spec)] = calls.get(id(spec), 0) + 1
        if calls[id(spec)] == 2:
            out = {**out, "update": out["update"] + 1e-3 * torch.randn_like(out["update"])}
        return out

    rows = check_steps.check_methods(catalog, CPU, batch=4, step=step)
    assert rows and all(not row["gpu_vs_cpu"]["ok"] for row in rows.values())
    assert all(row["bf16_vs_fp32"]["cosine"] < 1 for row in rows.values())


def test_compare_and_its_tolerances():
    update = torch.randn(1000, dtype=torch.float64)
    a = {"loss": 2.0, "update": update}
    tol = check_steps.TOLERANCES["gpu_vs_cpu"]
    assert check_steps.compare(a, dict(a), tol)["ok"]
    assert check_steps.compare(a, {"loss": 2.0 + 1e-4, "update": update * (1 + 1e-3)}, tol)["ok"]
    assert not check_steps.compare(a, {"loss": 2.01, "update": update}, tol)["ok"]
    assert not check_steps.compare(a, {"loss": 2.0, "update": -update}, tol)["ok"]
    assert not check_steps.compare(a, {"loss": float("nan"), "update": update}, tol)["ok"]


def test_host_random_gives_a_step_the_same_draws_whatever_the_global_generators():
    """What makes a GPU step comparable with a CPU step: PGD's random start, TRADES' noise, IAT's permutation drawn
    on the host from one seeded generator, not from the device's generator."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    for run in ("cifar10-resnet18-at-beta1", "cifar10-resnet18-trades-lambda6", "cifar10-resnet18-iat"):
        spec = catalog.runs[run]
        first = check_steps.one_step(spec, Runtime(CPU), batch=4)
        torch.rand(17)  # the global generator moves on
        second = check_steps.one_step(spec, Runtime(CPU), batch=4)
        assert first["loss"] == second["loss"] and torch.equal(first["update"], second["update"]), run
    with check_steps.host_random(5):
        a = (torch.rand(3), torch.randn_like(torch.zeros(2)), torch.randperm(4), torch.randint(0, 9, (3,)))
    with check_steps.host_random(5):
        b = (torch.rand(3), torch.randn_like(torch.zeros(2)), torch.randperm(4), torch.randint(0, 9, (3,)))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.rand is not None and "draw" not in getattr(torch.rand, "__name__", "")  # put back
    assert set(check_steps.representative_runs(catalog)) <= set(METHODS)


# ------------------------------------------------------------------------------------------------ paper shape


def test_the_rehearsal_is_skipped_in_one_line_while_config_rehearsal_yaml_is_missing(tmp_path):
    root = workflow_copy(tmp_path / "wf")
    (root / check_rehearsal.REHEARSAL).unlink(missing_ok=True)
    calls = []
    out = check_rehearsal.rehearse(root, "NVIDIA H100 80GB HBM3", runner=lambda *a, **k: calls.append(a))
    assert out == {"skipped": "config/rehearsal.yaml does not exist (the rehearsal scale, issue 23): the table1a "
                              "rehearsal at paper shape did not run"} and not calls
    assert "Skipped: config/rehearsal.yaml does not exist" in "\n".join(check_report._rehearsal_lines(out))


def _rehearsal_root(tmp_path):
    """A workflow copy whose config/rehearsal.yaml stands in for the rehearsal scale (the smoke overlay here)."""
    root = workflow_copy(tmp_path / "wf")
    text = (ROOT / "config" / "smoke.yaml").read_text()
    paths = f"\npaths: {{results: {tmp_path / 'results'}, data: data}}\n"
    (root / check_rehearsal.REHEARSAL).write_text(text + paths)
    return root


def test_the_rehearsal_runs_table1a_through_snakemake_uncapped_and_sets_measured_beside_planned(tmp_path):
    """Snakemake builds table1a with config/rehearsal.yaml and an overlay that restores the paper's batch sizes and
    the attacks' full strength on at least 1,000 test images on CUDA; then each method's seconds per epoch (its
    curves, the first epoch left out) stand beside the plan's for the same resolved run."""
    root = _rehearsal_root(tmp_path)
    seen = {}

    def snakemake(command, cwd, **kwargs):  # what Snakemake would leave: every row's model, its epochs' seconds
        seen["command"], seen["cwd"] = command, cwd  # in the model's sidecar
        overlay = command[command.index(str(root / check_rehearsal.REHEARSAL)) + 1]
        catalog = cfg.load_catalog([root / "config" / "config.yaml", root / check_rehearsal.REHEARSAL, overlay])
        seen["catalog"] = catalog
        for row in catalog.targets["table1a"].rows:
            write_sidecar(catalog.layout.model(catalog.train_id[row.run]),
                          {"epochs": [{"epoch": e, "seconds": s} for e, s in ((1, 9.0), (2, 2.0), (3, 4.0))]})
        return subprocess.CompletedProcess(command, 0, "", "")

    out = check_rehearsal.rehearse(root, "NVIDIA H100 80GB HBM3", runner=snakemake)
    command, catalog = seen["command"], seen["catalog"]
    assert command[:3] == [sys.executable, "-m", "snakemake"]  # this Python's: a node's wheelhouse has no scripts
    assert command[3:7] == ["table1a", "--cores", "1", "--configfile"] and seen["cwd"] == root
    assert catalog.config["runtime"]["device"] == "cuda" and out["test_examples"] >= 1000
    assert all(catalog.config["scale_map"][k] is None for k in check_rehearsal.REHEARSAL_UNCAPPED)
    paper = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    run = "cifar10-resnet18-at-beta1"
    assert catalog.runs[run].batch_size == paper.runs[run].batch_size == 128
    assert catalog.attack_for("aa", run).params["steps"] == paper.attack_for("aa", run).params["steps"]
    assert [m["run"] for m in out["methods"]] == [r.run for r in catalog.targets["table1a"].rows]
    sizes = JobSizes(catalog, bench_folder=catalog.layout.bench, device="h100")
    for m in out["methods"]:
        planned = sizes.planned_train(m["run"]) * 60 / catalog.runs[m["run"]].epochs
        assert m["measured_s_per_epoch"] == 3.0 and m["planned_s_per_epoch"] == pytest.approx(planned)
        assert m["measured_over_planned"] == pytest.approx(3.0 / planned)
    assert out["plan_device"] == "h100" and out["plan_precision"] == "fp32"
    text = "\n".join(check_report._rehearsal_lines(out))
    assert "| pgd_at | cifar10-resnet18-at-beta1 |" in text and "measured / planned" in text


def test_a_failed_rehearsal_fails_the_check_with_snakemakes_words(tmp_path):
    root = _rehearsal_root(tmp_path)
    out = check_rehearsal.rehearse(root, "cpu",
                                   runner=lambda c, **k: subprocess.CompletedProcess(c, 1, "", "MissingInput"))
    assert out["returncode"] == 1 and out["error"] == "MissingInput" and "methods" not in out
    assert "MissingInput" in "\n".join(check_report._rehearsal_lines(out))


def test_bf16_against_fp32_trains_one_seed_in_both_precisions_and_tests_the_pair(tmp_path):
    """The same run and seed trained in fp32 and in bf16 autocast (on the CPU here: CPU autocast), both models
    under clean and PGD-20, and the exact McNemar test of their per-example outcomes."""
    overlay = tmp_path / "paths.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}, data: data}}\n")
    smoke = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay])
    out = check_precision.bf16_against_fp32(smoke, CPU)
    assert (out["run"], out["seed"], out["examples"]) == (check_precision.PRECISION_RUN, 0, 64)
    for precision in ("fp32", "bf16"):
        assert (smoke.layout.gpu_check_work / precision / "checkpoints").is_dir()
        assert set(out[precision]) == {"clean", "pgd20"} and all(0 <= v <= 1 for v in out[precision].values())
    assert all(0 < p <= 1 for p in out["p_value"].values())
    text = "\n".join(check_report._precision_lines(out))
    assert "| pgd20 |" in text and "exact McNemar" in text


def _smoke(tmp_path):
    """The smoke catalog, its results in ``tmp_path``."""
    _files(tmp_path)
    return cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", tmp_path / "paths.yaml"])


def test_a_section_out_of_its_share_stops_says_so_and_the_next_runs(tmp_path, monkeypatch):
    import threading

    catalog = _smoke(tmp_path)
    never = threading.Event()
    written = []

    def endless(*args, rows, **kwargs):  # a bench that would never end: only the budget's alarm stops it
        rows.append({"label": "kept", "run": "r", "precision": "fp32", "channels_last": True, "batch_size": 128,
                     "steps": 1, "images_per_s": 1.0, "seconds_per_epoch": 1.0, "planned_s_per_epoch": None,
                     "measured_over_planned": None, "achieved_tflops": 0.0, "fraction_of_peak": None})
        never.wait()

    probed = check_imports.imports()  # before the budget starts: cold imports take seconds on a loaded machine
    monkeypatch.setattr(gpucheck, "imports", lambda: probed)
    monkeypatch.setattr(gpucheck, "check_methods", lambda *a, out, **k: out.update())
    monkeypatch.setattr(gpucheck, "run_bench_train", endless)
    monkeypatch.setattr(gpucheck, "run_bench_eval", lambda *a, out, **k: out.update(run="r", attacks={}))
    report = gpucheck.gpu_check(catalog, cpu_only=True, budget=10,
                                on_progress=lambda r: written.append({k: v["status"] for k, v in r["sections"].items()}))
    sections = report["sections"]
    assert [sections[k]["status"] for k in "abcde"] == ["done", "stopped", "done", "skipped", "skipped"]
    share = gpucheck.SECTIONS[1][2] * (10 - gpucheck.WRITE_RESERVE)
    assert sections["b"]["allowance_s"] >= share and "out of its" in sections["b"]["note"]
    assert report["bench_train"][0]["label"] == "kept"  # what it finished is kept
    assert "b: stopped (out of its" in " ".join(report["skipped"])
    assert written[0] == {"a": "running"} and written[-1]["c"] == "done"  # written as it goes: imports first
    assert report["imports"]["torch_ok"] and not check_imports.missing(report["imports"])
    text = check_report.format_report(report)
    assert "sections not done: b, d, e" in text and "| b. seconds per epoch at paper shape" in text


def test_sigterm_stops_the_check_and_the_report_says_what_ran(tmp_path, monkeypatch):
    import os
    import signal
    import threading

    catalog = _smoke(tmp_path)
    never = threading.Event()

    def killed(*args, rows, **kwargs):  # the outer timeout's SIGTERM arrives during section b
        os.kill(os.getpid(), signal.SIGTERM)
        never.wait()

    monkeypatch.setattr(gpucheck, "check_methods", lambda *a, out, **k: out.update())
    monkeypatch.setattr(gpucheck, "run_bench_train", killed)
    before = signal.getsignal(signal.SIGTERM)
    paths = (tmp_path / "r.json", tmp_path / "r.md")
    report = gpucheck.gpu_check(catalog, cpu_only=True, budget=600,
                                on_progress=lambda r: check_report.write_report(r, paths))
    assert signal.getsignal(signal.SIGTERM) is before
    written = json.loads(paths[0].read_text())
    assert written["terminated"] and not written["ok"]
    assert [written["sections"][k]["status"] for k in "abc"] == ["done", "stopped", "skipped"]
    assert "SIGTERM" in written["sections"]["b"]["note"] and "not reached" in written["sections"]["c"]["note"]
    assert "sections not done: b, c, d, e" in paths[1].read_text() and report["terminated"]


def test_a_failing_section_is_reported_and_the_others_run(tmp_path, monkeypatch):
    catalog = _smoke(tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(gpucheck, "check_methods", lambda *a, out, **k: out.update())
    monkeypatch.setattr(gpucheck, "run_bench_train", broken)
    monkeypatch.setattr(gpucheck, "run_bench_eval", lambda *a, out, **k: out.update(run="r", attacks={}))
    report = gpucheck.gpu_check(catalog, cpu_only=True, budget=None)
    assert report["sections"]["b"]["status"] == "error" and "illegal memory" in report["sections"]["b"]["note"]
    assert report["sections"]["c"]["status"] == "done" and not report["ok"]


def test_bench_rows_carry_the_plans_prediction_and_the_recalibrated_constant():
    rows = [{"fraction_of_peak": 0.2}, {"fraction_of_peak": 0.1}, {"fraction_of_peak": None},
            {"fraction_of_peak": 0.4}]
    cal = check_benches.recalibrated(rows)
    assert cal["measured_fraction"] == 0.2 and cal["benches"] == 3 and cal["assumed_fraction"] == 0.3
    from tradeoff.pipeline.costs import planned_epoch_seconds

    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    spec = catalog.runs["cifar10-resnet18-at-beta1"]
    h100 = planned_epoch_seconds(spec, "h100", "fp32")
    assert h100 > 0 and planned_epoch_seconds(spec, "h100", "bf16") == pytest.approx(h100 / 2)
    assert planned_epoch_seconds(spec, "cpu", "fp32") is None


def test_a_budget_given_on_the_command_line_counts_the_process_start_up(tmp_path, monkeypatch):
    seconds = gpucheck.process_seconds()
    assert 0 < seconds < 3600  # this process started a while ago, not when the machine booted
    given = {}

    def check(catalog, **kwargs):
        given.update(kwargs)
        raise gpucheck.NoCuda("stop here")

    monkeypatch.setattr(gpucheck, "process_seconds", lambda: 7.0)  # Python, PyTorch and the config took 7 s
    monkeypatch.setattr(gpucheck, "gpu_check", check)
    assert cli.main([*_files(tmp_path), "gpu-check", "--cpu-only", "--budget", "60"]) == 1
    assert given["budget"] == 53.0
    cli.main([*_files(tmp_path), "gpu-check", "--cpu-only"])
    assert given["budget"] is None
