"""The analysis-job plumbing: a figure names a registered analysis; its job writes one JSON that the figure
reads; the config refuses unknown names; Snakemake and DVC see the job."""

from __future__ import annotations

import copy
import json

import pytest

from tradeoff import analysis
from tradeoff import config as cfg
from tradeoff.core import targets
from tradeoff.storage import layout


def count_rows(catalog, target, params):
    """A stand-in analysis: counts the rows and echoes a parameter."""
    return {"rows": len(catalog.targets[target].rows), "echo": params["echo"]}


@pytest.fixture
def catalog_with_analysis(tmp_path, monkeypatch):
    monkeypatch.setitem(targets.ANALYSIS_KINDS, "count_rows", targets.AnalysisKind("count_rows"))  # declared
    monkeypatch.setitem(analysis.ANALYSES, "count_rows", analysis.Analysis("count_rows", count_rows))  # and run
    config = cfg.load_config([cfg.ROOT / "config/config.yaml", cfg.ROOT / "config/smoke.yaml"])
    config = copy.deepcopy(config)
    config["paths"]["results"] = str(tmp_path / "results")
    config["targets"]["fig_count"] = {
        "kind": "figure", "plot": "bars", "title": "count",
        "rows": [{"key": "nt", "run": "cifar10-resnet18-nt"}],
        "analysis": {"name": "count_rows", "echo": 7, "dataset": "mnist"}}
    return cfg.resolve(config)


def test_analysis_writes_its_json_and_lists_its_inputs(catalog_with_analysis):
    catalog = catalog_with_analysis
    assert "fig_count" in catalog.analysis_targets() and catalog.analysis_targets("fig_count") == ["fig_count"]
    assert catalog.analysis_train_ids("fig_count") == [catalog.train_id["cifar10-resnet18-nt"]]
    # its own dataset is remapped like a run's: the smoke scale maps every dataset to digits
    assert catalog.analysis_datasets("fig_count") == ["digits"]
    path = analysis.run_analysis(catalog, "fig_count")
    assert path == catalog.layout.analysis("fig_count")
    data = json.loads(path.read_text())
    assert (data["rows"], data["echo"], data["analysis"], data["scale"]) == (1, 7, "count_rows", "smoke")
    assert layout.read_analysis(catalog, "fig_count")["params"] == {"echo": 7, "dataset": "mnist"}


def test_unknown_analysis_is_refused_naming_the_key():
    config = copy.deepcopy(cfg.load_config([cfg.ROOT / "config/config.yaml", cfg.ROOT / "config/smoke.yaml"]))
    config["targets"]["fig_bad"] = {"kind": "figure", "plot": "bars", "rows": [],
                                    "analysis": {"name": "no-such-analysis"}}
    with pytest.raises(cfg.ConfigError, match=r"targets\.fig_bad\.analysis\.name.*no-such-analysis"):
        cfg.resolve(config)


def test_dvc_export_has_an_analysis_stage(catalog_with_analysis):
    from tradeoff.pipeline.dvc_export import digest, jobs, stages

    stage = stages(catalog_with_analysis, ["config/config.yaml"])["analyze@fig_count"]
    assert stage["cmd"].endswith("analyze fig_count")
    # the checkpoints it reads: its run's model.pt, or the checkpoints folder when it reads several
    assert any(d.endswith("model.pt") or d.endswith("/checkpoints") for d in stage["deps"])
    settings = catalog_with_analysis.targets["fig_count"].analysis.as_dict()
    assert settings["name"] == "count_rows" and jobs(catalog_with_analysis)["analyze"]["fig_count"]["settings"] == \
        digest(settings)  # a stage's params: the digest of its resolved settings
