"""Shards of an evaluation: one attack's examples split into contiguous runs of whole batches of the global grid
(:func:`shard_range`), each evaluated by its own job into a partial result (``SHARD_FORMAT``, written by
tradeoff.evaluation.evaluate), and :func:`merge_shards`, which gives exactly the metrics and predictions files of the
unsharded evaluation: batch b is seeded with (seed, b) whichever process attacks it (tradeoff.attacks.loop).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from tradeoff import attacks
from tradeoff.attacks.base import add_counts
from tradeoff.attacks.loop import COUNTS, Outcome
from tradeoff.core.errors import UserError
from tradeoff.core.spec import AttackSpec
from tradeoff.evaluation.bound import bound_record
from tradeoff.evaluation.records import metrics_record, predictions_record, unbits, write_json, write_metrics


class MergeError(UserError, ValueError):
    """Shard files that do not merge: missing or overlapping shards, another format, or settings that differ."""


SHARD_FORMAT = "tradeoff-eval-shard/3"


def shard_range(n: int, batch_size: int, shard: int, shards: int) -> tuple[int, int, int]:
    """(first global batch, first example, end example) of shard ``shard`` (0-based) of ``shards``: shards are
    contiguous runs of whole batches of the global grid, as even as possible (some are empty when there are
    fewer batches than shards)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} out of range for {shards} shards")
    n_batches = math.ceil(n / batch_size)
    lo, hi = shard * n_batches // shards, (shard + 1) * n_batches // shards
    return lo, min(lo * batch_size, n), min(hi * batch_size, n)


def merge_shards(paths: list[str | Path], *, metrics_out=None, predictions_out=None) -> dict:
    """Merge the partial results of all shards of one (run, attack) into the metrics and predictions files an
    unsharded job writes; refuses shards that do not tile the example space exactly or disagree on settings."""
    parts = sorted((json.loads(Path(p).read_text()) for p in paths), key=lambda d: d["shard"])
    if not parts:
        raise MergeError("no shard files to merge")
    first = parts[0]
    old = [p["shard"] for p in parts if p.get("format") != SHARD_FORMAT]
    if old:
        raise MergeError(f"shard(s) {old} are not in the format {SHARD_FORMAT!r} (written by an older tradeoff, "
                         "without the counts of invalid examples or the bound): re-run them")
    same = ("run", "attack", "spec", "seed", "batch_size", "examples_total", "shards", "context")
    for part in parts[1:]:
        for k in same:
            if json.dumps(part[k], sort_keys=True) != json.dumps(first[k], sort_keys=True):
                raise MergeError(f"shard {part['shard']} differs from shard {first['shard']} in {k!r}")
    if [p["shard"] for p in parts] != list(range(first["shards"])):
        raise MergeError(f"expected shards 0..{first['shards'] - 1}, got {[p['shard'] for p in parts]}")
    position = 0
    for part in parts:
        if part["start"] != position:
            raise MergeError(f"shard {part['shard']} starts at example {part['start']}, expected {position}")
        position = part["stop"]
    if position != first["examples_total"]:
        raise MergeError(f"shards cover {position} of {first['examples_total']} examples")
    labels = torch.tensor([v for p in parts for v in p["labels"]], dtype=torch.long)
    breakdown: dict[str, int] = {}
    for p in parts:
        for k, v in p["breakdown"].items():
            breakdown[k] = breakdown.get(k, 0) + v
    invalid: dict[str, int] = dict.fromkeys(COUNTS, 0)
    for p in parts:
        invalid = add_counts(invalid, p["invalid"])
    out = Outcome(labels, unbits("".join(p["clean_correct"] for p in parts)),
                  unbits("".join(p["robust_correct"] for p in parts)), sum(p["seconds"] for p in parts), breakdown,
                  invalid=invalid)
    checked = {}
    spec = AttackSpec.from_dict(first["spec"])
    if not spec.clean:  # the constant images each shard probed, over all the examples
        probes = [{**p, "reachable": sum(q["probes"][i]["reachable"] for q in parts)}
                  for i, p in enumerate(first["probes"])]
        checked["bound"] = bound_record(probes, unbits("".join(p["ruled_out"] for p in parts)),
                                        first["whole_range"], labels, out.clean_correct, out.robust_correct)
    kind = attacks.ATTACKS[spec.type]
    if kind.sanity_checked:  # the shards' warnings, then the checks of the whole evaluation
        warnings = list(dict.fromkeys(text for p in parts for text in p.get("checks", [])))
        whole = kind.whole_warnings(int(out.clean_correct.sum()), breakdown, len(labels))
        checked["checks"] = warnings + [text for text in whole if text not in warnings]
    metrics = metrics_record(first["meta"], first["attack"], spec, out, seed=first["seed"],
                             batch_size=first["batch_size"], provenance=first["provenance"], context=first["context"],
                             extra={"shards": first["shards"], "shard_seconds": [p["seconds"] for p in parts],
                                    **checked})
    if metrics_out is not None:
        write_metrics(metrics_out, metrics)
    if predictions_out is not None:
        write_json(predictions_out, predictions_record(first["run"], first["attack"], out))
    return metrics
