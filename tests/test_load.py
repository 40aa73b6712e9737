"""One model loader (tradeoff.evaluation.load): every caller loads a catalog run, an external checkpoint or a user's
model file through ``load_model(source)``; the kinds' readers (``trained``, ``external``, ``user_model``) are reached
from there only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch
from helpers import ROOT

from tradeoff import config as cfg
from tradeoff.core.spec import ExternalSpec
from tradeoff.evaluation.load import (
    ExternalCheckpoint,
    RunModel,
    UserModelFile,
    external_source,
    load_model,
    source_for,
)
from tradeoff.storage.checkpoint import CheckpointError

SRC = ROOT / "src" / "tradeoff"
#: the readers of each kind, by module, and the names in it that read a model
READERS = {"tradeoff.evaluation.trained": {"load"}, "tradeoff.evaluation.external": {"load"},
           "tradeoff.evaluation.user_model": {"load", "build"}}


def _reads_a_model_itself(path: Path) -> list[str]:
    """Where a module calls a kind's reader itself: imports one of its reading names, or calls one on the module."""
    found, aliases = [], {}
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in READERS:  # trained is nothing but its reader
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if a.name in READERS[node.module] or node.module == "tradeoff.evaluation.trained"]
        elif isinstance(node, ast.ImportFrom) and node.module == "tradeoff.evaluation":
            aliases.update({a.asname or a.name: f"tradeoff.evaluation.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.attr in READERS.get(aliases.get(node.value.id, ""), ())):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_every_caller_loads_a_model_through_load_model():
    owners = {SRC / "evaluation" / "load.py", SRC / "evaluation" / "user_model.py"}  # user_model.load builds
    offenders = {str(path.relative_to(ROOT)): hits for path in sorted(SRC.rglob("*.py")) if path not in owners
                 for hits in [_reads_a_model_itself(path)] if hits}
    assert offenders == {}


def test_the_check_sees_a_reader_called_directly(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("from tradeoff.evaluation.trained import load\nfrom tradeoff.evaluation import external as ext\n"
                      "def f(p, s):\n    return ext.load(p, s)\n")
    assert len(_reads_a_model_itself(sneaky)) == 2


def _spec(**kw) -> ExternalSpec:
    return ExternalSpec.from_dict({"checkpoint": "m", "sha256": None, "arch": "small_cnn", "dataset": "digits",
                                   "paper_dataset": "digits", "paper_arch": "small_cnn", "normalize": None,
                                   "format": "auto", **kw})


def test_an_external_model_is_a_checkpoint_or_a_users_file_by_its_format(tmp_path):
    assert external_source(tmp_path / "m.pt", _spec(), "m") == ExternalCheckpoint(tmp_path / "m.pt", _spec(), "m")
    python = _spec(arch="python:build", format="python")
    assert external_source(str(tmp_path / "d.py"), python, "d") == UserModelFile(tmp_path / "d.py", python, "d")


def test_a_users_model_file_loads_with_an_external_models_metadata(tmp_path):
    (tmp_path / "defence.py").write_text("import torch\nfrom torch import nn\n\ndef build():\n"
                                         "    torch.manual_seed(0)\n    return nn.Sequential(nn.Flatten(), "
                                         "nn.Linear(64, 10)).double()\n")
    spec = _spec(checkpoint=str(tmp_path / "defence.py"), arch="python:build", format="python")
    model, meta = load_model(external_source(tmp_path / "defence.py", spec, "defence"))
    assert not model.training and next(model.parameters()).dtype == torch.float32
    assert meta["run"] == "defence" and meta["external"]["function"] == "build"
    assert meta["external"]["layout"] == "python" and json.dumps(meta)  # JSON, as a metrics record holds it
    with pytest.raises(CheckpointError, match="no such file"):
        load_model(RunModel(tmp_path / "absent" / "model.pt"))
    with pytest.raises(TypeError, match="not a model source"):
        load_model(tmp_path / "defence.py")  # a bare path says not which kind of model it holds


def test_a_catalogs_model_is_its_training_jobs_file_or_its_external_file(tmp_path):
    class Layout:
        def model(self, run_id):
            return tmp_path / "checkpoints" / run_id / "model.pt"

    class Catalog:  # what Catalog.model_location reads of a tradeoff.config.Catalog
        layout = Layout()
        train_id = {"nt": "nt", "nt-eval": "nt", "zoo": "zoo"}
        externals = {"zoo": _spec(checkpoint=str(tmp_path / "zoo.pt"))}

        def model_file(self, model_id):
            return (Path(self.externals[model_id].checkpoint) if model_id in self.externals
                    else self.layout.model(model_id))

    catalog = Catalog()

    def source(model_id):
        return source_for(*cfg.Catalog.model_location(catalog, model_id))

    assert source("nt-eval") == RunModel(tmp_path / "checkpoints" / "nt" / "model.pt", "nt")
    assert source("zoo") == ExternalCheckpoint(tmp_path / "zoo.pt", catalog.externals["zoo"], "zoo")
