"""The compact run design (tradeoff.design) resolves to the catalog that the run-by-run config.yaml did.

tests/data/resolved_runs.json was written from the run-by-run config.yaml before it became compact (run this file
as a script with --write to record the current catalog): for each scale (the paper config alone, + demo.yaml,
+ smoke.yaml), every run id in catalog order with its spec_digest and train_id, the seed runs, and a digest of
every target. The compact config must resolve to exactly the same.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "resolved_runs.json"
SCALES = {"paper": ["config.yaml"], "demo": ["config.yaml", "demo.yaml"], "smoke": ["config.yaml", "smoke.yaml"]}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def resolved(files: list[str], config_dir: Path = ROOT / "config") -> dict:
    """What a scale's catalog resolves to: run id -> [spec digest, train id] (catalog order), the seed runs, and
    target name -> a digest of the target."""
    from tradeoff import config as cfg

    catalog = cfg.load_catalog([config_dir / f for f in files], write_cache=False)
    return {"runs": {rid: [cfg.spec_digest(spec), catalog.train_id[rid]] for rid, spec in catalog.runs.items()},
            "seed_runs": catalog.seed_runs,
            "targets": {name: _digest(target) for name, target in catalog.targets.items()}}


def _dump(snapshot: dict) -> str:
    """One line per run, seed group and target: small diffs when the catalog changes."""
    out = ["{"]
    for i, (scale, parts) in enumerate(snapshot.items()):
        out.append(f" {json.dumps(scale)}: {{")
        for j, (part, entries) in enumerate(parts.items()):
            lines = [f"   {json.dumps(k)}: {json.dumps(v)}" for k, v in entries.items()]
            out.append(f"  {json.dumps(part)}: {{\n" + ",\n".join(lines) + "\n  }" + ("," if j < len(parts) - 1 else ""))
        out.append(" }" + ("," if i < len(snapshot) - 1 else ""))
    out.append("}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_catalog_design.py --write   (records the current catalog)")
    snapshot = {scale: resolved(files) for scale, files in SCALES.items()}
    text = _dump(snapshot)
    assert json.loads(text) == snapshot
    SNAPSHOT.write_text(text)
    print(f"wrote {SNAPSHOT}: " + ", ".join(f"{s} {len(v['runs'])} runs" for s, v in snapshot.items()))
