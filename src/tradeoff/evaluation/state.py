"""The resume state of an evaluation job: its partial results
(``results/work/eval/<run>/<attack>[.shard-K-of-N].state``), written atomically after every batch and, for
AutoAttack, after every component of the ensemble. A job that is killed
resumes from it and gives the same answer as an uninterrupted one; the file is removed when the job's outputs are
written, and ignored (recomputed) if it belongs to another model, attack or setting (:func:`state_key`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tradeoff.core.spec import AttackSpec, json_digest
from tradeoff.evaluation.records import unbits
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import bits

log = logging.getLogger(__name__)


class EvalState:
    """Partial results of one evaluation job: finished batches (clean and robust bits, seconds) and the saved
    progress of the batch in hand. ``key`` identifies what is computed (model, attack, seed, batches); a file
    with another key, or one that cannot be read, is ignored and overwritten."""

    def __init__(self, path: str | Path, key: str):
        self.path, self.key = Path(path), key
        self.data: dict[str, Any] = {"key": key, "batches": {}, "partial": None}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable evaluation state %s: %s", self.path, exc)
            else:
                if data.get("key") == key:
                    self.data = data
                    log.info("resuming from %s: %d batch(es) done%s", self.path, len(data["batches"]),
                             ", one in progress" if data.get("partial") else "")
                else:
                    log.warning("ignoring evaluation state %s: it belongs to another model or setting", self.path)
        self._loaded = len(self.data["batches"])

    @property
    def resumed_batches(self) -> int:
        """Batches that were already done when this state was loaded."""
        return self._loaded

    def done(self, batch: int) -> dict | None:
        """Batch ``batch`` if it is finished (tradeoff.attacks.loop.ResumeState.done): its clean and robust outcomes
        (bool tensors, decoded from the file's bits), seconds, breakdown, checks and invalid counts; else None."""
        saved = self.data["batches"].get(str(batch))
        return None if saved is None else {**saved, "clean": unbits(saved["clean"]), "robust": unbits(saved["robust"])}

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float,
               breakdown: dict[str, int], checks: list[str] | None = None,
               invalid: dict[str, int] | None = None) -> None:
        self.data["batches"][str(batch)] = {"clean": bits(clean), "robust": bits(robust), "seconds": seconds,
                                            "breakdown": breakdown, **({"checks": checks} if checks else {}),
                                            "invalid": dict(invalid or {})}
        self.data["partial"] = None
        self._write()

    def progress(self, batch: int) -> "_BatchProgress":
        return _BatchProgress(self, batch)

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data) + "\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class _BatchProgress:
    state: EvalState
    batch: int

    def load(self) -> dict | None:
        partial = self.state.data.get("partial")
        return partial["data"] if partial and partial["batch"] == self.batch else None

    def save(self, data: dict) -> None:
        self.state.data["partial"] = {"batch": self.batch, "data": data}
        self.state._write()


def state_key(digest: str, spec: AttackSpec, seed: int, batch_size: int, n: int, first_batch: int) -> str:
    payload = {"model": digest, "spec": spec.as_dict(), "seed": seed, "batch_size": batch_size, "n": n,
               "first_batch": first_batch}
    return json_digest(payload, default=str)
