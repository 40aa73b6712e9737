"""The two front doors, `tradeoff` and Snakemake, say the same about bad input (issue 41), and what a user hands the
pipeline is checked before it is used: a model from their Python file (one forward pass), a damaged checkpoint (which
damage), the node check's verdict (what it measured), a `.gitignore` and a README pointer that point at something.

- every held-out bad input of the suite (tests/test_config.py's BAD_CONFIGS, tests/test_faults.py's bad overlays) goes
  through `tradeoff check-config` and through Snakemake's own command line: the same one line, exit status 2;
- an overlay check-config accepts, Snakemake accepts (a partial run under `runs:`, which Snakemake's schema check of the
  compact config refused);
- a misspelt target through Snakemake: the one line with the closest names (not a MissingRuleException);
- jobs run under the Python that runs Snakemake, with nothing on PATH; a job that cannot start says so in Snakemake's
  own output; a Snakemake that cannot import tradeoff stops before any job, deleting nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import BIN, ROOT, data_root, workflow_copy
from test_config import BAD_CONFIGS
from test_faults import BAD_FOR_CLI, BAD_FOR_SNAKEMAKE, BAD_VALUES

from tradeoff import cli
from tradeoff import config as cfg
from tradeoff.pipeline.bench import check_report, gpucheck
from tradeoff.storage import checkpoint

SMOKE = ["config/config.yaml", "config/smoke.yaml"]
PREFIX = "tradeoff: configuration error: "

# Snakemake's command line, run in one process for many command lines (its import alone is ~3 s of CPU): each
# command line as `snakemake ...` would run it (sys.argv, its own parser, profiles), its exit status and stderr
SNAKEMAKE_DRIVER = r"""
import contextlib, io, json, sys
from snakemake.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["snakemake", *argv]
    err, said, code = io.StringIO(), io.StringIO(), None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(said):
        try:
            main()
        except SystemExit as exc:
            code = exc.code
    out.append({"code": code, "stderr": err.getvalue(), "stdout": said.getvalue()})
print(json.dumps(out))
"""


def _snakemake_many(work: Path, argvs: list[list[str]]) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", SNAKEMAKE_DRIVER, json.dumps(argvs)], cwd=work,
                          capture_output=True, text=True, env=_env(), timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env(**more) -> dict:
    out = {k: v for k, v in os.environ.items() if k != "TRADEOFF_CONFIG"}
    return {**out, **more}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _overlay(paper: dict, path: list, value) -> dict:
    """The overlay file that sets ``path`` of the paper-scale config to ``value`` (a list along the path is given
    whole, as an overlay replaces a list)."""
    at = next((i for i, key in enumerate(path) if isinstance(key, int)), None)
    if at is not None:
        node = paper
        for key in path[:at]:
            node = node[key]
        whole = json.loads(json.dumps(node))
        target = whole
        for key in path[at:-1]:
            target = target[key]
        target[path[-1]] = value
        value, path = whole, path[:at]
    for key in reversed(path):
        value = {key: value}
    return value


def _bad_inputs() -> list[tuple[list[str], str, str]]:
    """(config files, overlay text, what the line must match: a regex) of every held-out bad input."""
    paper = cfg.load_config([ROOT / "config" / "config.yaml"])
    out = [(["config/config.yaml"], yaml.safe_dump(_overlay(paper, path, value)), expected)
           for path, value, expected in BAD_CONFIGS]
    fragments = {**{text: [line] for text, line in BAD_FOR_CLI.items()}, **BAD_FOR_SNAKEMAKE,
                 **{text: [line] for text, line in BAD_VALUES.items()}}
    for text, said in fragments.items():  # (test_faults names its overlay config/fault.yaml)
        out.append((SMOKE, text, ".*".join(re.escape(s).replace(re.escape("config/fault.yaml"), "{overlay}")
                                           for s in said)))
    # issue 41's: a misspelt key of a run, a misspelt top-level key
    out.append((SMOKE, "runs:\n  cifar10-resnet18-nt:\n    epoch: 3\n",
                r"runs\.cifar10-resnet18-nt\.epoch: unknown key\(s\) \['epoch'\].*did you mean 'epochs'\?"))
    out.append((SMOKE, "scale_mapp: {epochs: 3}\n", r"scale_mapp: unknown key\(s\).*did you mean 'scale_map'"))
    return out


@pytest.mark.slow
def test_every_bad_input_is_the_same_line_and_status_through_check_config_and_snakemake(tmp_path, monkeypatch,
                                                                                          capsys):
    work = workflow_copy(tmp_path / "w")
    cases = _bad_inputs()
    argvs, lines = [], []
    for i, (files, text, expected) in enumerate(cases):
        overlay = f"config/bad{i}.yaml"
        (work / overlay).write_text(text)
        monkeypatch.chdir(work)
        status = cli.main([a for f in [*files, overlay] for a in ("--config", f)] + ["check-config"])
        err = _lines(capsys.readouterr().err)
        assert status == 2 and len(err) == 1 and err[0].startswith(PREFIX), (text, err)
        assert re.search(expected.replace("{overlay}", re.escape(overlay)), err[0]), (text, expected, err[0])
        lines.append(err[0])
        argvs.append(["-n", "--cores", "1", "--configfile", *files[1:], overlay])
    monkeypatch.chdir(tmp_path)
    for (files, text, _), line, out in zip(cases, lines, _snakemake_many(work, argvs)):
        said = _lines(out["stderr"])
        if "YAML syntax error" in line:
            # Snakemake reads the --configfile files itself before the Snakefile: a file that is no YAML at all
            # is its own error (which names neither file nor line; `tradeoff check-config` names both)
            # (Snakemake 9 prints it on stdout, its notes on stderr)
            assert out["code"] == 1 and "Config file is not valid JSON or YAML" in out["stdout"] + out["stderr"], out
            continue
        assert out["code"] == 2 and said and said[-1] == line, (text, line, out)
        # nothing but Snakemake's own note of the profile it loaded before the Snakefile
        assert all(s.startswith(("Using workflow specific profile", "Config file config/config.yaml is extended"))
                   for s in said[:-1]), said
    assert len(cases) >= 60
    assert not (work / "results").exists()  # no job started


@pytest.mark.slow
def test_what_check_config_accepts_snakemake_accepts_and_a_misspelt_target_gets_the_closest_names(tmp_path,
                                                                                                   monkeypatch, capsys):
    """A partial run under `runs:` (one method parameter of a run of the design) passes both (Snakemake's own schema
    check of the file as written, before the design expands it, refused it: "'name' is a required property"); a
    target Snakemake does not know is refused in the line `tradeoff plan` gives it, exit status 2; a file target
    is Snakemake's to find."""
    work = workflow_copy(tmp_path / "w")
    accepted = {"config/lam.yaml": "runs: {cifar10-resnet18-trades-lambda6: {method: {lam: 3.0}}}\n",
                "config/beta.yaml": "runs:\n  cifar10-resnet18-at-beta1:\n    method: {beta: 0.5}\n"}
    monkeypatch.chdir(work)
    for path, text in accepted.items():
        (work / path).write_text(text)
        assert cli.main(["--config", "config/config.yaml", "--config", path, "check-config"]) == 0
    plan = {}
    for name in ("tabel1a", "audit_tabel1a"):
        assert cli.main(["plan", name]) == 2
        plan[name] = _lines(capsys.readouterr().err)
        assert len(plan[name]) == 1 and "did you mean" in plan[name][0]
    monkeypatch.chdir(tmp_path)
    argvs = [["table1a", "-n", "--cores", "1", "--configfile", path] for path in accepted]
    argvs += [[name, "-n", "--cores", "1"] for name in plan]
    argvs += [["results/paper/tables/table1a.md", "-n", "--cores", "1"]]
    outs = _snakemake_many(work, argvs)
    assert [o["code"] for o in outs[:2]] == [0, 0], outs[:2]
    for name, out in zip(plan, outs[2:4]):
        assert out["code"] == 2 and _lines(out["stderr"])[-1] == plan[name][0], out
    assert plan["tabel1a"][0] == (PREFIX + "unknown target 'tabel1a'; did you mean 'table1a', 'table1' or "
                                  "'table1b'? (" + plan["tabel1a"][0].split("? (", 1)[1])
    assert outs[4]["code"] == 0, outs[4]  # a file: Snakemake plans the jobs that make it


@pytest.mark.slow
def test_the_terminal_sees_one_line_and_status_2_for_a_misspelt_key_through_snakemake(tmp_path):
    """The whole of what `snakemake` prints (issue 41: an 85-line schema dump and exit status 1 for a misspelt key of
    an overlay, 3,019 lines for a misspelt top-level key, 24 lines of MissingRuleException for a misspelt target)."""
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "typo.yaml").write_text("runs:\n  cifar10-resnet18-nt:\n    epoch: 3\n")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", "config/smoke.yaml",
                           "config/typo.yaml"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    said = _lines(done.stdout + done.stderr)
    assert done.returncode == 2 and len(said) <= 3, said
    assert said[-1].startswith(PREFIX + "invalid configuration: runs.cifar10-resnet18-nt.epoch: unknown key(s) "
                               "['epoch']; allowed: [") and said[-1].endswith("did you mean 'epochs'?"), said


# --------------------------------------------------------------------------------------- the jobs' interpreter


def _marker(work: Path) -> Path:
    return work / "data" / ".ready" / "digits"


@pytest.mark.slow
def test_jobs_run_under_snakemakes_python_with_nothing_on_path(tmp_path):
    """`.venv/bin/snakemake` with only /usr/bin:/bin on PATH (issue 41: every job failed with `exec: tradeoff: not
    found`, in its log only, after Snakemake had deleted its outputs)."""
    work = workflow_copy(tmp_path / "w")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(BIN / "snakemake"), "data/.ready/digits", "--cores", "1", "--configfile",
                           "config/smoke.yaml"], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert _marker(work).is_file()
    log = (work / "results" / "smoke" / "logs" / "download" / "digits.history.log").read_text()
    assert "start: tradeoff --log" in log  # tradeoff's own header: it ran


DRIVER_PATCHED = r"""
import sys
{patch}
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""

BLOCK_TRADEOFF = r"""
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "tradeoff" or name.startswith("tradeoff."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
"""


@pytest.mark.slow
def test_a_job_that_cannot_start_says_so_and_a_snakemake_without_tradeoff_deletes_nothing(tmp_path):
    """The shell of every job checks its interpreter before `exec`, and says so in Snakemake's own output (not only in
    the job's log); a Snakemake whose Python cannot import tradeoff (a Snakemake of another environment) stops
    when it reads the Snakefile, in one line, before any job: the output it would have remade is untouched."""
    work = workflow_copy(tmp_path / "w")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    args = ["data/.ready/digits", "--cores", "1", "--configfile", "config/smoke.yaml"]
    gone = DRIVER_PATCHED.format(patch="sys.executable = '/nonexistent/python3'")
    done = subprocess.run([sys.executable, "-c", gone, *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 1
    assert "tradeoff: cannot start the job: no Python at /nonexistent/python3 (the one that runs Snakemake)" in \
        done.stderr, done.stderr[-3000:]
    marker = _marker(work)
    marker.parent.mkdir(parents=True)
    marker.write_text("kept\n")
    before = marker.stat().st_mtime_ns
    blocked = DRIVER_PATCHED.format(patch=BLOCK_TRADEOFF)
    done = subprocess.run([sys.executable, "-c", blocked, *args, "--forcerun", "download"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    said = _lines(done.stderr)
    assert done.returncode == 1 and said[-1].startswith(
        f"tradeoff: cannot start any job: the Python that runs Snakemake ({sys.executable}) cannot import tradeoff"), \
        said
    assert "Traceback" not in done.stderr
    assert marker.read_text() == "kept\n" and marker.stat().st_mtime_ns == before


def test_a_command_that_names_no_config_reads_the_workflow_it_runs_in(tmp_path):
    """Not the config of the checkout the package was installed from: in a clone (or copy) beside it, `tradeoff
    export-dvc` wrote the first checkout's dvc.yaml."""
    work = workflow_copy(tmp_path / "w")
    (work / "sub").mkdir()
    assert cli.default_config(work) == work / "config" / "config.yaml"
    assert cli.default_config(work / "sub") == work / "config" / "config.yaml"
    assert cli.default_config(tmp_path) == cfg.DEFAULT_CONFIG
    done = subprocess.run([str(BIN / "tradeoff"), "export-dvc"], cwd=work / "sub", capture_output=True, text=True,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and (work / "dvc.yaml").is_file() and (work / "jobs.json").is_file(), done.stderr


# ---------------------------------------------------------------------------------------- evaluate --model

BAD_MODELS = {  # the model FUNCTION() builds -> what its one line must say (after the file and function)
    "rgb": ("nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(10))",
            r"a batch of digits's images \(2×1×8×8, in \[0, 1\]\) made it raise RuntimeError: .*; expected a model that "
            r"takes 1×8×8 images and returns logits of shape \(2, 10\) for digits's 10 classes"),
    "classes": ("nn.Sequential(nn.Flatten(), nn.Linear(64, 100))",
                r"it returns 100 outputs per image, but digits has 10 classes; expected logits of shape \(2, 10\)"),
    "nan": ("Scaled(nn.Sequential(nn.Flatten(), nn.Linear(64, 10)), float('nan'))",
            r"its outputs on a batch of digits's images \(2×1×8×8, in \[0, 1\]\) are not finite \(NaN or infinite\)"),
    "3d": ("nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Unflatten(1, (10, 1)))",
           r"it returned a tensor of shape \(2, 10, 1\); expected logits of shape \(2, 10\)"),
    "tuple": ("Pair(nn.Sequential(nn.Flatten(), nn.Linear(64, 10)))",
              r"it returned a tuple, not a tensor; expected logits of shape \(2, 10\)"),
}
MODEL_FILE = """
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, net, factor):
        super().__init__()
        self.net, self.factor = net, factor

    def forward(self, x):
        return self.net(x) * self.factor


class Pair(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net(x)
        return out, out


def build():
    torch.manual_seed(0)
    return {model}
"""


def _workflow(tmp_path: Path) -> tuple[Path, list[str]]:
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "local.yaml").write_text(f"paths: {{data: {data_root()}}}\n")
    return work, [a for f in (*SMOKE, "config/local.yaml") for a in ("--config", f)]


@pytest.mark.parametrize("kind", list(BAD_MODELS))
def test_evaluate_model_checks_the_model_with_one_forward_pass_before_the_suite(kind, tmp_path, monkeypatch, capsys):
    """Issue 41: a model for 3×32×32 images evaluated on digits gave a 57-line PyTorch traceback; one with 100 outputs
    on a 10-class dataset was silently evaluated (6.7%)."""
    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    source, expected = BAD_MODELS[kind]
    path = tmp_path / f"{kind}.py"
    path.write_text(MODEL_FILE.format(model=source))
    status = cli.main(configs + ["evaluate", "--model", f"{path}:build", "--dataset", "digits", "--attack", "pgd20",
                                 "--name", kind])
    err = _lines(capsys.readouterr().err)
    assert status == 1 and len(err) == 1, err
    assert err[0].startswith(f"tradeoff: UserModelError: {path}:build(): "), err
    assert re.search(expected, err[0]), err[0]
    assert "Traceback" not in err[0] and not (work / "results" / "smoke" / "metrics" / kind).exists()


def test_evaluate_model_names_its_file_in_the_header(tmp_path, monkeypatch, capsys):
    """The first line of `evaluate --model` named the file as `None`."""
    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    path = tmp_path / "good.py"
    path.write_text(MODEL_FILE.format(model="nn.Sequential(nn.Flatten(), nn.Linear(64, 10))"))
    assert cli.main(configs + ["evaluate", "--model", f"{path}:build", "--dataset", "digits", "--attack", "clean",
                               "--name", "good"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"good: {path} as python:build on digits") and "None" not in first, first


# ------------------------------------------------------------------------------------------ damaged checkpoints


def _saved(path: Path) -> bytes:
    torch.save({"model": {"w": torch.arange(40000, dtype=torch.float32)}, "meta": "{}"}, path)
    return path.read_bytes()


@pytest.mark.parametrize("cut", [0.02, 0.31, 0.5, 0.99])
def test_a_truncated_checkpoint_is_one_line_that_says_truncated(cut, tmp_path):
    """Wherever a copy stopped: PyTorch's own errors differ with the place (issue 41: "OSError: [Errno 22] Invalid
    argument" for one of them)."""
    path = tmp_path / "model.pt"
    data = _saved(path)
    path.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(checkpoint.CheckpointError) as info:
        checkpoint.load(path)
    said = str(info.value)
    assert said.startswith(f"cannot load checkpoint {path}: it is truncated: a PyTorch checkpoint cut short (") and \
        "\n" not in said, said


@pytest.mark.parametrize(("content", "expected"), [
    (b"model weights, honest\n" * 10, "it is not a checkpoint: neither a PyTorch archive (zip) nor a pickle (it begins "
                                      "with b'model we'"),
    (b"hello", "it is not a checkpoint: neither a PyTorch archive (zip) nor a pickle"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "it is not a checkpoint: neither a PyTorch archive (zip) nor a pickle"),
])
def test_a_file_that_is_no_checkpoint_is_one_line_that_says_not_a_checkpoint(content, expected, tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(f"cannot load checkpoint {path}: {expected}")):
        checkpoint.load(path)


def test_a_zip_that_is_not_pytorchs_and_a_cut_legacy_pickle_are_named_as_such(tmp_path):
    import zipfile

    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("weights.txt", "0.1 0.2")
    with pytest.raises(checkpoint.CheckpointError, match="it is not a checkpoint: a zip archive without PyTorch's"):
        checkpoint.load(path)
    torch.save({"w": torch.zeros(5000)}, path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="it is truncated: a pickle cut short"):
        checkpoint.load(path)


def test_evaluate_checkpoint_of_a_truncated_file_is_one_line(tmp_path, monkeypatch, capsys):
    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    path = tmp_path / "mine.pt"
    from tradeoff import models

    torch.save(models.create_model("small_cnn", 10, in_channels=1, image_size=8).state_dict(), path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 31 // 100])
    assert cli.main(configs + ["evaluate", "--checkpoint", str(path), "--arch", "small_cnn", "--dataset", "digits",
                               "--attack", "clean"]) == 1
    err = _lines(capsys.readouterr().err)
    assert err == [f"tradeoff: CheckpointError: cannot load checkpoint {path}: it is truncated: a PyTorch checkpoint "
                   f"cut short ({path.stat().st_size} bytes, without the archive's end; a copy or download that "
                   "stopped?)"], err


# -------------------------------------------------------------------------------------------- gpu-check's word


def _report(**parts) -> dict:
    report = {"device": "cpu", "cpu_only": True, "scale": "smoke", "ok": False, "budget_s": 60, "tolerances": {},
              "sections": {k: {"title": t, "status": "stopped", "note": "out of its share"}
                           for k, t, _ in gpucheck.SECTIONS},
              "imports": {}, "methods": {}, "bench_train": [], "recalibrated": {}, "bench_eval": {}, "targets": {},
              "rehearsal": {}, "bf16_against_fp32": {}, "seconds": 60.0, "provenance": {}}
    report.update(parts)
    report["ok"] = check_report.passed(report)
    return report


def test_gpu_check_that_measured_nothing_fails_and_says_so_on_the_console_and_in_the_report(tmp_path, monkeypatch,
                                                                                           capsys):
    """Issue 41: with every section out of time, the console said "every comparison within its tolerance", exit 0."""
    nothing = _report()
    assert not check_report.measured(nothing) and not nothing["ok"]
    assert check_report.verdict(nothing).startswith("NOTHING MEASURED")
    monkeypatch.setattr(gpucheck, "gpu_check", lambda catalog, **kwargs: nothing)
    overlay = tmp_path / "paths.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n")
    files = [a for f in (ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay)
             for a in ("--config", str(f))]
    assert cli.main([*files, "gpu-check", "--cpu-only", "--out", str(tmp_path / "out")]) == 1
    console = capsys.readouterr().out.strip()
    report = next((tmp_path / "out").glob("gpu-check-*.md")).read_text().splitlines()[2]
    said = check_report.verdict(nothing)
    assert console.startswith(f"gpu-check on cpu: {said}; report: ") and f"; {said}; " in report, (console, report)
    assert "within its tolerance" not in console + report


def test_gpu_checks_console_and_report_say_the_same_whatever_was_measured():
    bench = [{"label": "x", "run": "r", "precision": "fp32", "channels_last": False, "batch_size": 1, "steps": 1,
              "images_per_s": 1.0, "seconds_per_epoch": 1.0, "achieved_tflops": 0.0, "fraction_of_peak": None}]
    benches_only = _report(bench_train=bench)
    assert benches_only["ok"] and check_report.verdict(benches_only).startswith("no step comparison finished;")
    step = {"ok": True, "loss_diff": 0.0, "cosine": 1.0}
    compared = _report(methods={"nt": {"run": "r", "gpu_vs_cpu": step, "bf16_vs_fp32": step, "syncs_per_step": None}})
    said = check_report.verdict(compared)
    assert said.startswith("every comparison within its tolerance; sections not done: a, b, c")
    for report in (benches_only, compared, _report()):
        assert f"; {check_report.verdict(report)}; " in check_report.format_report(report).splitlines()[2]


# ---------------------------------------------------------------------------------------------- small ones


def test_every_negation_in_gitignore_names_a_tracked_file():
    """`.gitignore` kept `!/results/.gitkeep`, a file that is not tracked (a fresh clone has no results/)."""
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    negated = [line[1:].lstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines() if line.startswith("!")]
    assert all(path in tracked for path in negated), negated


def test_config_readme_points_at_sections_the_readme_has():
    """config/README.md's pointers into the top-level README ("the top-level README's "Extending", "An attack"")
    name a heading or a bold paragraph that is there (one named "Adding an attack", which is not)."""
    readme = (ROOT / "README.md").read_text()
    places = set(re.findall(r"^#+ (.+)$", readme, flags=re.M)) | set(re.findall(r"\*\*(.+?)\.\*\*", readme))
    text = (ROOT / "config" / "README.md").read_text().replace("\n", " ")
    pointers = re.findall(r"top-level README(?:'s|,) ((?:\"[^\"]+\"(?:, )?)+)", text)
    assert pointers
    for pointer in pointers:
        for name in re.findall(r"\"([^\"]+)\"", pointer):
            assert name in places, f"config/README.md points to the README's {name!r}, which it does not have"
