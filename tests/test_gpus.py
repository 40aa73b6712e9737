"""One GPU per job on a machine with several (tradeoff.core.gpus), simulated: 4 device indices, no GPU. Each job records
the device it was given and when it held it; no two jobs may ever hold the same device at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT, env

from tradeoff.core import gpus

HOLD = textwrap.dedent("""\
    import json, os, sys, time
    from tradeoff.core.gpus import claim_gpu
    t0 = time.time()
    device = claim_gpu()
    start = time.time()
    time.sleep(float(sys.argv[2]))
    end = time.time()
    with open(sys.argv[1], "w") as f:
        json.dump({"device": device, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "asked": t0,
                   "start": start, "end": end, "torch": "torch" in sys.modules}, f)
""")


def _overlaps(records: list[dict]) -> list[tuple]:
    by_device: dict[str, list[dict]] = {}
    for r in records:
        by_device.setdefault(r["device"], []).append(r)
    bad = []
    for device, held in by_device.items():
        held.sort(key=lambda r: r["start"])
        bad += [(device, a, b) for a, b in zip(held, held[1:]) if b["start"] < a["end"]]
    return bad


def test_the_pool_comes_from_tradeoff_gpus_then_cuda_visible_devices_then_the_driver(tmp_path, monkeypatch):
    assert gpus.device_pool({"TRADEOFF_GPUS": "2, 3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}) == ["2", "3"]
    assert gpus.device_pool({"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}) == ["GPU-a", "GPU-b"]
    assert gpus.device_pool({"CUDA_VISIBLE_DEVICES": ""}) == []
    driver = tmp_path / "gpus"
    for bus in ("0000:01:00.0", "0000:02:00.0", "0000:03:00.0"):
        (driver / bus).mkdir(parents=True)
    monkeypatch.setattr(gpus, "NVIDIA_GPUS", driver)
    assert gpus.device_pool({}) == ["0", "1", "2"] and gpus.driver_gpus() == 3
    monkeypatch.setattr(gpus, "NVIDIA_GPUS", tmp_path / "none")
    assert gpus.device_pool({}) == []
    # one device or none: nothing to choose, nothing changed (a SLURM job given one GPU)
    one = {"CUDA_VISIBLE_DEVICES": "0"}
    assert gpus.claim_gpu(one) is None and one == {"CUDA_VISIBLE_DEVICES": "0"}
    assert gpus.lock_folder({"SLURM_JOB_ID": "42"}).name.endswith("-slurm42")


def test_concurrent_jobs_each_get_their_own_device_never_two_at_once(tmp_path):
    """8 processes, 4 devices: the first 4 take one each at once, the others wait for a device to be given back."""
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    job_env = {**env(), "TRADEOFF_GPUS": "0,1,2,3", "TRADEOFF_GPU_LOCKS": str(tmp_path / "locks")}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / f"job{i}.json"), "1.0"], env=job_env)
             for i in range(8)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    records = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(8)]
    assert all(r["device"] in {"0", "1", "2", "3"} and r["visible"] == r["device"] for r in records), records
    assert not any(r["torch"] for r in records)  # the claim happens before PyTorch (and CUDA) start
    assert not _overlaps(records), _overlaps(records)
    assert {r["device"] for r in records} == {"0", "1", "2", "3"}
    assert sum(r["start"] - r["asked"] > 0.5 for r in records) >= 4  # the later four waited


def test_snakemake_gpu_resource_with_one_device_per_job(tmp_path):
    """The local profile's way: Snakemake runs at most `--resources gpu=4` jobs that ask for `gpu=1` at once, and
    each job (here the claim that every tradeoff GPU command makes first) takes a device of its own."""
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    (tmp_path / "Snakefile").write_text(textwrap.dedent(f"""\
        rule all:
            input: expand("job{{i}}.json", i=range(8))

        rule job:
            output: "job{{i}}.json"
            resources: gpu=1
            shell: "{sys.executable} {script} {{output}} 0.8"
        """))
    job_env = {**env(), "TRADEOFF_GPUS": "0,1,2,3", "TRADEOFF_GPU_LOCKS": str(tmp_path / "locks")}
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "8", "--resources", "gpu=4", "-q"],
                         cwd=tmp_path, env=job_env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(8)]
    assert all(r["device"] in {"0", "1", "2", "3"} and r["visible"] == r["device"] for r in records), records
    assert not _overlaps(records), _overlaps(records)
    concurrent = max(sum(r["start"] <= t["start"] < r["end"] for r in records) for t in records)
    assert 2 <= concurrent <= 4, concurrent


def _smoke(tmp_path: Path) -> list[str]:
    """The smoke scale's config files, its results in tmp_path (a job command keeps the resolved catalog there)."""
    overlay = tmp_path / "paths.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n")
    return [a for f in (ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay)
            for a in ("--config", str(f))]


def test_every_gpu_command_claims_a_device_unless_the_config_says_cpu(tmp_path, monkeypatch):
    from tradeoff import cli

    claimed = []
    monkeypatch.setattr(gpus, "claim_gpu", lambda *a, **k: claimed.append(1))
    files = _smoke(tmp_path)
    assert cli.main([*files, "train", "--run", "no-such-run"]) == 2  # refused after the claim: the claim came first
    assert claimed == [1]
    cpu = tmp_path / "cpu.yaml"
    cpu.write_text("runtime: {device: cpu}\n")
    assert cli.main([*files, "--config", str(cpu), "train", "--run", "no-such-run"]) == 2
    assert cli.main([*files, "plan", "table1"]) == 0
    assert claimed == [1]  # neither a CPU job nor a command that computes nothing


@pytest.mark.parametrize("value", ["", "-1"])
def test_a_gpu_node_whose_gpus_are_hidden_on_purpose_uses_the_cpu_at_small_scales(tmp_path, monkeypatch, value):
    import torch

    from tradeoff.core.runtime import Runtime

    (tmp_path / "gpus" / "0000:01:00.0").mkdir(parents=True)
    monkeypatch.setattr(gpus, "NVIDIA_GPUS", tmp_path / "gpus")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert Runtime.from_config({"device": "auto"}, "smoke").device == torch.device("cpu")


def test_a_gpu_node_that_gave_the_job_no_gpu_stops_training_unless_it_asks_for_the_cpu(tmp_path, monkeypatch,
                                                                                        capsys):
    """A job on a node with NVIDIA GPUs (the driver lists them) that sees none (a scheduler job without --gpus, a
    PyTorch without CUDA) stops with one line at every scale, unless runtime.device is cpu."""
    import torch

    from tradeoff import config as cfg
    from tradeoff.core.runtime import Runtime

    (tmp_path / "gpus" / "0000:01:00.0").mkdir(parents=True)
    monkeypatch.setattr(gpus, "NVIDIA_GPUS", tmp_path / "gpus")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for value in (None, "NoDevFiles"):
        if value is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
        for scale in ("smoke", "paper"):
            with pytest.raises(cfg.ConfigError, match=r"this node has NVIDIA GPUs \(1 in .*\) but PyTorch sees none "
                                                      r".*put `runtime: \{device: cpu\}` in an overlay"):
                Runtime.from_config({"device": "auto"}, scale)
        assert Runtime.from_config({"device": "cpu"}, "paper").device == torch.device("cpu")
    # through the CLI: one line, exit status 2, before any work
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    from tradeoff import cli

    files = _smoke(tmp_path)
    monkeypatch.setattr(gpus, "claim_gpu", lambda *a, **k: None)
    capsys.readouterr()
    assert cli.main([*files, "train", "--run", "cifar10-resnet18-nt"]) == 2
    assert "configuration error: runtime.device is 'auto' and this node has NVIDIA GPUs" in capsys.readouterr().err
