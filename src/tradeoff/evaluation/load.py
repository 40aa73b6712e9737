"""Loading a model to measure: one function, :func:`load_model`, for the three kinds of model the pipeline evaluates,
audits, analyses and benchmarks, each described by a typed source:

- :class:`RunModel`: a catalog run's selected model, its training job's model.pt (read by
  tradeoff.evaluation.trained);
- :class:`ExternalCheckpoint`: a checkpoint file of a registered architecture that this pipeline did not train (the
  config's ``external:``, or ``tradeoff evaluate --checkpoint FILE --arch A --dataset D``;
  tradeoff.evaluation.external);
- :class:`UserModelFile`: a model that FUNCTION() of the user's own Python file builds (``--model FILE.py:FUNCTION``,
  an ``external:`` entry of format python; tradeoff.evaluation.user_model).

Every one comes back in eval mode and fp32, on the device, with its metadata (``run``, ``spec``, ``num_classes``,
``in_channels``, ``image_size``, ...: a model.pt's, and for the others ``external``: the file's SHA-256 and how it
was read), whose settings :func:`model_settings` reads typed. :func:`source_for` makes the source of a catalog's
model from where the catalog keeps it (``Catalog.model_location``: a run as its training job's model, under its train
id; an external model as its file): evaluation takes sources and paths, never the catalog.

Importing this module does not import PyTorch (tradeoff.pipeline.evaluation_jobs describes models without it): the readers
are imported by :func:`load_model`, which runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from tradeoff.core.spec import ExternalSpec, RunSpec, model_spec

if TYPE_CHECKING:
    import torch
    from torch import nn

#: the external-model format of a model from a Python file (tradeoff.evaluation.user_model), which --model sets
PYTHON_FORMAT = "python"


@dataclass(frozen=True)
class RunModel:
    """A trained run's selected model: its model.pt. ``model_id``: the run's train id (the folder its files are in),
    None where it is not known (the model.pt records its run)."""
    path: Path
    model_id: str | None = None


@dataclass(frozen=True)
class ExternalCheckpoint:
    """A checkpoint file of a registered architecture, read as its resolved settings say (``spec``: arch, dataset,
    normalize, format, sha256); ``model_id``: its id, which its metadata's ``run`` names."""
    path: Path
    spec: ExternalSpec
    model_id: str = "external"


@dataclass(frozen=True)
class UserModelFile:
    """The user's Python file whose FUNCTION() builds the model (``spec.arch`` is ``python:FUNCTION``); ``model_id``
    as an external checkpoint's."""
    path: Path
    spec: ExternalSpec
    model_id: str = "external"


ModelSource = Union[RunModel, ExternalCheckpoint, UserModelFile]


def external_source(path: str | Path, spec: ExternalSpec,
                    model_id: str = "external") -> ExternalCheckpoint | UserModelFile:
    """A model this pipeline did not train, by its resolved settings: a user's Python file where its format is
    python, else a checkpoint file."""
    kind = UserModelFile if spec.format == PYTHON_FORMAT else ExternalCheckpoint
    return kind(Path(path), spec, model_id)


def source_for(model_id: str, path: str | Path, external: ExternalSpec | None = None) -> ModelSource:
    """A model by where the catalog keeps it (``Catalog.model_location``: its train id, its file, an external
    model's settings): a run's model.pt, or an external model's file."""
    return RunModel(Path(path), model_id) if external is None else external_source(path, external, model_id)


def load_model(source: ModelSource, device: torch.device | str = "cpu") -> tuple[nn.Module, dict]:
    """The model ``source`` describes, in eval mode and fp32 on ``device``, with its metadata. CheckpointError (one
    line naming the file) for a file that cannot be read or does not fit; UserModelError for a user's file that
    fails."""
    from tradeoff.evaluation import external, trained, user_model  # PyTorch: see the module's docstring

    if isinstance(source, RunModel):
        return trained.load(source.path, device)
    if isinstance(source, UserModelFile):
        return user_model.load(source.path, source.spec, device, model_id=source.model_id)
    if isinstance(source, ExternalCheckpoint):
        return external.load(source.path, source.spec, device, model_id=source.model_id)
    raise TypeError(f"not a model source: {source!r} (a RunModel, ExternalCheckpoint or UserModelFile)")


def model_settings(meta: dict) -> RunSpec | ExternalSpec:
    """The settings of a loaded model, typed: its metadata's ``spec`` (the JSON form that a model.pt, or an external
    model's load, records) as a run's or an external model's."""
    return model_spec(meta["spec"])
