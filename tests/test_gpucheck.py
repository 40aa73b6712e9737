"""`tradeoff gpu-check` without a GPU: the refusal, the CPU-only run and its report, and the comparison machinery
(a "device" step made to differ is caught)."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import ROOT
from tradeoff import cli, gpucheck
from tradeoff import config as cfg
from tradeoff.methods import METHODS
from tradeoff.runtime import Runtime

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
    device = gpucheck.device_slug(gpucheck.provenance(CPU)["device"])
    json_path, md_path = catalog.layout.gpu_check(device)
    assert str(md_path) in out and "every comparison within its tolerance" in out
    report = json.loads(json_path.read_text())
    assert report["cpu_only"] and report["ok"] and report["device"].startswith("cpu")
    assert set(report["methods"]) == {spec["method"]["name"] for spec in catalog.training_runs().values()}
    for name, row in report["methods"].items():  # the CPU against itself: exactly equal
        assert row["gpu_vs_cpu"]["loss_diff"] == 0 and row["gpu_vs_cpu"]["cosine"] == pytest.approx(1, abs=1e-12)
        assert row["bf16_vs_fp32"]["ok"] and row["syncs_per_step"] is None  # (CUDA's sync debug mode only)
    assert report["methods"]["generalist"]["parallel_vs_serial"]["ok"]
    assert [(r["run"], r["batch_size"]) for r in report["bench_train"]] == [(r, b) for r, b, _ in gpucheck.BENCH_TRAIN]
    assert all(r["images_per_s"] > 0 and r["path"].endswith(".json") for r in report["bench_train"])
    assert set(report["bench_eval"]["attacks"]) == {"pgd20", "aa"} and report["bench_eval"]["images"] == 32
    assert set(report["targets"]) == set(gpucheck.TARGETS)
    assert all(t["met"] is None for t in report["targets"].values())  # an H100's targets: not judged on a CPU
    text = md_path.read_text()
    assert text.startswith(f"# gpu-check on {report['device']}") and "| generalist |" in text


def test_the_comparison_catches_a_device_step_that_differs():
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    calls: dict[int, int] = {}

    def step(spec, runtime, **kwargs):  # each method's second step (the "device" fp32 step) is off
        out = gpucheck.one_step(spec, runtime, **kwargs)
        calls[id(spec)] = calls.get(id(spec), 0) + 1
        if calls[id(spec)] == 2:
            out = {**out, "update": out["update"] + 1e-3 * torch.randn_like(out["update"])}
        return out

    rows = gpucheck.check_methods(catalog, CPU, batch=4, step=step)
    assert rows and all(not row["gpu_vs_cpu"]["ok"] for row in rows.values())
    assert all(row["bf16_vs_fp32"]["cosine"] < 1 for row in rows.values())


def test_compare_and_its_tolerances():
    update = torch.randn(1000, dtype=torch.float64)
    a = {"loss": 2.0, "update": update}
    tol = gpucheck.TOLERANCES["gpu_vs_cpu"]
    assert gpucheck.compare(a, dict(a), tol)["ok"]
    assert gpucheck.compare(a, {"loss": 2.0 + 1e-4, "update": update * (1 + 1e-3)}, tol)["ok"]
    assert not gpucheck.compare(a, {"loss": 2.01, "update": update}, tol)["ok"]
    assert not gpucheck.compare(a, {"loss": 2.0, "update": -update}, tol)["ok"]
    assert not gpucheck.compare(a, {"loss": float("nan"), "update": update}, tol)["ok"]


def test_host_random_gives_a_step_the_same_draws_whatever_the_global_generators():
    """What makes a GPU step comparable with a CPU step: PGD's random start, TRADES' noise, IAT's permutation drawn
    on the host from one seeded generator, not from the device's generator."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    for run in ("cifar10-resnet18-at-beta1", "cifar10-resnet18-trades-lambda6", "cifar10-resnet18-iat"):
        spec = catalog.runs[run]
        first = gpucheck.one_step(spec, Runtime(CPU), batch=4)
        torch.rand(17)  # the global generator moves on
        second = gpucheck.one_step(spec, Runtime(CPU), batch=4)
        assert first["loss"] == second["loss"] and torch.equal(first["update"], second["update"]), run
    with gpucheck.host_random(5):
        a = (torch.rand(3), torch.randn_like(torch.zeros(2)), torch.randperm(4), torch.randint(0, 9, (3,)))
    with gpucheck.host_random(5):
        b = (torch.rand(3), torch.randn_like(torch.zeros(2)), torch.randperm(4), torch.randint(0, 9, (3,)))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.rand is not None and "draw" not in getattr(torch.rand, "__name__", "")  # put back
    assert set(gpucheck.representative_runs(catalog)) <= set(METHODS)
