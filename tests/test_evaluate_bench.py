"""bench-eval: images/s per attack of the suite on a checkpoint, as JSON in results/bench/."""

from __future__ import annotations

import json

import pytest
from helpers import data_root

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.pipeline.bench.evaluate import bench_eval, format_bench_eval, lpt_makespan
from tradeoff.training.train import train

ROOT = cfg.ROOT


def test_bench_eval_times_each_attack_of_a_table(tmp_path):
    overlay = tmp_path / "paths.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}, data: {data_root()}}}\n")
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay])
    run = "cifar10-resnet18-nt"
    train(run, catalog.runs[run], results=catalog.results, data_root=catalog.data_root,
          runtime=Runtime.from_config({"device": "cpu"}), progress=False)
    result = bench_eval(catalog, run, attacks=["clean", "pgd20", "mim"], out_dir=catalog.results / "bench")
    assert list(result["attacks"]) == ["clean", "pgd20", "mim"]
    for row in result["attacks"].values():
        assert row["examples"] == 64 and row["seconds"] > 0 and row["images_per_s"] > 0
        assert 0 <= row["accuracy"] <= row["clean_accuracy"] <= 1
    saved = json.loads((catalog.results / "bench" / f"eval-cpu-{run}.json").read_text())
    assert saved["attacks"]["pgd20"]["accuracy"] == result["attacks"]["pgd20"]["accuracy"]
    assert "images/s" in format_bench_eval(result)
    table = bench_eval(catalog, run, target="table1a")  # default: the columns of a table
    assert set(table["attacks"]) == set(catalog.targets["table1a"].columns.values())
    with pytest.raises(cfg.ConfigError, match="no checkpoint"):
        bench_eval(catalog, "cifar10-resnet18-at-beta1", attacks=["clean"])


def test_lpt_makespan():
    assert lpt_makespan([5, 4, 3, 3], 2) == 8  # 5+3 | 4+3
    assert lpt_makespan([2, 1], 1) == 3
