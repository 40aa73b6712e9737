"""A written audit's verdicts, read without PyTorch: what the summary page lists (every failed check of every audit
written at the scale). The reader lives with the report's other readers of written records
(tradeoff.report.records), so that the report needs nothing of the audit."""

from __future__ import annotations

from ..report.records import failed_checks

__all__ = ["failed_checks"]
