"""Evaluation: accuracy of a model under one attack, per example, always in fp32 and eval mode.

Examples are split into fixed batches of the global index space; batch b's attack randomness is seeded with
(seed, b), so a result does not depend on which process evaluates which batch: a shard is a contiguous run of
whole batches, and merging the shards gives exactly the unsharded result.
Untargeted attacks only attack examples the model classifies correctly: the others count as not robust.

A job keeps its partial results in a state file (``results/work/eval/<run>/<attack>[.shard-K-of-N].state``),
written atomically after every batch and, for AutoAttack, after every component of the ensemble. A job that
is killed resumes from it and gives the same answer as an uninterrupted one; the file is removed when the
job's outputs are written, and ignored (recomputed) if it belongs to another model, attack or setting.
An entry of type ``corruptions`` is not an attack: it measures NROB on its corruption dataset (Tiny-ImageNet-C, or
digits-c at the smaller scales) with :func:`tradeoff.corruptions.nrob`, and writes the same two files.
Several attacks of one run can be evaluated in one process (:func:`evaluate_attacks`; runtime.eval_unit: run):
the model and test set are loaded once, and each attack keeps its own state file and writes its own files.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from . import attacks
from .atomic import json_digest, sha256_file
from .bars import Bar
from .errors import UserError
from .config import AUTOATTACK_FAMILY, CORRUPTIONS_TYPE, rel_step, spec_digest
from .results import METRICS_FORMAT, SUITE_FORMAT, bits

log = logging.getLogger(__name__)

# keys of a resolved attack spec that are not parameters of the attack class
NOT_ATTACK_PARAMS = ("type", "eps", "norm", "name", "step_size", "shards")


@dataclass
class Outcome:
    labels: torch.Tensor          # int64, per example
    clean_correct: torch.Tensor   # bool, per example
    robust_correct: torch.Tensor  # bool, per example
    seconds: float
    #: for ensembles: examples still robust after each component (AutoAttack's trace), summed over batches
    breakdown: dict[str, int] = field(default_factory=dict)
    #: for AutoAttack and its components: the warnings of its sanity checks (attacks.autoattack.CheckLog)
    checks: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return int(self.robust_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")

    @property
    def clean_accuracy(self) -> float:
        return int(self.clean_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")


def batch_seed(seed: int, batch_index: int) -> int:
    return (int(seed) * 1_000_003 + int(batch_index)) % (2**63 - 1)


def unbits(s: str) -> torch.Tensor:
    return torch.tensor([c == "1" for c in s], dtype=torch.bool)


def build_attack(model: nn.Module, spec: dict, eps: float, seed: int) -> attacks.Attack:
    params = {k: v for k, v in spec.items() if k not in NOT_ATTACK_PARAMS}
    defaults = attacks.ATTACKS[spec["type"]].defaults
    if spec.get("step_size") is not None or "step_size" in defaults:  # resolved specs carry step_size: None
        params["step_size"] = rel_step(spec.get("step_size"), eps, "step_size")
    if "seed" in defaults:
        params["seed"] = seed
    return attacks.build(spec["type"], model, eps=eps, norm=spec.get("norm", "linf"), **params)


# ------------------------------------------------------------------------------------------ resume state


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
        return self.data["batches"].get(str(batch))

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float,
               breakdown: dict[str, int], checks: list[str] | None = None) -> None:
        self.data["batches"][str(batch)] = {"clean": bits(clean), "robust": bits(robust), "seconds": seconds,
                                            "breakdown": breakdown, **({"checks": checks} if checks else {})}
        self.data["partial"] = None
        self._write()

    def progress(self, batch: int) -> "_BatchProgress":
        return _BatchProgress(self, batch)

    def _write(self) -> None:
        from .atomic import atomic_write_text

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


# ------------------------------------------------------------------------------------------- evaluation


def run_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: dict, *, seed: int, batch_size: int,
               first_batch: int = 0, eps: float | None = None, state: EvalState | None = None,
               progress: str | None = None, whole: bool = True) -> Outcome:
    """Evaluate ``model`` on (x, y) under a resolved attack spec. ``first_batch`` is the global index of the
    first batch (for shards); ``state`` keeps partial results so that an interrupted call can resume.
    ``progress``: a name (the attack job's) to show the progress under (tradeoff.bars: batches done, robust so
    far, images/s, ETA) and, for AutoAttack, its components'; None shows nothing. AutoAttack and its components also run the library's sanity checks (Outcome.checks): those of the
    defence on the global first batch, the final check of every batch's adversarial examples and, when (x, y) is
    the ``whole`` evaluation (not a shard), Square's success against the gradient attacks."""
    was_training = model.training
    model.eval()
    eps = float(spec["eps"] if eps is None else eps)
    t0 = time.perf_counter()
    clean_parts, robust_parts = [], []
    breakdown: dict[str, int] = {}
    resumed_seconds = 0.0
    checks = attacks.autoattack.CheckLog() if spec["type"] in AUTOATTACK_FAMILY else None
    n_batches, timed = math.ceil(len(x) / batch_size), {"images": 0, "seconds": 0.0}
    bar = None
    if progress is not None:
        resumed = sum(state.done(first_batch + b) is not None for b in range(n_batches)) if state is not None else 0
        bar = Bar(n_batches, progress, unit="batch", initial=resumed)
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):  # fp32, whatever the caller's context
            for b, start in enumerate(range(0, len(x), batch_size)):
                gb = first_batch + b
                saved = state.done(gb) if state is not None else None
                if saved is not None:
                    clean_parts.append(unbits(saved["clean"]).to(x.device))
                    robust_parts.append(unbits(saved["robust"]).to(x.device))
                    resumed_seconds += saved["seconds"]
                    for k, v in saved["breakdown"].items():
                        breakdown[k] = breakdown.get(k, 0) + v
                    for text in saved.get("checks", []) if checks is not None else []:
                        checks.warning(text)
                    continue
                tb = time.perf_counter()
                xb, yb = x[start:start + batch_size], y[start:start + batch_size]
                with torch.no_grad():
                    clean = model(xb).argmax(1) == yb
                attack = build_attack(model, spec, eps, batch_seed(seed, gb))
                if checks is not None:
                    batch_checks = attack.checks = attacks.autoattack.CheckLog()
                    attack.report_progress = progress is not None
                    if gb == 0:  # AutoAttack checks the defence on its first batch
                        attack.model_checks(xb, yb)
                robust = clean.clone()
                todo = clean if attack.skips_misclassified else torch.ones_like(clean)
                if spec["type"] != "clean" and todo.any():
                    saving = state.progress(gb) if state is not None else None
                    robust[todo] = attack.robust(xb[todo], yb[todo], saving)
                if attack.skips_misclassified:
                    robust &= clean
                batch_breakdown = dict(getattr(attack, "breakdown", None) or {})
                for k, v in batch_breakdown.items():
                    breakdown[k] = breakdown.get(k, 0) + v
                clean_parts.append(clean)
                robust_parts.append(robust)
                if checks is not None:
                    checks.warnings += [text for text in batch_checks.warnings if text not in checks.warnings]
                if state is not None:
                    state.finish(gb, clean, robust, time.perf_counter() - tb, batch_breakdown,
                                 batch_checks.warnings if checks is not None else None)
                if progress is not None:
                    timed["images"] += len(xb)
                    timed["seconds"] += time.perf_counter() - tb
                    bar.update(postfix=_robust_so_far(robust_parts, timed))
        if checks is not None and spec["type"] == "autoattack" and whole:
            square_check(int(sum(int(c.sum()) for c in clean_parts)), breakdown, len(x), checks)
    finally:
        model.train(was_training)
        if bar is not None:
            bar.close()
    cat = lambda parts: torch.cat(parts).cpu() if parts else torch.zeros(0, dtype=torch.bool)  # noqa: E731
    return Outcome(y.cpu(), cat(clean_parts), cat(robust_parts), time.perf_counter() - t0 + resumed_seconds,
                   breakdown, list(checks.warnings) if checks is not None else [])


def square_check(clean: int, breakdown: dict[str, int], n: int, checks) -> None:
    """AutoAttack's check of Square's success against the gradient attacks before it, on a whole evaluation."""
    from pyautoattack.checks import check_square_sr

    if n:
        check_square_sr({"clean": clean / n, **{k: v / n for k, v in breakdown.items()}}, logger=checks)


def _robust_so_far(robust_parts: list, timed: dict) -> str:
    """An evaluation's progress besides its batches: robust so far, images/s of this process."""
    seen = sum(len(p) for p in robust_parts)
    robust = int(sum(int(p.sum()) for p in robust_parts))
    rate = timed["images"] / timed["seconds"] if timed["seconds"] > 0 else 0.0
    return f"{robust} of {seen} images robust so far ({100.0 * robust / max(seen, 1):.1f}%), {rate:.1f} images/s"


def accuracy_under(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: dict, *, seed: int,
                   batch_size: int) -> float:
    return run_attack(model, x, y, spec, seed=seed, batch_size=batch_size).accuracy


# ---------------------------------------------------------------------------------------------- shards


def shard_range(n: int, batch_size: int, shard: int, shards: int) -> tuple[int, int, int]:
    """(first global batch, first example, end example) of shard ``shard`` (0-based) of ``shards``: shards are
    contiguous runs of whole batches of the global grid, as even as possible (some are empty when there are
    fewer batches than shards)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} out of range for {shards} shards")
    n_batches = math.ceil(n / batch_size)
    lo, hi = shard * n_batches // shards, (shard + 1) * n_batches // shards
    return lo, min(lo * batch_size, n), min(hi * batch_size, n)


def state_key(digest: str, spec: dict, seed: int, batch_size: int, n: int, first_batch: int) -> str:
    payload = {"model": digest, "spec": spec, "seed": seed, "batch_size": batch_size, "n": n,
               "first_batch": first_batch}
    return json_digest(payload, default=str)


def _load(checkpoint_path, data_root, device: str, test_examples: int | None, external: dict | None = None,
          model_id: str | None = None):
    from . import data

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if external is not None:  # a model this pipeline did not train (tradeoff.external)
        from .external import load_external

        model, meta = load_external(checkpoint_path, external, device, run_id=model_id or "external")
    else:
        from .trained import load_model

        model, meta = load_model(checkpoint_path, device)
    ds = data.load(meta["spec"]["dataset"], data_root)
    x, y = data.subset(ds.x_test, ds.y_test, test_examples)
    model, x = channels_last(model, x.to(device))
    return model, meta, x, y.to(device), device, len(ds.y_test)


def channels_last(model: nn.Module, x: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
    """Images and conv weights in the channels_last memory format: the same fp32 maths, about twice as fast
    for the conv nets here on the CPU (oneDNN) and the usual layout on the GPU."""
    if x.dim() != 4:
        return model, x
    return model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)


def _library_versions(spec: dict) -> dict:
    if spec["type"] in ("autoattack", *attacks.autoattack.COMPONENTS):
        from importlib import metadata

        return {"pyautoattack": metadata.version("pyautoattack")}
    return {}


def record(meta: dict, attack_name: str, spec: dict, context: dict) -> dict:
    """How a measurement was made, first in its metrics file: what a report checks against the config of the cell
    it fills (tradeoff.report.records) before it shows the number. ``context``: the scale, the model file's
    digest, the test examples setting and the test set's size."""
    run_spec = meta["spec"]
    out = {"format": METRICS_FORMAT, "run": meta["run"], "attack": attack_name, "scale": context["scale"],
           "dataset": run_spec["dataset"], "arch": run_spec["arch"], "paper_dataset": run_spec.get("paper_dataset"),
           "paper_arch": run_spec.get("paper_arch"), "spec_digest": spec_digest(run_spec), "model": context["model"],
           "spec": spec, "test_examples": context["test_examples"], "test_size": context["test_size"],
           "selected_epoch": meta["selected_epoch"], "mechanism": meta.get("mechanism")}
    if meta.get("external") is not None:
        # an external model (tradeoff.external): which file it measured (its SHA-256) and how it was read
        out["external"] = meta["external"]
    return out


def _metrics(meta: dict, attack_name: str, spec: dict, out: Outcome, *, seed: int, batch_size: int,
             provenance: dict, context: dict, extra: dict | None = None) -> dict:
    n = len(out.labels)
    metrics = {
        **record(meta, attack_name, spec, context),
        "type": spec["type"], "norm": spec.get("norm", "linf"),
        "eps": float(spec["eps"]), "params": {k: v for k, v in spec.items() if k not in ("type", "norm", "eps")},
        "accuracy": out.accuracy, "clean_accuracy": out.clean_accuracy, "examples": n,
        "robust_examples": int(out.robust_correct.sum()), "clean_examples": int(out.clean_correct.sum()),
        "seed": seed, "batch_size": batch_size,
        "seconds": out.seconds, "images_per_s": n / out.seconds if out.seconds else None,
        "precision": "fp32",
    }
    if out.breakdown:
        # AutoAttack's trace: accuracy after each component of the ensemble (the last one is the AA accuracy)
        metrics["breakdown"] = {k: v / n for k, v in out.breakdown.items()}
    metrics.update(extra or {})
    metrics["libraries"] = _library_versions(spec)
    metrics["provenance"] = provenance
    return metrics


def _predictions(run: str, attack_name: str, out: Outcome) -> dict:
    return {"run": run, "attack": attack_name, "labels": out.labels.tolist(),
            "clean_correct": bits(out.clean_correct), "robust_correct": bits(out.robust_correct)}


def _write_json(path, obj: dict, indent: int | None = None) -> None:
    from .atomic import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=indent, default=float) + "\n")


@dataclass
class AttackJob:
    """One attack of a batched evaluation (:func:`evaluate_attacks`): its name, resolved spec and files."""
    attack_name: str
    spec: dict
    metrics_out: Any = None
    predictions_out: Any = None
    state_path: Any = None


def evaluate_run(checkpoint_path, spec: dict, *, attack_name: str, data_root, device: str = "auto",
                 batch_size: int = 500, seed: int = 0, metrics_out=None, predictions_out=None,
                 test_examples: int | None = None, state_path=None, shard: tuple[int, int] | None = None,
                 shard_out=None, scale: str | None = None, external: dict | None = None,
                 model_id: str | None = None) -> dict:
    """Evaluate a trained run's selected model on its test set.

    Unsharded: write the metrics JSON (scalars) and the predictions JSON (per-example correctness), atomically,
    and return the metrics. With ``shard=(k, n)``: evaluate only shard k of n (whole batches of the global
    grid) and write its partial result to ``shard_out`` for :func:`merge_shards`; return that partial result.
    ``state_path``: the resume file (see the module docstring). ``scale``: the scale the metrics record.
    ``external``: the checkpoint is an external model's (its resolved settings, tradeoff.external), ``model_id``
    its id."""
    loaded = _Loaded(checkpoint_path, data_root, device, test_examples, scale, external, model_id)
    job = AttackJob(attack_name, spec, metrics_out, predictions_out, state_path)
    return loaded.evaluate(job, batch_size=batch_size, seed=seed, shard=shard, shard_out=shard_out)


def evaluate_attacks(checkpoint_path, jobs: list[AttackJob], *, data_root, device: str = "auto",
                     batch_size: int = 500, seed: int = 0, test_examples: int | None = None,
                     scale: str | None = None, external: dict | None = None, model_id: str | None = None) -> list[dict]:
    """Evaluate one trained run under several attacks in turn, loading the model and the test set once.

    Every attack writes the same files, with the same numbers, as its own :func:`evaluate_run` call: batches are
    seeded by (seed, global batch index), never by what ran before in the process. Returns the metrics, in order.
    ``external``, ``model_id``: as for :func:`evaluate_run`."""
    loaded = _Loaded(checkpoint_path, data_root, device, test_examples, scale, external, model_id)
    return [loaded.evaluate(job, batch_size=batch_size, seed=seed) for job in jobs]


def evaluate_suite(checkpoint_path, specs: dict[str, dict], *, run_id: str, work: Callable[[str, str], Path],
                   metrics_out, predictions_out, data_root, device: str = "auto", batch_size: int = 500,
                   seed: int = 0, test_examples: int | None = None, scale: str | None = None,
                   external: dict | None = None, model_id: str | None = None) -> dict[str, dict]:
    """Evaluate one trained run under every attack of ``specs`` in one process, into ONE metrics file and ONE
    predictions file (runtime.eval_unit: run): ``{"format", "run", "evaluations": {attack: record}}``, each record
    exactly what the attack's own job (:func:`evaluate_run`) writes. Each attack resumes from its state file
    (``work(attack, ".state")``), and a finished attack is kept in ``work(attack, ".done.json")`` until the files
    are written, so a job killed after some attacks redoes none of them. Returns the records, in order.
    ``external``, ``model_id``: as for :func:`evaluate_run`."""
    loaded = _Loaded(checkpoint_path, data_root, device, test_examples, scale, external, model_id)
    metrics, predictions = {}, {}
    for name, spec in specs.items():
        done = Path(work(name, ".done.json"))
        key = state_key(loaded.state_digest, spec, seed, batch_size, len(loaded.x), 0)
        kept = _read_done(done, key)
        if kept is None:
            job = AttackJob(name, spec, state_path=work(name, ".state"))
            kept = dict(zip(("metrics", "predictions"), loaded.compute(job, batch_size=batch_size, seed=seed)))
            _write_json(done, {"key": key, **kept})
        else:
            log.info("%s / %s: already evaluated (%s)", run_id, name, done)
        metrics[name], predictions[name] = kept["metrics"], kept["predictions"]
    _write_json(metrics_out, {"format": SUITE_FORMAT, "run": run_id, "evaluations": metrics}, indent=1)
    _write_json(predictions_out, {"format": SUITE_FORMAT, "run": run_id, "evaluations": predictions})
    for name in specs:
        Path(work(name, ".done.json")).unlink(missing_ok=True)
    return metrics


def _read_done(path: Path, key: str) -> dict | None:
    """A finished attack of a suite kept in ``path`` (see evaluate_suite), if it is of this model and setting."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


class _Loaded:
    """A checkpoint's model and its run's test set, on the device, ready for any number of attacks."""

    def __init__(self, checkpoint_path, data_root, device: str, test_examples: int | None, scale: str | None,
                 external: dict | None = None, model_id: str | None = None):
        self.checkpoint_path, self.data_root, self.test_examples = checkpoint_path, data_root, test_examples
        self.model, self.meta, self.x, self.y, self.device, self.test_size = _load(checkpoint_path, data_root, device,
                                                                                   test_examples, external, model_id)
        self.scale = scale
        self._digest: str | None = None

    @property
    def context(self) -> dict:
        """What a metrics record says of where its numbers come from besides the model's own metadata."""
        return {"scale": self.scale, "model": self.digest, "test_examples": self.test_examples,
                "test_size": self.test_size}

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = sha256_file(self.checkpoint_path)[:16]
        return self._digest

    @property
    def state_digest(self) -> str:
        """What the model is, for a resume state: its file's digest, and an external model's settings (another
        normalisation of one file is another model)."""
        if self.meta.get("external") is None:
            return self.digest
        return f"{self.digest}-{spec_digest(self.meta['spec'])}"

    def evaluate(self, job: AttackJob, *, batch_size: int, seed: int, shard: tuple[int, int] | None = None,
                 shard_out=None) -> dict:
        """One attack's metrics (written to ``job.metrics_out`` and its predictions to ``job.predictions_out``
        when given), or with ``shard`` a shard's partial result (written to ``shard_out``)."""
        if shard is not None:
            return self._shard(job, batch_size=batch_size, seed=seed, shard=shard, shard_out=shard_out)
        metrics, predictions = self.compute(job, batch_size=batch_size, seed=seed)
        if job.metrics_out is not None:
            _write_json(job.metrics_out, metrics, indent=1)
        if job.predictions_out is not None:
            _write_json(job.predictions_out, predictions)
        return metrics

    def compute(self, job: AttackJob, *, batch_size: int, seed: int) -> tuple[dict, dict]:
        """One attack's (or one NROB's) metrics record and per-example predictions, resuming from and then removing
        ``job.state_path``."""
        if job.spec["type"] == CORRUPTIONS_TYPE:
            return self._corruptions(job, batch_size=batch_size)
        return self._shard(job, batch_size=batch_size, seed=seed, shard=None, shard_out=None)

    def _shard(self, job: AttackJob, *, batch_size: int, seed: int, shard: tuple[int, int] | None,
               shard_out) -> dict | tuple[dict, dict]:
        from .provenance import provenance

        model, meta, x, y, device = self.model, self.meta, self.x, self.y, self.device
        spec, attack_name = job.spec, job.attack_name
        if spec["type"] == CORRUPTIONS_TYPE:
            raise ValueError(f"{attack_name}: an evaluation on corrupted images is not sharded")
        n = len(x)
        first_batch, start, stop = (0, 0, n) if shard is None else shard_range(n, batch_size, *shard)
        state = None
        if job.state_path is not None:
            key = state_key(self.state_digest, spec, seed, batch_size, n, first_batch)
            state = EvalState(job.state_path, key)
        out = run_attack(model, x[start:stop], y[start:stop], spec, seed=seed, batch_size=batch_size,
                         first_batch=first_batch, state=state, progress=attack_name, whole=shard is None)
        checked = {"checks": out.checks} if spec["type"] in AUTOATTACK_FAMILY else {}  # the sanity checks' warnings
        if shard is not None:
            partial = {"format": "tradeoff-eval-shard/2", "run": meta["run"], "attack": attack_name, "spec": spec,
                       "seed": seed, "batch_size": batch_size, "examples_total": n, "shard": shard[0],
                       "shards": shard[1], "first_batch": first_batch, "start": start, "stop": stop,
                       "seconds": out.seconds, "breakdown": out.breakdown, "meta": meta, "context": self.context,
                       "provenance": provenance(device), **_predictions(meta["run"], attack_name, out), **checked}
            if shard_out is not None:
                _write_json(shard_out, partial)
            result = partial
        else:
            result = (_metrics(meta, attack_name, spec, out, seed=seed, batch_size=batch_size,
                               provenance=provenance(device), context=self.context,
                               extra={"resumed_batches": state.resumed_batches if state is not None else 0,
                                      **checked}),
                      _predictions(meta["run"], attack_name, out))
        if state is not None:
            state.remove()
        return result


    def _corruptions(self, job: AttackJob, *, batch_size: int) -> tuple[dict, dict]:
        """NROB on the entry's corruption dataset (``tradeoff.corruptions``): the metrics file's accuracy is the mean
        over corruptions of the mean over severities, and it records both; the predictions file has, per set,
        whether each corrupted image is classified correctly, and the images' labels. Deterministic (no attack, no
        seed), and quick enough to need no resume state."""
        from . import corruptions
        from .provenance import provenance

        meta, spec, model = self.meta, job.spec, self.model
        t0 = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            clean = corruptions.correct(model, self.x, self.y, batch_size=batch_size, device=self.device)
            result = corruptions.nrob(model, self.data_root, dataset=spec["dataset"], batch_size=batch_size,
                                      device=self.device, examples=self.test_examples)
        finally:
            model.train(was_training)
        seconds = time.perf_counter() - t0
        n = len(result["labels"])
        images = n * sum(len(accs) for accs in result["severities"].values())
        metrics = {
            **record(meta, job.attack_name, spec, self.context), "type": spec["type"],
            "params": {k: v for k, v in spec.items() if k != "type"},
            "accuracy": result["nrob"], "clean_accuracy": int(clean.sum()) / len(clean), "examples": n,
            "corrupted_images": images, "corruptions": result["corruptions"], "severities": result["severities"],
            "batch_size": batch_size, "seconds": seconds, "images_per_s": images / seconds if seconds else None,
            "corruption_dataset": spec["dataset"], "precision": "fp32", "libraries": {},
            "provenance": provenance(self.device),
        }
        return metrics, {"run": meta["run"], "attack": job.attack_name, "labels": result["labels"],
                         "corrupted_correct": result["correct"]}


class MergeError(UserError, ValueError):
    pass


def merge_shards(paths: list[str | Path], *, metrics_out=None, predictions_out=None) -> dict:
    """Merge the partial results of all shards of one (run, attack) into the metrics and predictions files an
    unsharded job writes; refuses shards that do not tile the example space exactly or disagree on settings."""
    parts = sorted((json.loads(Path(p).read_text()) for p in paths), key=lambda d: d["shard"])
    if not parts:
        raise MergeError("no shard files to merge")
    first = parts[0]
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
    out = Outcome(labels, unbits("".join(p["clean_correct"] for p in parts)),
                  unbits("".join(p["robust_correct"] for p in parts)), sum(p["seconds"] for p in parts), breakdown)
    checked = {}
    if first["spec"]["type"] in AUTOATTACK_FAMILY:  # the shards' warnings, then the checks of the whole evaluation
        checks = attacks.autoattack.CheckLog()
        checks.warnings = list(dict.fromkeys(text for p in parts for text in p.get("checks", [])))
        if first["spec"]["type"] == "autoattack":
            square_check(int(out.clean_correct.sum()), breakdown, len(labels), checks)
        checked = {"checks": checks.warnings}
    metrics = _metrics(first["meta"], first["attack"], first["spec"], out, seed=first["seed"],
                       batch_size=first["batch_size"], provenance=first["provenance"], context=first["context"],
                       extra={"shards": first["shards"], "shard_seconds": [p["seconds"] for p in parts], **checked})
    if metrics_out is not None:
        _write_json(metrics_out, metrics, indent=1)
    if predictions_out is not None:
        _write_json(predictions_out, _predictions(first["run"], first["attack"], out))
    return metrics
