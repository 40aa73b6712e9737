"""The per-epoch selection measures a validation split held out of the training data, never the test split (issue 28,
point 8): the split's draw, that training never sees a validation image and the selection never a test image, the
named option `selection.split: test`, what the model and metrics files record, the configuration's refusals, and
the tables' note."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tradeoff import config as cfg
from tradeoff import data
from tradeoff.core.errors import ConfigError
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import CLEAN
from tradeoff.data import splits
from tradeoff.evaluation import records
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.report import table_notes
from tradeoff.storage.curves import read_curves
from tradeoff.storage.layout import Layout
from tradeoff.training import train as train_module

SMOKE = [cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "smoke.yaml"]
PAPER = [cfg.ROOT / "config" / "config.yaml"]
RUN = "cifar10-resnet18-nt"  # mode best (the Generalist preset) at every scale
N_TRAIN, N_TEST, SCALE = 1437, 360, 4096  # digits' split; tags are multiples of 1 / SCALE (exact in float32)


def _smoke(**changes):
    config = cfg.load_config(SMOKE)
    config["scale_map"]["train_examples"] = None  # every training digit left by the validation split trains
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = config
        for part in parents:
            node = node[part]
        node[last] = value
    return cfg.resolve(config)


def _tagged(monkeypatch):
    """data.load returns digits-shaped images whose first pixel names them: training image i holds (i + 1) / SCALE,
    test image j 0.5 + (j + 1) / SCALE; labels i mod 10."""
    gen = torch.Generator().manual_seed(0)
    x_train, x_test = torch.rand(N_TRAIN, 1, 8, 8, generator=gen), torch.rand(N_TEST, 1, 8, 8, generator=gen)
    x_train[:, 0, 0, 0] = (torch.arange(N_TRAIN) + 1) / SCALE
    x_test[:, 0, 0, 0] = 0.5 + (torch.arange(N_TEST) + 1) / SCALE
    fake = data.Data(x_train, torch.arange(N_TRAIN) % 10, x_test, torch.arange(N_TEST) % 10, 10,
                     tuple("0123456789"), "digits")
    monkeypatch.setattr(splits, "load", lambda name, root="data", download=False: fake)


def _tags(x: torch.Tensor) -> set[int]:
    return {round(float(v) * SCALE) for v in x[:, 0, 0, 0]}


TRAIN_TAGS = set(range(1, N_TRAIN + 1))
TEST_TAGS = {SCALE // 2 + j + 1 for j in range(N_TEST)}


def _train_spied(monkeypatch, catalog, tmp_path, spec=None) -> tuple[set[int], set[int], dict]:
    """Train RUN (with ``spec``, else its catalog settings); the tags of every image a training step saw, of every
    image the per-epoch measurement read, and the model file's metadata."""
    trained, measured = set(), set()
    augment, accuracy_under = train_module.augment, train_module.accuracy_under

    def seen(x, *args, **kwargs):
        trained.update(_tags(x))
        return augment(x, *args, **kwargs)

    def read(model, x, *args, **kwargs):
        measured.update(_tags(x))
        return accuracy_under(model, x, *args, **kwargs)

    monkeypatch.setattr(train_module, "augment", seen)
    monkeypatch.setattr(train_module, "accuracy_under", read)
    paths = train_module.train(RUN, spec or catalog.runs[RUN], results=tmp_path, data_root=tmp_path,
                               runtime=Runtime(torch.device("cpu")), eval_batch_size=200, progress=False)
    return trained, measured, load_model(RunModel(paths.model))[1]


# ------------------------------------------------------------------------------------------------ the split


def test_validation_split_is_stratified_fixed_and_disjoint_from_training():
    y = torch.tensor([0] * 500 + [1] * 301 + [2] * 150 + [3] * 49)[torch.randperm(1000, generator=torch.Generator()
                                                                                   .manual_seed(1))]
    val = data.validation_indices(y, 100)
    assert len(val) == len(set(val.tolist())) == 100 and torch.equal(val, data.validation_indices(y, 100))
    counts = torch.bincount(y[val], minlength=4).tolist()
    assert all(abs(c - share) < 1 for c, share in zip(counts, (50, 30.1, 15, 4.9))), counts  # stratified
    x = torch.arange(1000).float()[:, None]  # each "image" its index
    x_tr, y_tr, x_val, y_val = data.hold_out(x, y, 100)
    assert set(x_val[:, 0].long().tolist()) == set(val.tolist())
    assert set(x_tr[:, 0].long().tolist()) == set(range(1000)) - set(val.tolist()) and len(x_tr) == 900
    assert torch.equal(y_val, y[val]) and len(data.hold_out(x, y, 0)[2]) == 0
    with pytest.raises(data.DatasetError, match="none of the 1000 training images"):
        data.hold_out(x, y, 1000)


def test_run_data_hold_the_configured_validation_split_out_of_training(monkeypatch, tmp_path):
    _tagged(monkeypatch)
    spec = _smoke().runs[RUN]
    assert (spec.selection.split, spec.selection.validation) == ("validation", 64)  # config/smoke.yaml
    ds = data.load_run_data(spec, tmp_path)
    assert len(ds.x_val) == 64 and _tags(ds.x_val) <= TRAIN_TAGS
    assert _tags(ds.x_train) == TRAIN_TAGS - _tags(ds.x_val) and len(ds.x_train) == N_TRAIN - 64
    # the same images for every run of the dataset, whatever its seed
    assert torch.equal(data.load_run_data(spec.replace(seed=7), tmp_path).x_val, ds.x_val)


# -------------------------------------------------------------------------------------------- training


def test_training_never_sees_a_validation_image_and_selection_never_reads_the_test_split(monkeypatch, tmp_path):
    _tagged(monkeypatch)
    catalog = _smoke()
    validation = _tags(data.load_run_data(catalog.runs[RUN], tmp_path).x_val)
    trained, measured, meta = _train_spied(monkeypatch, catalog, tmp_path)
    assert trained == TRAIN_TAGS - validation  # every training image but the validation split's, no test image
    assert measured == validation  # every epoch measured the validation split, and nothing else
    assert meta["selection_split"] == "validation" and meta["selection_images"] == 64
    assert meta["validation_images"] == 64 and meta["spec"]["selection"]["validation"] == 64
    # the metrics files of the model's evaluations say it too (tradeoff.evaluation.records.record)
    record = records.record(meta, "clean", CLEAN,
                            {"scale": "smoke", "model": "x", "test_examples": None, "test_size": N_TEST})
    assert (record["selection_split"], record["selection_images"], record["validation_images"]) == (
        "validation", 64, 64)


def test_split_test_is_a_named_option(monkeypatch, tmp_path):
    _tagged(monkeypatch)
    catalog = _smoke(**{"train_presets.generalist-resnet18.selection.split": "test"})
    spec = catalog.runs[RUN]
    assert (spec.selection.split, spec.selection.validation) == ("test", 0)
    assert cfg.spec_digest(spec) != cfg.spec_digest(_smoke().runs[RUN])  # another training job
    trained, measured, meta = _train_spied(monkeypatch, catalog, tmp_path)
    assert trained == TRAIN_TAGS  # nothing held out: the authors' practice
    assert measured and measured <= TEST_TAGS and len(measured) == 64  # the smoke scale's 64 test images
    assert (meta["selection_split"], meta["selection_images"], meta["validation_images"]) == ("test", 64, 0)


def test_a_dataset_without_a_validation_split_trains_on_everything_and_measures_nothing(monkeypatch, tmp_path):
    """validation.<dataset>: 0 (CUB-200 and Stanford Dogs at the paper scale), for a run that keeps its last epoch:
    every training image trains, no image is measured per epoch (its curves have no accuracy), and nothing chose
    the epoch."""
    _tagged(monkeypatch)
    catalog = _smoke()
    base = catalog.runs[RUN]
    spec = base.replace(selection=base.selection.replace(mode="last", validation=0))
    trained, measured, meta = _train_spied(monkeypatch, catalog, tmp_path, spec)
    assert trained == TRAIN_TAGS and measured == set()
    assert (meta["selection_split"], meta["selection_images"], meta["validation_images"]) == (None, None, 0)
    assert meta["selected_epoch"] == spec.epochs
    rows = read_curves(Layout(tmp_path).run(RUN).curves)
    assert len(rows) == spec.epochs and all(row.get("eval_clean") is None for row in rows)


def test_a_run_that_keeps_its_last_epoch_records_no_selection_split():
    paper = cfg.load_catalog(PAPER, write_cache=False)
    last = paper.runs["cub200-swin_t_adapter-vanilla-lambda0"].selection
    assert (last.mode, last.validation) == ("last", 0)  # validation.cub200: 0, nothing chosen
    assert last.record(5794) == {"selection_split": None, "selection_images": None, "validation_images": 0}
    best = paper.runs["cifar10-resnet18-generalist"]
    assert best.selection.record(10000) == {"selection_split": "validation", "selection_images": 1000,
                                            "validation_images": 1000}
    assert best.trained_images(50000) == 49000  # what Generalist's EMA window and the cost formulas count
    assert paper.runs["tinyimagenet-resnet18-generalist"].selection.validation == 2000


# ------------------------------------------------------------------------------------------- the config


@pytest.mark.parametrize("change, message", [
    ({"validation.digits": 1437}, "validation.digits: 1437 images would leave none of digits's 1437 training images"),
    ({"validation.digits": 0}, "validation.digits: 0 images, but runs."),
    ({"validation": {"cifar10": 1000}}, "validation.digits: no validation split for dataset 'digits'"),
    ({"validation.cifar11": 5}, "validation.cifar11: unknown value 'cifar11'"),
    ({"validation.digits": -1}, "validation.digits"),
    ({"validation.digits": 2.5}, "validation.digits"),
    ({"train_presets.generalist-resnet18.selection.split": "train"}, "selection.split"),
])
def test_a_bad_validation_size_or_split_is_refused_in_one_line_naming_the_key(change, message):
    with pytest.raises(ConfigError) as err:
        _smoke(**change)
    assert message in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------- the tables


def test_every_table_says_which_split_chose_the_epoch():
    def rows(catalog, *runs):
        return [SimpleNamespace(runs=[run], label=run.split("-")[-1]) for run in runs]

    smoke = _smoke()
    note = table_notes._selection_split_note(smoke, rows(smoke, RUN, "cifar10-resnet18-generalist"))
    assert note.startswith("Split that chose the epoch: the validation split (64 images held out of the training "
                           "split, never trained on") and " for " not in note
    mixed = table_notes._selection_split_note(smoke, rows(smoke, RUN, "digits-vit_tiny-pgd_at"))
    assert "the validation split (64 images" in mixed and mixed.endswith("none (the last epoch is the model) for "
                                                                         "pgd_at.")
    on_test = _smoke(**{"train_presets.generalist-resnet18.selection.split": "test"})
    assert "the test split (`selection.split: test`" in table_notes._selection_split_note(on_test, rows(on_test, RUN))
