"""A written audit's verdicts, read without PyTorch: what the summary page lists (every failed check of every audit
written at the scale)."""

from __future__ import annotations

import json

from ..config import Catalog


def failed_checks(catalog: Catalog) -> list[tuple[str, str, str]]:
    """(model, check, its numbers) of every failed check in the audits written at this scale (the catalog's models and
    any checkpoint audited), by model. An audit whose record cannot be read is listed as such (a check ``record``)."""
    found = []
    folder = catalog.layout.folder("audit")
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        model = path.stem
        try:
            checks = json.loads(path.read_text())["checks"]
            found += [(model, c["name"], c["summary"]) for c in checks if c["verdict"] == "fail"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            found.append((model, "record", f"{path} cannot be read ({type(exc).__name__}: {exc})"))
    return found
