"""Typed through: outside tradeoff.config, nothing reads a target's settings or the configuration by key. A target
is a :class:`~tradeoff.core.targets.TargetSpec` (fields), what else the catalog knows is a Catalog property or query;
the raw ``catalog.config`` and the targets as written are the resolver's alone (tradeoff.config).

The check reads every module's syntax tree: a subscript or a ``.get``/``in`` with a string constant on
``<catalog>.config``, on ``<catalog>.audit`` (an :class:`~tradeoff.core.spec.AuditSpec`: fields), on
``<catalog>.targets[...]``, or on a name bound to a target (``target = catalog.targets[n]``, ``for name, target in
catalog.targets.items()``, a parameter named ``target``), and names each file:line."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "src" / "tradeoff"
#: where the settings are read as written: the resolver
OWNER = PACKAGE / "config"
#: modules another change is moving now; their reads are listed for it to switch (issue 30: cli/ is being split)
PENDING: set = set()
#: calls that return a catalog (a name bound to their result is a catalog)
CATALOG_CALLS = {"load_catalog", "resolve", "with_external", "demo_catalog"}


def _name(node: ast.AST) -> str | None:
    """The identifier an expression ends with: ``catalog`` of ``self.catalog``, ``base`` of ``base``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


class _Reads(ast.NodeVisitor):
    """Reads by key of the configuration or of a target, in one module."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.catalogs: set[str] = set()
        self.targets: set[str] = {"target"}

    def _catalog(self, node: ast.AST) -> bool:
        name = _name(node)
        return name is not None and ("catalog" in name.lower() or name in self.catalogs)

    def _settings(self, node: ast.AST) -> str | None:
        """What ``node`` is, if it holds settings as written: 'config', 'a target', or None."""
        if isinstance(node, ast.Attribute) and node.attr == "config" and self._catalog(node.value):
            return "the configuration (catalog.config)"
        if isinstance(node, ast.Attribute) and node.attr == "audit" and self._catalog(node.value):
            return "the audit's settings (catalog.audit: an AuditSpec)"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                node.value.attr == "targets" and self._catalog(node.value.value):
            return "a target (catalog.targets[...])"
        if isinstance(node, ast.Name) and node.id in self.targets:
            return f"a target ({node.id})"
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """A function's names are its own: a target bound in one is not a target in the next."""
        kept = set(self.targets), set(self.catalogs)
        self.generic_visit(node)
        self.targets, self.catalogs = kept

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Call) and _name(value.func) in CATALOG_CALLS:
            self.catalogs |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if self._settings(value) and self._settings(value).startswith("a target"):
            self.targets |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        source = node.iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
                isinstance(source.func.value, ast.Attribute) and source.func.value.attr == "targets" and \
                self._catalog(source.func.value.value):
            if source.func.attr == "items" and isinstance(node.target, ast.Tuple) and \
                    isinstance(node.target.elts[1], ast.Name):
                self.targets.add(node.target.elts[1].id)
            elif source.func.attr == "values" and isinstance(node.target, ast.Name):
                self.targets.add(node.target.id)
        self.generic_visit(node)

    def _comprehension(self, node: ast.AST) -> None:
        for gen in node.generators:  # type: ignore[attr-defined]
            self.visit_For(ast.For(target=gen.target, iter=gen.iter, body=[], orelse=[]))
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Subscript(self, node: ast.Subscript) -> None:
        what = self._settings(node.value)
        if what and _is_key(node.slice):
            self.found.append((node.lineno, f"[{node.slice.value!r}] on {what}"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args and _is_key(node.args[0]):
            what = self._settings(func.value)
            if what:
                self.found.append((node.lineno, f".get({node.args[0].value!r}) on {what}"))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if _is_key(node.left) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            for right in node.comparators:
                what = self._settings(right)
                if what:
                    self.found.append((node.lineno, f"{node.left.value!r} in {what}"))
        self.generic_visit(node)


def key_reads(path: Path) -> list[str]:
    """Each read by key of the configuration or a target in a module: 'file:line: what'."""
    reads = _Reads()
    reads.visit(ast.parse(path.read_text(), str(path)))
    where = path.relative_to(ROOT)
    return [f"{where}:{line}: {what}" for line, what in sorted(reads.found)]


def modules(pending: bool = False) -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if OWNER not in p.parents and (p in PENDING) == pending]


def test_no_module_outside_config_reads_a_target_or_the_config_by_key():
    found = [read for path in modules() for read in key_reads(path)]
    assert found == [], "settings read by key outside tradeoff.config (use the spec's fields or a Catalog " \
                        "query):\n" + "\n".join(found)


@pytest.mark.parametrize("code, read", [
    ("def f(catalog):\n    return catalog.targets[name]['rows']\n", "['rows'] on a target"),
    ("def f(catalog):\n    target = catalog.targets[name]\n    return target.get('note')\n",
     ".get('note') on a target"),
    ("def f(catalog):\n    for n, t in catalog.targets.items():\n        print(t['kind'])\n",
     "['kind'] on a target (t)"),
    ("def f(self):\n    return self.catalog.config.get('resources')\n", ".get('resources') on the configuration"),
    ("def f(root):\n    base = load_catalog([root])\n    return base.config['scale_map']\n",
     "['scale_map'] on the configuration"),
    ("def f(target):\n    return 'analysis' in target\n", "'analysis' in a target"),
    ("def f(catalog):\n    return catalog.audit['surrogates']\n", "['surrogates'] on the audit's settings"),
    ("def f(catalog):\n    return [r for t in catalog.targets.values() for r in t['rows']]\n", "['rows'] on a target"),
])
def test_the_check_finds_a_read_by_key(code, read):
    found = _Reads()
    found.visit(ast.parse(code))
    assert found.found and read in found.found[0][1], (code, found.found)


def test_the_check_leaves_fields_and_other_dicts_alone():
    code = ("def f(catalog, spec):\n    target = catalog.targets[name]\n    x = target.rows[0].run\n"
            "    y = spec['eps']\n    z = catalog.runtime_settings.eval_unit\n    return {'a': 1}['a']\n")
    found = _Reads()
    found.visit(ast.parse(code))
    assert found.found == []


def test_a_target_is_a_frozen_spec_that_gives_back_what_was_written():
    from tradeoff import config as cfg
    from tradeoff.core.targets import Row, TargetSpec

    files = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]
    catalog = cfg.load_catalog(files)
    for name, target in catalog.targets.items():
        assert isinstance(target, TargetSpec) and all(isinstance(r, Row) for r in target.rows)
        assert target.as_dict() == catalog.config["targets"][name], name  # as written: digests and cache unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.targets["table1a"].note = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalog.targets["table1a"].columns["x"] = "clean"  # type: ignore[index]


def test_the_catalog_answers_what_the_modules_read_of_the_configuration():
    """The queries that replace the reads by key: each answers what the configuration says, at a smaller scale too."""
    from tradeoff import config as cfg
    from tradeoff.core.spec import thaw

    smoke = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    raw = smoke.config
    assert smoke.runtime_settings.eval_unit == raw["runtime"].get("eval_unit", "attack")
    assert smoke.with_runtime(eval_unit="run").runtime_settings.eval_unit == "run"
    assert smoke.runtime_settings.eval_unit == raw["runtime"].get("eval_unit", "attack")  # the copy, not the original
    assert smoke.generated_data is bool(raw["scale_map"].get("generated_data"))
    assert smoke.test_examples == raw["scale_map"].get("test_examples") is not None
    assert smoke.scaled_dataset("cifar10") == raw["scale_map"]["dataset"] != "cifar10"
    assert smoke.standard_budget("cifar10", "linf") == raw["datasets"]["cifar10"]["linf"]
    assert smoke.standard_budget("cifar10", "l7") is None
    assert smoke.written_attack("pgd20") == raw["attacks"]["pgd20"] and smoke.written_attack("nothing") == {}
    run = next(iter(raw["runs"]))
    assert smoke.written_run(run)["method"] == {**raw.get("train_presets", {}).get(
        raw["runs"][run].get("preset"), {}).get("method", {}), **raw["runs"][run].get("method", {})}
    assert smoke.written_run("no-such-run") is None
    name = next(iter(raw["protocols"]))
    assert smoke.protocol_title(name) == raw["protocols"][name]["title"]
    assert smoke.audit.as_dict() == raw["audit"] and thaw(smoke.resources) == (raw.get("resources") or {})
    assert smoke.pretrained_file("no-such-arch") is None


def test_a_target_key_that_no_target_has_is_refused_naming_it():
    from tradeoff import config as cfg

    config = cfg.load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    config["targets"]["table1a"]["caption"] = "a caption"  # the schema lets it through; the spec has no such field
    with pytest.raises(cfg.ConfigError, match=r"^targets\.table1a\.caption: unknown setting; allowed: \['kind', "):
        cfg.resolve(config)


if __name__ == "__main__":  # the reads left, the pending modules' included
    for path in modules() + modules(pending=True):
        print("\n".join(key_reads(path)))
    sys.exit(0)
