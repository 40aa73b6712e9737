"""Methods and attacks are declared apart from their code (tradeoff.methods.declared, tradeoff.attacks.declared):
the configuration checks runs and attacks against the declarations without importing PyTorch, and what it checked
is what runs, because an implementation is a subclass of its declaration that declares nothing of its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT, env
from tradeoff.attacks import ATTACKS, Attack
from tradeoff.attacks import pgd as pgd_module
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.attacks.declared import AttackDeclaration
from tradeoff.attacks.declared import pgd as declared_pgd
from tradeoff.core.registry import Registry
from tradeoff.methods import METHODS, Method
from tradeoff.methods.declared import DECLARED as METHOD_DECLARATIONS
from tradeoff.methods.declared import MethodDeclaration

KINDS = [(METHODS, METHOD_DECLARATIONS, MethodDeclaration, Method),
         (ATTACKS, ATTACK_DECLARATIONS, AttackDeclaration, Attack)]


def _declared_attributes(declaration: type, base: type) -> set[str]:
    """Every attribute a declaration class or one of its declaration bases sets (its name, parameters, fixed settings,
    checks), but Python's own."""
    return {attr for cls in declaration.__mro__ if issubclass(cls, base) for attr in vars(cls)
            if not (attr.startswith("__") and attr.endswith("__"))}


@pytest.mark.parametrize("implemented, declared, declaration_base, implementation_base", KINDS)
def test_every_implementation_is_its_declaration_and_declares_nothing_of_its_own(
        implemented, declared, declaration_base, implementation_base):
    assert set(implemented) == set(declared)
    for name, cls in implemented.items():
        declaration = declared[name]
        assert issubclass(cls, declaration) and cls.name == name
        for attr in _declared_attributes(declaration, declaration_base):
            owner = next(k for k in cls.__mro__ if attr in vars(k))
            # the attribute the implementation runs with is a declaration's, not one its code sets again
            assert not issubclass(owner, implementation_base), f"{cls.__module__}.{cls.__name__}.{attr}"
            assert owner in declaration.__mro__, (name, attr, owner)


def test_an_implementation_without_its_declaration_is_refused():
    methods = Registry("method", declarations=METHOD_DECLARATIONS)
    with pytest.raises(TypeError, match="no declaration has the name"):
        methods.register(type("Unknown", (Method,), {"name": "no-such-method"}))
    with pytest.raises(TypeError, match="not a subclass of its declaration .*trades.TRADES"):  # its name only
        methods.register(type("Impostor", (Method,), {"name": "trades"}))
    methods.register(METHODS["trades"])
    attacks = Registry("attack", declarations=ATTACK_DECLARATIONS)
    with pytest.raises(TypeError, match="'pgd'.*not a subclass"):
        attacks.register(type("Impostor", (Attack,), {"name": "pgd"}))


def test_the_declared_loss_names_are_the_losses_the_attacks_compute():
    assert tuple(pgd_module.LOSSES) == declared_pgd.LOSS_NAMES
    assert tuple(pgd_module.TARGETED_LOSSES) == declared_pgd.TARGETED_LOSS_NAMES


def test_resolving_the_configuration_reads_the_declarations_without_pytorch():
    """The configuration package and the declarations import no PyTorch, and resolving the paper's catalog and the
    demo's (every method, attack, dataset and architecture checked) imports none either, nor any method's, attack's,
    dataset's or architecture's code."""
    code = ("import sys\n"
            "import tradeoff.config, tradeoff.methods.declared, tradeoff.attacks.declared, tradeoff.methods, "
            "tradeoff.attacks\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "from tradeoff.config import load_config, resolve\n"  # resolved afresh: no cache of an earlier resolution
            f"catalog = resolve(load_config([{str(ROOT / 'config' / 'config.yaml')!r}]))\n"
            f"resolve(load_config([{str(ROOT / 'config' / 'config.yaml')!r}, {str(ROOT / 'config' / 'demo.yaml')!r}]))\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "code = sorted(m for m in sys.modules if m.startswith(('tradeoff.methods.', 'tradeoff.attacks.',\n"
            "              'tradeoff.data.', 'tradeoff.models.')) and not m.endswith(('.declared', '.zoo_names',\n"
            "              '.generated', '.hendrycks')) and '.declared.' not in m)\n"
            "assert not code, code\n"
            "print(len(catalog.runs))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) > 40
