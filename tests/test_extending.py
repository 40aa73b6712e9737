"""Adding a method as README "Extending" and docs/extending.md say, followed as written (issue 39): the worked
example's module and config rows go into a copy of the repository, `tradeoff check-config` passes, `tradeoff plan`
prices its jobs, `tradeoff export-dvc` adds its stages and `dvc status` lists those and the resolve stage only (no
existing stage changed), and its training runs at the smoke scale. The same module, packaged as docs/extending.md
says, is a method of an installed plug-in."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, env, workflow_copy

from tradeoff.pipeline import dvc_export as tdvc

DOC = ROOT / "docs" / "extending.md"
#: a fenced block with the file it belongs to: ```python title="src/tradeoff/methods/mart.py"```; a YAML block
#: with ``under="design:"`` goes under that top-level key of the file
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"(?: under="([^"]+)")?\n(.*?)^```$', re.M | re.S)
SMOKE = ["--config", "config/config.yaml", "--config", "config/smoke.yaml"]
RUN = "cifar10-resnet18-mart"


def _blocks() -> list[tuple[str, str, str | None, str]]:
    return BLOCK.findall(DOC.read_text())


def _module() -> tuple[str, str]:
    (path, text), = [(title, text) for lang, title, _, text in _blocks() if lang == "python"]
    return path, text


def _apply(work: Path) -> None:
    """The worked example's files and rows, as written: the module in its file, each YAML block right under its key."""
    path, text = _module()
    (work / path).write_text(text)
    for lang, title, under, text in _blocks():
        if lang == "yaml":
            config = work / title
            lines = config.read_text().splitlines(keepends=True)
            at = lines.index(under + "\n") + 1
            config.write_text("".join(lines[:at]) + text + "".join(lines[at:]))


def _run(cmd: list[str], cwd: Path, extra: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env={**env(), **(extra or {})}, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return out


def test_readme_says_what_docs_extending_shows():
    """README's "Extending" names the one module, its decorator and base, the cost it declares, the commands, and the
    worked example; the example holds the module and the config rows the slow test applies."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Extending"):]
    section = section[:section.index("\n## ", 1)]
    for said in ("`src/tradeoff/methods/<name>.py`", "`@register`", "`Adversarial`", "`passes`", "docs/extending.md",
                 "`tradeoff check-config`", "`tradeoff plan`", "`tradeoff export-dvc`", "`dvc status`", "torch",
                 "`tradeoff.methods`"):
        assert said in section, said
    assert not any(wrong in section for wrong in ("methods/declared", "methods/registry.py", "declared/__init__"))
    path, text = _module()
    assert path == "src/tradeoff/methods/mart.py" and "@register" in text and "def passes" in text
    assert {(title, under) for lang, title, under, _ in _blocks() if lang == "yaml"} == {
        ("config/config.yaml", "design:"), ("config/config.yaml", "targets:")}


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A git repository copied from this one (its src/ too: the jobs run the copy's code), with the smoke scale's
    pipeline of one figure built by `dvc repro` and committed."""
    work = workflow_copy(tmp_path_factory.mktemp("extending") / "repo")
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "docs", work / "docs")
    shutil.copy2(ROOT / "README.md", work / "README.md")
    (work / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    code = {"PYTHONPATH": str(work / "src")}  # `tradeoff` and every stage import the copy's package
    _run(["git", "init", "-q"], work)
    _run(["dvc", "init", "-q"], work)
    _run(["tradeoff", *SMOKE, "export-dvc", "--targets", "figure3b"], work, code)
    _run(["dvc", "repro"], work, code)
    _run(["git", "add", "-A"], work)
    _run(["git", "commit", "-qm", "the smoke pipeline of figure3b"], work)
    return work, code


@pytest.mark.slow
def test_a_method_added_as_docs_extending_says(repository):
    work, code = repository
    assert "up to date" in _run(["dvc", "status"], work, code).stdout
    _apply(work)
    assert _run(["git", "status", "--porcelain"], work).stdout.split() == [
        "M", "config/config.yaml", "??", "src/tradeoff/methods/mart.py"]  # one module and its rows, nothing else

    _run(["tradeoff", "check-config"], work, code)  # as written: the paper's catalog
    _run(["tradeoff", *SMOKE, "check-config"], work, code)
    plan = _run(["tradeoff", "plan", "mart"], work, code).stdout
    train = next(line for line in plan.splitlines() if line.startswith(f"| train {RUN} |"))
    assert train.split("|")[3].strip() == "formula" and float(train.split("|")[2]) > 0, plan  # priced by its passes
    assert "not priced" not in plan, plan

    _run(["tradeoff", *SMOKE, "export-dvc", "--targets", "figure3b", "mart"], work, code)
    status = set(json.loads(_run(["dvc", "status", "--json"], work, code).stdout))
    evaluations = {f"evaluate@{key}" for key in json.loads((work / "jobs.json").read_text())["evaluate"]
                   if key.startswith(f"{RUN}~")}
    assert evaluations and status == {"resolve", f"train-mart@{RUN}", "table@mart"} | evaluations, status
    print(f"dvc status after adding MART: {sorted(status)}")

    ran = re.findall(r"^Running stage '([^']+)':$", _run(["dvc", "repro", "table@mart"], work, code).stdout, re.M)
    assert ran[0] == "resolve" and set(ran) == status, ran  # a smoke training, its evaluation, its table
    assert (work / "results" / "smoke" / "checkpoints" / RUN / "model.pt").is_file()
    assert "mart" in (work / "results" / "smoke" / "tables" / "mart.md").read_text()


def test_the_training_stage_of_a_method_lists_no_other_method_and_no_list_of_them():
    """TRADES' training stage depends on its module and the methods' shared ones (base, common, optim), not on
    another method's module nor on a module that every new method would edit (there is none: the package is
    discovered)."""
    deps = tdvc.code_deps("train", frozenset({("method", "trades"), *tdvc._every("attack")}))
    methods = {d for d in deps if d.startswith("src/tradeoff/methods")}
    assert methods == {f"src/tradeoff/methods/{m}.py" for m in ("__init__", "base", "common", "optim", "trades")}


@pytest.mark.slow
def test_an_installed_plugin_adds_its_method(tmp_path):
    """docs/extending.md's pyproject.toml and module, installed with pip into a folder on the path (as `pip install
    .` would into an environment): its method is in the registry through the entry point `tradeoff.methods`, the
    configuration resolves a run of it without PyTorch, `tradeoff plan` prices it, and one training step runs."""
    (toml,) = [text for lang, title, _, text in _blocks() if lang == "toml" and title == "pyproject.toml"]
    package = tmp_path / "tradeoff-mart"
    package.mkdir()
    (package / "pyproject.toml").write_text(toml)
    (package / "tradeoff_mart.py").write_text(_module()[1])
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "--target", str(site), str(package)], tmp_path)
    overlay = tmp_path / "mart.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n"
                       f"runs:\n  {RUN}: {{preset: generalist-resnet18, dataset: cifar10, arch: resnet18,\n"
                       f"    method: {{name: mart, beta: 6.0, attack: pgd10-rst}}}}\n"
                       "targets:\n  mart: {kind: table, title: MART, rows: [{key: mart, run: " + RUN + "}],\n"
                       "    columns: {nat: clean}}\n")
    files = [str(ROOT / "config" / "config.yaml"), str(ROOT / "config" / "smoke.yaml"), str(overlay)]
    plugin = {"PYTHONPATH": str(site)}
    code = ("import sys\n"
            "from tradeoff import config as cfg\n"
            "from tradeoff.methods import METHODS\n"
            "assert METHODS['mart'].__module__ == 'tradeoff_mart', METHODS['mart']\n"
            "catalog = cfg.load_catalog(sys.argv[1:])\n"
            f"assert catalog.runs[{RUN!r}].method.name == 'mart'\n"
            "assert 'torch' not in sys.modules\n")
    _run([sys.executable, "-c", code, *files], tmp_path, plugin)
    config = [a for f in files for a in ("--config", f)]
    plan = _run(["tradeoff", *config, "plan", "mart"], tmp_path, plugin).stdout
    assert f"| train {RUN} |" in plan and "not priced" not in plan, plan
    step = ("import sys, torch\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from methods_support import CPU, PlainCNN, digits, method_spec\n"
            "from tradeoff.methods import METHODS\n"
            "torch.manual_seed(0)\n"
            "method = METHODS['mart'](method_spec('mart'), PlainCNN, CPU)\n"
            "x, y = digits(32)\n"
            "out = method.train_step(x, y)\n"
            "assert torch.isfinite(out['loss']) and 0 <= int(out['correct']) <= 32, out\n")
    _run([sys.executable, "-c", step, str(ROOT / "tests")], tmp_path,
         {**plugin, "TRADEOFF_TEST_DATA": os.environ.get("TRADEOFF_TEST_DATA", str(tmp_path / "data"))})


ATTACK_PLUGIN = '''"""An attack of an installed package: one module, its class its own declaration and code."""
from tradeoff.attacks.base import Attack, register
from tradeoff.attacks.declared.base import SEED, declare
from tradeoff.core.params import Params
from tradeoff.core.passes import F


@register
@declare
class Shift(Attack):
    name = "shift"
    parameters = Params(SEED)

    @classmethod
    def passes(cls, p, classes):
        return F

    def _perturb(self, x, y):
        return (x + self.eps).clamp(0, 1)
'''


def test_an_attack_of_an_installed_package_is_one_module_read_without_pytorch(tmp_path):
    """An entry point of the group ``tradeoff.attacks`` (a distribution on the path): its declaration is read
    without PyTorch and priced by its passes, and the same class attacks."""
    site = tmp_path / "site"
    (site / "shift_attack-0.1.dist-info").mkdir(parents=True)
    (site / "shift_attack-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: shift-attack\n"
                                                                 "Version: 0.1\n")
    (site / "shift_attack-0.1.dist-info" / "entry_points.txt").write_text("[tradeoff.attacks]\nshift = shift_attack\n")
    (site / "shift_attack.py").write_text(ATTACK_PLUGIN)
    code = ("import sys\n"
            "from tradeoff.attacks.declared import DECLARED\n"
            "from tradeoff.pipeline.costs import evaluation_passes\n"
            "assert DECLARED['shift'].__module__ == 'shift_attack'\n"
            "assert evaluation_passes({'type': 'shift', 'eps': 0.1}, 10).f == 3\n"  # clean, its pass, classified
            "assert 'torch' not in sys.modules\n"
            "import torch\n"
            "from tradeoff.attacks import ATTACKS, from_spec\n"
            "from tradeoff.core.spec import AttackSpec\n"
            "assert ATTACKS['shift'] is DECLARED['shift']\n"
            "attack = from_spec(AttackSpec.from_dict({'type': 'shift', 'eps': 0.1}), torch.nn.Flatten())\n"
            "x = torch.zeros(2, 3)\n"
            "assert torch.allclose(attack.perturb(x, torch.zeros(2, dtype=torch.long)), x + 0.1)\n")
    _run([sys.executable, "-c", code], tmp_path, {"PYTHONPATH": str(site)})
