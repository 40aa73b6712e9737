"""The offline GPU node's path (issue 31): the wheelhouse, the node list, and scripts/gpu-node.sh rehearsed here.

The rehearsal builds what a node has, honestly and quickly: a virtual environment without pip or site-packages of
its own that sees only the node list's packages (config/node-packages.txt) and their own dependencies, linked (not
copied, not reinstalled: under a second) from this environment's site-packages (tests/node_env.py), plus the
wheelhouse that `make wheelhouse` makes, fetched for the running Python (this machine and CI have 3.11 only; the
node 3.12) from PyPI with pip's cache (CI and this machine reach PyPI: no skip, a missing network fails the test).
It then runs the node's own script with --cpu-only and a budget of 60 s: the script installs the wheelhouse without
an index into a temporary folder and the check must end within the budget with a report whose every needed package
imported. Its sections run out of their shares on 2 CPU cores at paper shape and must say so: the budget itself
is under test. About 70 s of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT
from node_env import build_node_site, closure, make_node_venv, node_requirements

sys.path.insert(0, str(ROOT / "scripts"))
import wheelhouse  # noqa: E402  (scripts/wheelhouse.py)

BUDGET = 60


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("wheelhouse")
    version = "%d.%d" % sys.version_info[:2]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "--python-version", version,
                           "--dest", str(dest)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"(limit 48 MiB) for Python {version}" in done.stdout
    return dest


def test_the_wheelhouse_holds_the_list_and_no_more_within_48_mib(wheels):
    names = {wheelhouse.canonical(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    listed = {wheelhouse.canonical(r.split("==")[0]) for r, _ in wheelhouse.read_list()}
    assert names == listed
    assert sum(w.stat().st_size for w in wheels.glob("*.whl")) <= 48 * 2**20
    node = {wheelhouse.canonical(r.name) for r in node_requirements()}
    assert not names & node  # nothing the node has already
    assert "snakemake" in names  # section e, the rehearsal through Snakemake (test below)
    assert not names & {"scmrepo", "dulwich", "gto", "hydra-core", "pulp"}  # DVC's and Snakemake's weight
    aa = next(wheels.glob("pyautoattack-*.whl"))
    with zipfile.ZipFile(aa) as z:  # the example model left out, the code and a RECORD that matches kept
        files = z.namelist()
        record = z.read(next(n for n in files if n.endswith("RECORD"))).decode()
    assert not [f for f in files if f.startswith("pyautoattack/examples/")] and "pyautoattack/autoattack.py" in files
    assert {line.split(",")[0] for line in record.splitlines()} == set(files)


def test_drop_files_rewrites_the_record(tmp_path):
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("x/__init__.py", "a = 1\n")
        z.writestr("x/big/data.bin", b"0" * 100000)
        z.writestr("x-1.0.dist-info/RECORD", "x/__init__.py,,\nx/big/data.bin,,\nx-1.0.dist-info/RECORD,,\n")
    assert wheelhouse.drop_files(wheel, ["x/big/"]) > 0
    with zipfile.ZipFile(wheel) as z:
        assert sorted(z.namelist()) == ["x-1.0.dist-info/RECORD", "x/__init__.py"]
        lines = z.read("x-1.0.dist-info/RECORD").decode().splitlines()
    assert lines[0].startswith("x/__init__.py,sha256=") and lines[0].endswith(",6") and lines[1] == \
        "x-1.0.dist-info/RECORD,,"


def test_the_node_list_declares_the_minimum_pytorch():
    from tradeoff.pipeline.bench.check_imports import MIN_TORCH, torch_version_ok

    torch_line = next(r for r in node_requirements() if r.name == "torch")
    assert str(torch_line.specifier) == ">=" + ".".join(map(str, MIN_TORCH))
    assert torch_version_ok("2.11.0+cu130") and not torch_version_ok("2.10.1") and torch_version_ok("3.0")


def test_the_node_site_links_the_lists_closure_and_nothing_else(tmp_path):
    linked = build_node_site(tmp_path / "site", ["tqdm"])
    assert linked == sorted(closure(["tqdm"])) and "tqdm" in linked
    assert {p.name for p in (tmp_path / "site").iterdir()} >= {"tqdm"} and not (tmp_path / "site" / "torch").exists()


def test_the_script_checks_a_node_of_only_the_list_and_the_wheelhouse_within_its_budget(tmp_path, wheels):
    python, linked = make_node_venv(tmp_path / "node", [r.name for r in node_requirements()])
    assert "jsonschema" not in linked and "dvclive" not in linked and "snakemake" not in linked
    bare = subprocess.run([str(python), "-c", "import jsonschema"], capture_output=True, text=True)
    assert bare.returncode == 1 and "No module named 'jsonschema'" in bare.stderr  # the node alone lacks it
    overlay = tmp_path / "paths.yaml"  # nothing written into the checkout
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}, data: {tmp_path / 'data'}}}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS")}
    env.update(PYTHON=str(python), WHEELHOUSE=str(wheels), PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull,
               TRADEOFF_CONFIG=f"{ROOT / 'config' / 'config.yaml'}:{overlay}", PATH="/usr/bin:/bin")
    out = tmp_path / "out"
    t0 = time.monotonic()
    done = subprocess.run([str(ROOT / "scripts" / "gpu-node.sh"), str(out), str(BUDGET), "--cpu-only", "--steps",
                           "1", "--warmup", "0", "--images", "32"], env=env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    assert done.returncode in (0, 1), done.stderr[-3000:]
    (report_path,) = out.glob("gpu-check-*.json")
    report = json.loads(report_path.read_text())
    found = report["imports"]
    assert not [m for m, row in found["modules"].items() if "missing" in row], found["modules"]
    assert found["torch_ok"] and report["cpu_only"] and report["budget_s"] <= BUDGET - 10
    assert seconds <= BUDGET + 5  # the script's budget holds, install included
    sections = report["sections"]
    assert list(sections) == ["a", "b", "c", "d", "e"]
    assert all(sections[k]["status"] in ("done", "stopped") for k in "abc")
    assert all(sections[k]["status"] == "skipped" and "CUDA only" in sections[k]["note"] for k in "de")
    assert sum(s.get("seconds", 0) for s in sections.values()) <= report["budget_s"] + 2
    text = report_path.with_suffix(".md").read_text()
    assert text.startswith("# gpu-check on cpu") and "## Sections" in text and "| jsonschema | the config | 4." in text
    assert f"report: {report_path.with_suffix('.md')}" in done.stdout


def test_the_wheelhouse_runs_snakemake_and_its_jobs_on_a_node_of_only_the_list(tmp_path, wheels):
    """Section e runs the rehearsal through Snakemake (`python -m snakemake`): on a node of only the list and the
    wheelhouse, installed as scripts/gpu-node.sh installs it (no index, a folder on PYTHONPATH, no scripts on PATH),
    Snakemake reads the workflow and runs a job, which runs `python -m tradeoff.cli` under the same Python."""
    from helpers import workflow_copy

    python, linked = make_node_venv(tmp_path / "node", [r.name for r in node_requirements()])
    assert "snakemake" not in linked  # the node alone lacks it
    site = tmp_path / "site"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                              "--disable-pip-version-check", "--no-compile", "--target", str(site),
                              *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    work = workflow_copy(tmp_path / "wf")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{ROOT / 'src'}",
           "PIP_NO_INDEX": "1"}
    done = subprocess.run([str(python), "-m", "snakemake", "data/.ready/digits", "--cores", "1", "--scheduler",
                           "greedy", "--configfile", "config/smoke.yaml"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (work / "data" / ".ready" / "digits").is_file() and "1 of 1 steps (100%) done" in done.stderr
