"""The data root's kinds, torch- and numpy-free (what the configuration builds for a scale: tradeoff.config): a plain
root, where only the published datasets are read, or a :class:`GeneratedDataRoot`, under which the rehearsal's
generated datasets are read (:mod:`tradeoff.data.generated` writes them, with their ``GENERATED.json``)."""

from __future__ import annotations

from pathlib import Path

#: the file a generated dataset's folder holds: what wrote it, and the md5 of every file its reader verifies
MARKER = "GENERATED.json"


class GeneratedDataRoot(type(Path())):
    """A data root under which generated datasets (``GENERATED.json``) are read, verified against that marker.

    A path of this class (and every path derived from it with ``/``) carries the permission; a plain ``Path`` does
    not, so the paper scale never reads generated files by accident (``tradeoff.config.Catalog.data_root``)."""
