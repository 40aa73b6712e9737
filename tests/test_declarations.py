"""What the configuration reads of a method or an attack: a method is one class in one module of tradeoff.methods,
read without PyTorch; an attack's declaration (tradeoff.attacks.declared) is apart from its code, and its code declares
nothing of its own. Both are found without a list naming them: every module of their package, and the entry points of
the groups ``tradeoff.methods`` and ``tradeoff.attacks`` (tradeoff.core.plugins)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from helpers import ROOT, env

from tradeoff.attacks import ATTACKS, Attack
from tradeoff.attacks import pgd as pgd_module
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.attacks.declared import AttackDeclaration
from tradeoff.attacks.declared import pgd as declared_pgd
from tradeoff.core.plugins import PluginError, discover
from tradeoff.core.registry import Registry
from tradeoff.methods import METHODS, Method

METHODS_DIR = ROOT / "src" / "tradeoff" / "methods"


def _declared_attributes(declaration: type, base: type) -> set[str]:
    """Every attribute a declaration class or one of its declaration bases sets (its name, parameters, fixed settings,
    checks), but Python's own."""
    return {attr for cls in declaration.__mro__ if issubclass(cls, base) for attr in vars(cls)
            if not (attr.startswith("__") and attr.endswith("__"))}


def test_every_attack_implementation_is_its_declaration_and_declares_nothing_of_its_own():
    assert set(ATTACKS) == set(ATTACK_DECLARATIONS)
    for name, cls in ATTACKS.items():
        declaration = ATTACK_DECLARATIONS[name]
        assert issubclass(cls, declaration) and cls.name == name
        for attr in _declared_attributes(declaration, AttackDeclaration):
            owner = next(k for k in cls.__mro__ if attr in vars(k))
            # the attribute the implementation runs with is a declaration's, not one its code sets again
            assert not issubclass(owner, Attack), f"{cls.__module__}.{cls.__name__}.{attr}"
            assert owner in declaration.__mro__, (name, attr, owner)


def _registered_in(path) -> set[str]:
    """The names of the classes a module registers (``@register`` on a class with ``name = "..."``), from its source."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and any(getattr(d, "id", None) == "register" for d in node.decorator_list):
            names |= {s.value.value for s in node.body if isinstance(s, ast.Assign)
                      and [getattr(t, "id", None) for t in s.targets] == ["name"]}
    return names


def test_a_method_is_one_class_in_one_module_and_every_module_is_found():
    """Every method is the class its module registers, in the module of tradeoff.methods that defines it: the
    configuration reads the class that trains. Every module of the package that registers one is in the registry,
    found by discovery: no list names them (nor registry.py, an import list every method edited, any more)."""
    assert not (METHODS_DIR / "registry.py").exists()
    assert not (METHODS_DIR / "declared").exists()
    registered = {name: path.stem for path in METHODS_DIR.glob("*.py") for name in _registered_in(path)}
    assert set(METHODS) == set(registered) and len(METHODS) >= 10
    for name, cls in METHODS.items():
        assert issubclass(cls, Method) and cls.name == name
        assert cls.__module__ == f"tradeoff.methods.{registered[name]}"
        assert "passes" in vars(cls) or any("passes" in vars(k) for k in cls.__mro__ if k is not Method), name
    for path in METHODS_DIR.glob("*.py"):  # no list of the methods' modules anywhere in the package
        imported = {a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)
                    and n.module == "tradeoff.methods" for a in n.names}
        assert not imported & set(registered.values()), path


def test_discovery_imports_every_module_of_a_package(tmp_path, monkeypatch):
    """A module dropped in a package is imported by discover(), without any list; a package's own subpackages too."""
    package = tmp_path / "plugpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("SEEN = []\n")
    for name in ("one", "two"):
        (package / f"{name}.py").write_text(f"from plugpkg import SEEN\nSEEN.append({name!r})\n")
    (package / "sub" / "__init__.py").write_text("from plugpkg import SEEN\nSEEN.append('sub')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    discover("plugpkg")
    import plugpkg

    assert sorted(plugpkg.SEEN) == ["one", "sub", "two"]
    for name in [m for m in sys.modules if m.startswith("plugpkg")]:
        monkeypatch.delitem(sys.modules, name)


def test_an_entry_point_that_fails_to_load_is_one_line_naming_it(tmp_path):
    """An installed plug-in (an importlib.metadata-visible distribution) whose module fails: one line naming the entry
    point, its group and its distribution."""
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tradeoff.methods]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text("raise RuntimeError('no such thing')\n")
    code = "from tradeoff import cli; raise SystemExit(cli.main(['check-config']))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**env(), "PYTHONPATH": str(site)})
    assert out.returncode != 0
    assert "entry point broken = 'broken_plugin' of group 'tradeoff.methods' (installed by broken-plugin 0.1): " \
           "RuntimeError: no such thing" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert issubclass(PluginError, Exception)


def test_an_attack_implementation_without_its_declaration_is_refused():
    attacks = Registry("attack", declarations=ATTACK_DECLARATIONS)
    with pytest.raises(TypeError, match="no declaration has the name"):
        attacks.register(type("Unknown", (Attack,), {"name": "no-such-attack"}))
    with pytest.raises(TypeError, match="'pgd'.*not a subclass"):
        attacks.register(type("Impostor", (Attack,), {"name": "pgd"}))


def test_the_declared_loss_names_are_the_losses_the_attacks_compute():
    assert tuple(pgd_module.LOSSES) == declared_pgd.LOSS_NAMES
    assert tuple(pgd_module.TARGETED_LOSSES) == declared_pgd.TARGETED_LOSS_NAMES


def test_resolving_the_configuration_reads_the_declarations_without_pytorch_nor_numpy():
    """The configuration package, every method's module and the attacks' declarations import neither PyTorch nor
    NumPy, and resolving the paper's catalog and the demo's (every method, attack, dataset and architecture checked)
    imports neither either, nor any attack's, dataset's or architecture's code (the attacks' interface, which the
    methods' modules name, is torch-free; no attack is built)."""
    code = ("import sys\n"
            "import tradeoff.config, tradeoff.methods, tradeoff.attacks.declared, tradeoff.attacks\n"
            "from tradeoff.methods import METHODS\n"  # every module of tradeoff.methods
            "assert not {'torch', 'numpy'} & set(sys.modules), 'torch or numpy imported'\n"
            "from tradeoff.config import load_config, resolve\n"  # resolved afresh: no cache of an earlier resolution
            f"catalog = resolve(load_config([{str(ROOT / 'config' / 'config.yaml')!r}]))\n"
            f"resolve(load_config([{str(ROOT / 'config' / 'config.yaml')!r}, {str(ROOT / 'config' / 'demo.yaml')!r}]))\n"
            "assert not {'torch', 'numpy'} & set(sys.modules), {'torch', 'numpy'} & set(sys.modules)\n"
            "code = sorted(m for m in sys.modules if m.startswith(('tradeoff.attacks.', 'tradeoff.data.',\n"
            "              'tradeoff.models.')) and not m.endswith(('.declared', '.zoo_names', '.roots')) and\n"
            "              '.declared.' not in m and m != 'tradeoff.attacks.base')\n"  # the interface: torch-free
            "assert not code, code\n"
            "assert len(METHODS) >= 10\n"
            "print(len(catalog.runs))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) > 40
