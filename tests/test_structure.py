"""The house: packages in layers (which package may import which: the table below, shown in docs/architecture.md),
no import cycles (every module imports alone), one owner of the results layout, one registry per kind of thing, and a
Snakemake workflow that passes its own linter. ``python tests/test_structure.py`` prints what each package imports
today, with its floor."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, run, workflow_copy

SRC = ROOT / "src" / "tradeoff"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every tradeoff module that ``name`` imports, at its top or inside a function."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


#: package -> the packages it may import (besides itself). The order is the layers' order, floor first.
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "storage": {"core"},
    "models": {"core", "storage"},
    "attacks": {"core"},
    "data": {"core", "storage"},
    "methods": {"core", "storage", "data", "attacks"},
    "config": {"core", "storage", "data", "models", "attacks", "methods"},
    "evaluation": {"core", "storage", "data", "models", "attacks"},
    "report": {"core", "storage", "models", "config"},
    "results": {"core", "storage"},
    "training": {"core", "storage", "data", "models", "attacks", "methods"},
    "analysis": {"core", "storage", "data", "models", "attacks", "config", "evaluation"},
    "audit": {"core", "storage", "data", "models", "attacks", "config", "evaluation", "report"},
    "pipeline": {"core", "storage", "data", "models", "attacks", "methods", "config", "evaluation", "report",
                 "results", "training", "analysis", "audit"},
}
MAY_IMPORT["cli"] = set(MAY_IMPORT)


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_top_level_holds_packages_only_and_every_package_is_in_the_table():
    entries = sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__" and not p.name.endswith(".egg-info"))
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(MAY_IMPORT), "a package missing from the layer table, or a table row without a package"
    assert set(entries) == packages | {"__init__.py"}, "a module loose at the top level: put it in its package"


def test_every_import_runs_down_the_table():
    wrong = []
    for module in sorted(_modules()):
        source = package_of(module)
        for target in sorted(_imports(module, _modules()[module], _modules())):
            to = package_of(target)
            if to and source and to != source and to not in MAY_IMPORT[source]:
                wrong.append(f"{module} imports {target} ({source} may not import {to})")
            if source and not to and target != "tradeoff":
                wrong.append(f"{module} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_table_is_a_layering_at_most_10_tall():
    height: dict[str, int] = {}

    def floor(package: str, path: tuple[str, ...] = ()) -> int:
        assert package not in path, f"the table has a circle: {' -> '.join(path + (package,))}"
        if package not in height:
            height[package] = 1 + max((floor(p, path + (package,)) for p in MAY_IMPORT[package]), default=0)
        return height[package]

    assert max(floor(p) for p in MAY_IMPORT) <= 10, height


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_each_package_says_what_it_owns_and_what_it_may_import(package):
    doc = ast.get_docstring(ast.parse((SRC / package / "__init__.py").read_text())) or ""
    said = re.search(r"May import: (.*?)\.?\s*$", doc, re.S)
    assert said and len(doc) > len(said.group(0)) + 40, f"{package}/__init__.py: say what it owns, then 'May import:'"
    named = _packages_named(said.group(1))
    assert named == MAY_IMPORT[package], (package, named ^ MAY_IMPORT[package])


def _packages_named(text: str) -> set[str]:
    """The packages a "May import" list names: "nothing", "every package", "every package but X", or a list."""
    text = re.sub(r"\(.*?\)", "", text).replace("\n", " ").strip(" .`—")
    if text == "" or text.startswith("nothing"):
        return set()
    if text == "every package":
        return set(MAY_IMPORT) - {"cli"}
    if text == "every package but cli":  # the pipeline's: all but itself and the CLI above it
        return set(MAY_IMPORT) - {"cli", "pipeline"}
    return {w.strip(" `") for w in text.split(",")}


def test_docs_architecture_shows_the_same_table():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]* \| ([^|]*) \|$", text, re.M))
    assert set(rows) == set(MAY_IMPORT), "docs/architecture.md's layer table lists other packages"
    for package, cell in rows.items():
        listed = _packages_named(cell)
        assert listed == MAY_IMPORT[package], (package, listed ^ MAY_IMPORT[package])


def _top_level_targets(name: str, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """What one import statement of module ``name`` loads: modules of this package (a name of a package's lazy
    ``_NAMES`` table resolved to its module) or a third-party package's top-level name."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = name.split(".") if modules[name].name == "__init__.py" else name.split(".")[:-1]
    base = ".".join((package[:len(package) - node.level + 1] if node.level else []) + ([node.module] if node.module
                                                                                         else []))
    lazy = _lazy_names(base, modules)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else lazy.get(a.name, base) for a in node.names]


def _lazy_names(package: str, modules: dict[str, Path]) -> dict[str, str]:
    """A package's ``_NAMES`` table (name -> the module that owns it: tradeoff.data), empty without one."""
    if package not in modules or modules[package].name != "__init__.py":
        return {}
    for node in ast.parse(modules[package].read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_NAMES" for t in node.targets):
            return eval(compile(ast.Expression(node.value), "_NAMES", "eval"), {"dict": dict})  # a literal table
    return {}


def _discovered(name: str, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The modules a top-level ``discover("tradeoff.x")`` (or ``discover(__name__)``) of module ``name`` imports:
    every module of that package (tradeoff.core.plugins)."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "discover" and call.args):
        return []
    arg = call.args[0]
    package = arg.value if isinstance(arg, ast.Constant) else name if getattr(arg, "id", None) == "__name__" else None
    return [m for m in modules if package and m.rpartition(".")[0] == package]


def test_an_import_inside_a_function_is_for_start_up_time():
    """An import sits at the top of its module, unless it loads a heavy package (tradeoff.core.lazy_imports.HEAVY:
    PyTorch, SciPy, ...) that the module's own top-level imports do not load: the one reason, said once there."""
    from tradeoff.core.lazy_imports import HEAVY

    modules = _modules()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    heavy: dict[str, frozenset] = {}

    def loads(target: str) -> frozenset:
        """The heavy packages that importing ``target`` loads through top-level imports."""
        if target.split(".")[0] != "tradeoff":
            return frozenset({target.split(".")[0]} & HEAVY)
        if target not in heavy:
            heavy[target] = frozenset()
            parts, found = target.split("."), set()
            for module in (".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in trees):
                for node in trees[module].body:
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        found.update(*(loads(t) for t in _top_level_targets(module, node, modules)))
                    found.update(*(loads(m) for m in _discovered(module, node, modules)))
            heavy[target] = frozenset(found)
        return heavy[target]

    late = []
    for name, tree in sorted(trees.items()):
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in (n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))):
                if not set().union(*(loads(t) for t in _top_level_targets(name, node, modules))) - loads(name):
                    late.append(f"{modules[name].relative_to(ROOT)}:{node.lineno} {function.name}: {ast.unparse(node)}")
    assert not late, "imported late with no start-up time to save (import it at the top):\n" + "\n".join(late)


def test_the_import_graph_has_no_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    done, stack = set(), []

    def visit(name):
        if name in stack:
            raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(name):] + [name]))
        if name in done:
            return
        stack.append(name)
        for dep in sorted(graph[name]):
            if dep.startswith(name + ".") and name in ("tradeoff",):
                continue  # the package's own __init__ does not import its modules
            visit(dep)
        stack.pop()
        done.add(name)

    for name in graph:
        visit(name)


# The third-party libraries the package imports, loaded once before the forks (importing them is most of an
# interpreter's start-up; tradeoff's own modules are what each fork imports alone).
THIRD_PARTY = ("numpy", "yaml", "torch", "torchvision", "scipy.stats", "matplotlib.pyplot", "pandas")

FORKS = r"""
import importlib, json, os, sys, traceback
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.split(".")[0] == "tradeoff"], "tradeoff imported before the forks"
failed = []
for name in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a fresh interpreter but for the libraries above: no module of tradeoff loaded
        os.close(read)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc()[-2000:].encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        why = said.read().decode()
    if os.waitpid(pid, 0)[1] != 0:
        failed.append([name, why or "exit status"])
print(json.dumps(failed))
"""


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """No import cycle and no module that works only after another: each module of tradeoff imported first, in a
    process of its own (a fork of one that loaded the third-party libraries only)."""
    names = list(_modules())
    out = subprocess.run([sys.executable, "-c", FORKS, ",".join(THIRD_PARTY), *names], capture_output=True,
                         text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_the_import_check_fails_on_a_cycle(tmp_path):
    """The check above can fail: two modules that import each other's names at their tops."""
    for name, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"cyc_{name}.py").write_text(f"from cyc_{other} import VALUE_{other.upper()}\nVALUE_{name.upper()} = 1\n")
    out = subprocess.run([sys.executable, "-c", FORKS, "json", "cyc_a", "json"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    failed = json.loads(out.stdout.splitlines()[-1])
    assert [name for name, _ in failed] == ["cyc_a"] and "ImportError" in failed[0][1]


LAYOUT_WORDS = ("checkpoints", "metrics", "predictions", "curves", "tables", "figures", "analysis", "logs")


def _path_constructions(tree: ast.AST) -> list[int]:
    """Lines that join a path with a layout folder's name: ``x / "metrics"``, ``"metrics" / x``, or a string
    literal that spells a folder inside the results (``"results/metrics/..."``, ``f"{root}/metrics/..."``)."""
    words = set(LAYOUT_WORDS)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            sides = [n.value for n in (node.left, node.right) if isinstance(n, ast.Constant)]
            if any(isinstance(v, str) and v in words for v in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("Path",):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                        any(f"{w}/" in arg.value or arg.value.endswith(f"/{w}") for w in words):
                    lines.append(node.lineno)
    return lines


def test_only_the_results_module_spells_a_results_path():
    """Every path a job reads or writes is built by tradeoff.storage.layout, in Python, in the Snakemake rules and in DVC's
    stages (which tradeoff.pipeline.dvc_export writes from the same functions)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path != SRC / "storage" / "layout.py":
            offenders += [f"{path.relative_to(ROOT)}:{n}" for n in _path_constructions(ast.parse(path.read_text()))]
    words = "|".join(LAYOUT_WORDS)
    spelled = re.compile(rf"""/\s*["']({words})["']|["']({words})["']\s*/|["'](results/)?({words})/""")
    for path in [*(ROOT / "workflow" / "rules").glob("*.smk"), ROOT / "Snakefile"]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if spelled.search(line) and not line.lstrip().startswith("#"):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


RENAMING_FUNCTIONS = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}


def _file_renames(tree: ast.AST) -> list[int]:
    """Lines that rename a file into place: ``os.replace``/``os.rename``/``shutil.move``, or ``Path.replace`` and
    ``Path.rename`` (a ``.replace(x)`` / ``.rename(x)`` call with one argument and no keyword: ``str.replace`` takes
    two, a dataclass's or a spec's ``replace`` takes keywords)."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        if (owner, node.func.attr) in RENAMING_FUNCTIONS:
            lines.append(node.lineno)
        elif node.func.attr in ("replace", "rename") and owner != "dataclasses" and len(node.args) == 1 \
                and not node.keywords:
            lines.append(node.lineno)
    return lines


def test_only_the_atomic_module_renames_a_file_into_place():
    """Every atomic write goes through tradeoff.storage.atomic (atomic_write_bytes/_text, or atomic_path for a library
    that writes the file itself): no other module renames a temporary file over its target by hand."""
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(SRC.rglob("*.py"))
                 if path != SRC / "storage" / "atomic.py" for n in _file_renames(ast.parse(path.read_text()))]
    assert not offenders, "\n".join(offenders)
    caught = _file_renames(ast.parse("import os\nos.replace(a, b)\ntmp.replace(path)\nPath(a).rename(b)\n"
                                     "s.replace('a', 'b')\nspec.replace(seed=1)\ndataclasses.replace(c, x=1)\n"))
    assert caught == [2, 3, 4], caught


def test_the_figure_kinds_are_the_schemas():
    from tradeoff.report.figures import FIGURE_KINDS

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    target = schema["properties"]["targets"]["additionalProperties"]["properties"]
    assert sorted(target["plot"]["enum"]) == FIGURE_KINDS


@pytest.mark.slow
def test_snakemake_lint_is_clean_but_for_the_per_rule_environment(tmp_path):
    """`snakemake --lint` at every scale: nothing but its advice to give each rule a conda environment or a
    container, which config/README.md says why the workflow does not follow (one pinned environment for all)."""
    work = workflow_copy(tmp_path)
    for overlay in ([], ["--configfile", "config/demo.yaml"], ["--configfile", "config/smoke.yaml"]):
        out = run(["snakemake", "--lint", *overlay], work, check=False)
        lints = re.findall(r"^\s+\* (.+?):?$", out.stdout + out.stderr, flags=re.M)
        assert lints and set(lints) == {"Specify a conda environment or container for each rule."}, out.stdout


def test_every_registry_is_one_kind_of_registry_and_refuses_a_name_twice():
    from tradeoff.attacks import ATTACKS
    from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
    from tradeoff.audit.registry import CHECKS
    from tradeoff.core.registry import Registry
    from tradeoff.core.targets import (
        PLOTS,  # figure kinds: declared once, drawn by tradeoff.report (no second registry)
    )
    from tradeoff.data import DATASETS
    from tradeoff.methods import METHODS
    from tradeoff.models import MODELS, PRETRAINED_MODELS

    for registry in (ATTACKS, ATTACK_DECLARATIONS, DATASETS, METHODS, MODELS, PRETRAINED_MODELS, PLOTS, CHECKS):
        assert isinstance(registry, Registry) and registry
    with pytest.raises(ValueError, match="method 'trades' registered twice"):
        METHODS.register(METHODS["trades"])


def test_readme_is_short_and_names_only_files_that_exist():
    """README stays at most 20 KB (longer material lives in docs/), and every repository path it names in backticks
    (docs/, config/, src/, tests/, workflow/) exists in the checkout: no pointer into a folder a clone lacks."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 20_000, f"README.md is {readme.stat().st_size} bytes"
    text = readme.read_text()
    assert "../" not in text, "README points outside the repository"
    named = set(re.findall(r"`((?:docs|config|src|tests|workflow)/[^`\s<>*{}]+)`", text))
    assert len(named) > 10
    missing = sorted(p for p in named if not (ROOT / p.split("::")[0]).exists())
    assert not missing, f"README names files that do not exist: {missing}"


if __name__ == "__main__":  # what each package imports today, and its floor
    used: dict[str, set[str]] = {p: set() for p in MAY_IMPORT}
    for module in _modules():
        if package_of(module):
            used[package_of(module)] |= {package_of(t) for t in _imports(module, _modules()[module], _modules()) if package_of(t)} - {package_of(module)}
    floors: dict[str, int] = {}

    def floor(package: str) -> int:
        if package not in floors:
            floors[package] = 1 + max((floor(p) for p in used[package]), default=0)
        return floors[package]

    for package in sorted(used, key=lambda p: (floor(p), p)):
        print(f"{floor(package)}  {package:<11} imports {', '.join(sorted(used[package], key=floor)) or '-'}")
