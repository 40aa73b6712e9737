"""How the registries find what they hold: every module of a package, and the entry points of a group.

A method (``tradeoff.methods``) or an attack (``tradeoff.attacks.declared`` and ``tradeoff.attacks``) is a module of
its package, registered by a decorator when the module is imported; :func:`discover` imports every module of the
package (``pkgutil``: a new file is found, no list names it) and then every entry point of the group named after the
package, which is how a package installed outside this repository adds one (docs/extending.md). Each registry module
calls it once, at its import, as it imported its modules by name before.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from tradeoff.core.errors import UserError


class PluginError(UserError):
    """An installed plug-in (an entry point) that cannot be loaded: the message names it and its distribution."""


def package_modules(package: str) -> list[str]:
    """The modules of ``package`` (not its subpackages' modules), by name, in order."""
    path = importlib.import_module(package).__path__
    return sorted(info.name for info in pkgutil.iter_modules(path, package + "."))


def discover(package: str, group: str | None = None) -> None:
    """Import every module of ``package``, then load every entry point of ``group`` (``tradeoff.methods``: a module
    whose import registers a method, e.g. ``mart = "mart_plugin"`` in a plug-in's ``[project.entry-points]``)."""
    for name in package_modules(package):
        importlib.import_module(name)
    if group is None:
        return
    for point in entry_points(group=group):
        try:
            point.load()
        except Exception as exc:
            dist = f" (installed by {point.dist.name} {point.dist.version})" if point.dist else ""
            raise PluginError(f"entry point {point.name} = {point.value!r} of group {group!r}{dist}: "
                              f"{type(exc).__name__}: {exc}") from exc
