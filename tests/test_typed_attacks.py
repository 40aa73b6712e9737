"""No module outside tradeoff.config reads an attack's settings by key: they are AttackSpecs (tradeoff.core.spec) with
fields (``spec.eps``, ``spec.norm``, ``spec.step_size``, ``spec.type``), made by the resolver; ``config/`` alone reads
the configuration's attack entries as written, and builds the specs from them.

The rule, checked on every module's syntax tree: a subscript with a string constant (``x["eps"]``) or a ``.get("...")``
is refused on a value that holds an attack's settings, namely

- the catalog's attacks or a resolved attack (``catalog.attacks[...]``, ``catalog.attacks.get(...)``,
  ``catalog.attack_for(...)``), the configuration's attack entries (``...["attacks"][...]``,
  ``...["train_attacks"][...]``), an AttackSpec's JSON form (``spec.as_dict()``) or its parameters
  (``spec.params``),
- and a name that the same function binds to one of those (``spec = catalog.attack_for(a, run)``, ``for name, a in
  catalog.attacks.items()``, ``spec = dict(catalog.attack_for(...))``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tradeoff"
#: where an attack's settings are read as written: the resolver, and the spec's own JSON form
ALLOWED = ("config/", "core/spec.py")
#: modules not yet switched, by another change (issue 30: cli/ is being split into modules; `tradeoff list attacks`
#: reads catalog.attacks by key there): remove an entry when it is switched; an entry with nothing to find fails
PENDING: tuple[str, ...] = ()


def _is_source(node: ast.AST) -> bool:
    """Whether an expression evaluates to an attack's settings (or a mapping of them: catalog.attacks)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("dict", "list") \
            and node.args:
        node = node.args[0]  # dict(spec), a copy
    if isinstance(node, ast.Dict):  # {**spec, ...}
        return any(k is None and _is_source(v) for k, v in zip(node.keys, node.values))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("attack_for", "as_dict") and not _is_method(node.func.value):
            return True
        if node.func.attr in ("get", "values", "items") and _holds_attacks(node.func.value):
            return True
    if isinstance(node, ast.Attribute) and node.attr in ("attack", "black_box", "l2", "eval_attack"):
        return True  # an AttackSpec held by an object (the audit's attacks, a method's training attack)
    if isinstance(node, ast.Attribute) and node.attr == "params" and not _is_method(node.value) and not (
            isinstance(node.value, ast.Name) and node.value.id == "self"):  # a built attack's (or method's) own
        return True
    if isinstance(node, ast.Subscript):
        return _holds_attacks(node.value)
    return False


def _is_method(node: ast.AST) -> bool:
    """``spec.method.params`` (a method's parameters) or ``target.analysis.params`` (an analysis's, typed by
    tradeoff.core.targets.Analysis): not an attack's."""
    return isinstance(node, ast.Attribute) and node.attr in ("method", "analysis") or \
        isinstance(node, ast.Name) and node.id in ("method", "analysis")


def _holds_attacks(node: ast.AST) -> bool:
    """``catalog.attacks``, ``config["attacks"]``, ``config["train_attacks"]``: attack name -> its settings."""
    if isinstance(node, ast.Attribute) and node.attr == "attacks":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        node = ast.Subscript(value=node.func.value, slice=node.args[0] if node.args else ast.Constant(None))
    config = isinstance(node, ast.Subscript) and (
        isinstance(node.value, ast.Name) and node.value.id == "config"
        or isinstance(node.value, ast.Attribute) and node.value.attr == "config")
    return config and isinstance(node.slice, ast.Constant) and node.slice.value in ("attacks", "train_attacks")


def _string_key(node: ast.AST) -> str | None:
    """The constant key of ``x["k"]`` or ``x.get("k", ...)``, with x."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
            node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def _own_nodes(scope: ast.AST):
    """The nodes of a module or function, not those of the functions inside it (each its own scope)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ClassDef):
            todo.extend(n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _target_of(node: ast.AST) -> ast.AST:
    return node.value if isinstance(node, ast.Subscript) else node.func.value  # type: ignore[attr-defined]


def offences(path: Path, source: str) -> list[str]:
    """``file:line: x["key"]`` for every read by key of an attack's settings in a module."""
    tree = ast.parse(source)
    out = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in [tree, *scopes]:
        bound: set[str] = set()
        for node in _own_nodes(scope):
            if isinstance(node, ast.Assign) and _is_source(node.value):
                bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):  # s, a = x, self.attack
                for target in node.targets:
                    if isinstance(target, ast.Tuple) and len(target.elts) == len(node.value.elts):
                        bound |= {t.id for t, v in zip(target.elts, node.value.elts)
                                  if isinstance(t, ast.Name) and _is_source(v)}
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call) and \
                    isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr in ("items", "values") and \
                    _holds_attacks(node.iter.func.value):
                target = node.target
                names = target.elts[-1:] if isinstance(target, ast.Tuple) else [target]
                bound |= {t.id for t in names if isinstance(t, ast.Name)}
        for node in _own_nodes(scope):
            key = _string_key(node)
            if key is None or isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                continue
            held = _target_of(node)
            if _is_source(held) or (isinstance(held, ast.Name) and held.id in bound):
                out.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(out))


def test_no_module_outside_config_reads_an_attack_by_key():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(ALLOWED):
            continue
        here = offences(path.relative_to(PACKAGE.parents[1]), path.read_text())
        if rel in PENDING:
            assert here, f"{rel} reads no attack by key any more: remove it from PENDING"
            continue
        found += here
    assert not found, "an attack's settings read by key (read the AttackSpec's fields):\n" + "\n".join(found)


def test_the_rule_finds_each_kind_of_read():
    """The rule catches what it names (and not a method's parameters nor a metrics record's fields)."""
    bad = '''
def f(catalog, run, config, spec):
    a = catalog.attack_for("pgd20", run)
    b = dict(catalog.attack_for("pgd20", run))
    x = a["eps"] + b.get("step_size") + catalog.attack_for("aa", run)["norm"]
    y = catalog.attacks["pgd20"]["type"] + config["attacks"]["pgd20"].get("eps") + spec.as_dict()["steps"]
    z = [s["type"] for n, s in catalog.attacks.items()] + [spec.params["steps"]]

def g(self):
    s, a = self.settings, self.attack
    return a["steps"] + self.attack["eps"]
'''
    lines = offences(Path("m.py"), bad)
    assert sorted(int(line.split(":")[1]) for line in lines) == [5, 5, 5, 6, 6, 6, 7, 7, 11, 11], lines
    good = '''
def f(catalog, run, spec, metrics, result):
    a = catalog.attack_for("pgd20", run)
    return a.eps, spec.method.params["attack"], metrics["eps"], catalog.targets["t"]["rows"], [
        row["type"] for row in result["attacks"].values()]

def g(spec):
    return spec["lr"]  # another function's spec
'''
    assert offences(Path("m.py"), good) == []
