"""Outputs that hash by what they compute: a model, a metrics file, an analysis, an audit record hold only what was
computed; the commit, versions, device and the clock's measurements go into the output's sidecar
(``<output>.provenance.json``, tradeoff.storage.provenance), which the reports read for Table 4's minutes, the
machines it ran on and the RobustBench export's commit, and whose absence they say instead of failing."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from helpers import ROOT
from report_fixtures import write_curves

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.evaluation.evaluate import AttackJob, Evaluation, evaluate
from tradeoff.evaluation.load import RunModel
from tradeoff.report import records
from tradeoff.storage import checkpoint, provenance
from tradeoff.storage.layout import Layout
from tradeoff.training.train import train

SMOKE = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]
NT = "cifar10-resnet18-nt"


def _md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _at_commit(monkeypatch, commit: str, host: str) -> None:
    """Pretend this process runs the code of another commit, on another host."""
    monkeypatch.setattr(provenance, "git_commit", lambda: commit)
    monkeypatch.setattr(provenance.platform, "node", lambda: host)


def test_a_sidecar_lies_beside_its_output_and_a_folder_listing_skips_it(tmp_path):
    out = tmp_path / "metrics" / "run" / "pgd.json"
    assert Layout.sidecar(out) == out.with_name("pgd.json.provenance.json") and Layout.is_sidecar(Layout.sidecar(out))
    assert not Layout.is_sidecar(out) and provenance.read_sidecar(out) is None  # none written: None, no error
    path = provenance.write_sidecar(out, {"seconds": 1.5})
    body = json.loads(path.read_text())
    assert body["of"] == "pgd.json" and body["seconds"] == 1.5 and body["provenance"]["git_commit"]
    assert provenance.read_sidecar(out) == body
    path.write_text("{truncated")
    with pytest.raises(provenance.SidecarError, match="pgd.json.provenance.json: not valid JSON"):
        provenance.read_sidecar(out)
    assert ".provenance.json" in (ROOT / ".dvcignore").read_text()  # no report stage depends on a sidecar


def test_two_saves_of_the_same_state_are_the_same_bytes(tmp_path):
    torch.manual_seed(0)
    state = {"model": torch.nn.Conv2d(3, 4, 3).state_dict(), "meta": json.dumps({"run": "r"})}
    checkpoint.save(state, tmp_path / "a.pt")
    checkpoint.save({k: v for k, v in state.items()}, tmp_path / "b.pt")
    assert _md5(tmp_path / "a.pt") == _md5(tmp_path / "b.pt")


def test_a_model_and_its_metrics_rebuilt_at_another_commit_on_another_host_are_the_same_bytes(tmp_path,
                                                                                           monkeypatch):
    """Train and evaluate one run twice, at two commits and on two hosts: the model and the metrics file are
    byte-identical; only their sidecars differ (commit, host, seconds)."""
    catalog = cfg.load_catalog(SMOKE)
    spec = catalog.runs[NT]
    built = {}
    for commit, host in (("a" * 40, "node-a"), ("b" * 40, "node-b")):
        _at_commit(monkeypatch, commit, host)
        results = tmp_path / commit[0]
        paths = train(NT, spec, results=results, data_root=catalog.data_root,
                      runtime=Runtime(torch.device("cpu")), eval_batch_size=200, progress=False)
        metrics = results / "metrics.json"
        evaluate(Evaluation(RunModel(paths.model, NT), catalog.data_root,
                            (AttackJob("pgd", catalog.attack_for("pgd20", NT), metrics_out=metrics),),
                            device="cpu", batch_size=32, test_examples=32, scale="smoke"))
        built[commit[0]] = paths.model, metrics
    (model_a, metrics_a), (model_b, metrics_b) = built["a"], built["b"]
    assert _md5(model_a) == _md5(model_b) and metrics_a.read_bytes() == metrics_b.read_bytes()
    for path, commit in ((model_a, "a" * 40), (model_b, "b" * 40), (metrics_a, "a" * 40), (metrics_b, "b" * 40)):
        assert provenance.read_sidecar(path)["provenance"]["git_commit"] == commit
    record = json.loads(metrics_a.read_text())
    assert not {"seconds", "images_per_s", "provenance", "libraries", "resumed_batches"} & set(record)
    assert provenance.read_sidecar(metrics_a)["seconds"] > 0
    assert all(e["seconds"] > 0 for e in provenance.training_epochs(model_a))
    assert "provenance" not in json.loads(checkpoint.load(model_a)["meta"])


def test_a_model_written_by_a_resumed_run_is_the_same_file_as_one_trained_straight_through(tmp_path):
    """Generalist (learners, snapshots): its job run again after it finished resumes from its last state and writes
    the model again; the values are equal, and so are the bytes (checkpoint.canonical: no sharing of strings or
    storages that the in-memory graph had and the loaded one has not)."""
    catalog = cfg.load_catalog(SMOKE)
    run_id = "cifar10-resnet18-generalist"
    kw = dict(results=tmp_path, data_root=catalog.data_root, runtime=Runtime(torch.device("cpu")),
              eval_batch_size=200, progress=False)
    paths = train(run_id, catalog.runs[run_id], **kw)
    straight = paths.model.read_bytes()
    assert checkpoint.list_states(paths.state)  # the last epoch's state, which the second call resumes from
    paths.model.unlink()
    train(run_id, catalog.runs[run_id], **kw)
    assert paths.model.read_bytes() == straight


def _catalog(tmp_path):
    config = cfg.load_config(SMOKE)
    config["paths"]["results"] = str(tmp_path / "results")
    config["targets"]["tab"] = {"kind": "table", "title": "t", "rows": [{"key": "m", "run": NT}],
                                "columns": {"minutes": "train:minutes"}}
    return cfg.resolve(config)


def test_table4s_minutes_and_machines_come_from_the_models_sidecar_and_say_when_it_is_missing(tmp_path):
    catalog = _catalog(tmp_path)
    write_curves(catalog, NT, [{"epoch": 1, "seconds": 60.0, "precision": "fp32", "device": "NVIDIA H100"},
                               {"epoch": 2, "seconds": 120.0, "precision": "fp32", "device": "NVIDIA H100"}])
    curves = catalog.layout.curves(catalog.train_id[NT])
    assert "seconds" not in (curves / "metrics.json").read_text()  # the curves are DVC outputs: no clock in them
    assert records.training_minutes(catalog, NT) == pytest.approx(3.0)
    assert records.training_machines(catalog, NT) == {("NVIDIA H100", "fp32")}
    sidecar = Layout.sidecar(catalog.layout.model(catalog.train_id[NT]))
    sidecar.unlink()  # a model pulled from a DVC remote comes without it: not recorded, not a corrupt output
    assert records.training_minutes(catalog, NT) is None
    assert records.training_machines(catalog, NT) == {(f"device not recorded (no {sidecar})", "fp32")}
    sidecar.write_text("not json")
    with pytest.raises(records.ReportError, match="not valid JSON"):
        records.training_minutes(catalog, NT)


def test_an_audits_sidecar_is_not_read_as_an_audit(tmp_path):
    catalog = _catalog(tmp_path)
    record = catalog.layout.audit("m")["json"]
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"checks": [{"name": "masking", "verdict": "fail", "summary": "s"}]}))
    provenance.write_sidecar(record, {"seconds": 1.0})
    assert records.failed_checks(catalog) == [("m", "masking", "s")]
