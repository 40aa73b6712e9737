"""An audit of a catalog's model (a run, or an external checkpoint), from the config's ``audit:`` block: the model and
its test examples loaded as an evaluation loads them (fp32, eval mode), the attacks resolved for its dataset and scale
as the tables' are, a surrogate of its dataset for the transfer check, and the PGD-family attacks of the authors'
protocols of the tables that show it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ..config import Catalog, ConfigError
from ..errors import UserError
from .checks import Auditor, Settings, worst
from .jobs import protocol_pairs, surrogate_for
from .page import write_page

log = logging.getLogger("tradeoff.audit")

FORMAT = "tradeoff-audit/1"


def _load(catalog: Catalog, model_id: str, device: str, examples: int | None):
    from ..evaluate import Evaluation, Loaded

    train_id = catalog.train_id.get(model_id, model_id)
    path = catalog.model_file(train_id)
    if not path.exists():
        raise UserError(f"{path}: no such model file (train {train_id!r} first: `tradeoff train --run {train_id}`)")
    loaded = Loaded(Evaluation(path, catalog.data_root, model_id=train_id, external=catalog.externals.get(train_id),
                               device=device, test_examples=examples))
    return loaded.model, loaded.meta, loaded.x, loaded.y, loaded.device


def audit(catalog: Catalog, model_id: str, *, device: str = "cpu", seed: int = 0, surrogate: str | None = None,
          batch_size: int | None = None) -> tuple[dict, dict[str, Path]]:
    """Audit a run or an external model of the catalog; (its record, the files written: Layout.audit)."""
    block = catalog.config["audit"]
    t0 = time.perf_counter()
    model_id = catalog.train_id.get(model_id, model_id)  # runs trained by one job are one model: one audit
    spec = catalog.model_spec(model_id)
    examples = block.get("examples")
    if spec.test_examples is not None:
        examples = spec.test_examples if examples is None else min(examples, spec.test_examples)
    model, meta, x, y, device = _load(catalog, model_id, device, examples)
    attack = catalog.attack_for(block["attack"], model_id)
    black_box = catalog.attack_for(block["black_box"], model_id) if block.get("black_box") else None
    if surrogate is not None and surrogate not in catalog.runs and not catalog.is_external(surrogate):
        raise ConfigError(f"--surrogate: {surrogate!r} is neither a run nor an external model of the catalog")
    surrogate_id = catalog.train_id.get(surrogate, surrogate) if surrogate else surrogate_for(catalog, model_id)
    surrogate_model, missing = None, None
    if surrogate_id is not None and not catalog.model_file(surrogate_id).exists():
        missing = (f"the surrogate {surrogate_id} is not trained ({catalog.model_file(surrogate_id)}: no such file; "
                   f"`tradeoff train --run {surrogate_id}`)")
    elif surrogate_id is not None:
        surrogate_model = _load(catalog, surrogate_id, device, examples)[0]
    pairs = [(strong, catalog.attack_for(strong, model_id), code, catalog.attack_for(code, model_id))
             for strong, code in protocol_pairs(catalog, model_id)]
    auditor = Auditor(model, x, y, attack=attack, black_box=black_box, settings=Settings.from_config(block),
                      seed=seed, batch_size=batch_size or catalog.runtime.eval_batch_size,
                      surrogate=surrogate_model, no_surrogate=missing, protocol=pairs,
                      log=lambda text: log.info("%s: %s", model_id, text))
    checks = auditor.run()
    record = {"format": FORMAT, "model": model_id, "scale": catalog.scale, "arch": spec.arch,
              "dataset": spec.dataset, "external": meta.get("external"), "examples": len(y),
              "clean_accuracy": auditor.curves()["clean"], "attack": attack, "black_box": black_box,
              "surrogate": surrogate_id, "settings": {k: v for k, v in block.items()}, "seed": seed,
              "device": str(device), "checks": checks, "measurements": auditor.curves(),
              "verdict": worst(c["verdict"] for c in checks),
              "seconds": time.perf_counter() - t0}
    return record, write_page(record, catalog.layout.audit(model_id))
