"""The rehearsal scale's generated datasets (tradeoff.data.generated): written in each dataset's real format, read by
the real readers of tradeoff.data under a GeneratedDataRoot only, verified against their GENERATED.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tradeoff import config as cfg
from tradeoff import data
from tradeoff.data import generated as rehearsal_data
from tradeoff.data.roots import GeneratedDataRoot
from tradeoff.models import adapters

ROOT = cfg.ROOT
REHEARSAL = [ROOT / "config" / "config.yaml", ROOT / "config" / "rehearsal.yaml"]

# (dataset, image shape, classes): the paper's shapes, which the real readers must produce from the generated files
SHAPES = [
    ("cifar10", (3, 32, 32), 10),
    ("cifar100", (3, 32, 32), 100),
    ("svhn", (3, 32, 32), 10),
    ("mnist", (1, 28, 28), 10),
    ("tinyimagenet", (3, 64, 64), 200),
    pytest.param("cub200", (3, 224, 224), 200, marks=pytest.mark.slow),  # ~600 photos resized and cropped
    pytest.param("stanford-dogs", (3, 224, 224), 120, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name,shape,classes", SHAPES)
def test_generated_dataset_is_read_by_the_real_reader(tmp_path, name, shape, classes):
    root = GeneratedDataRoot(tmp_path)
    folder = data.download(name, root)  # generates (never fetches) under a GeneratedDataRoot
    marker = json.loads((folder / rehearsal_data.MARKER).read_text())
    assert marker["generated"] and marker["dataset"] == name and marker["md5"]
    ds = data.load(name, root)
    assert ds.image_shape == shape and ds.num_classes == classes and len(ds.classes) == classes
    assert ds.x_train.dtype.is_floating_point and 0 <= ds.x_train.min() and ds.x_train.max() <= 1
    # every class in the training split, labels in range
    assert set(ds.y_train.tolist()) == set(range(classes))
    assert int(ds.y_test.max()) < classes and len(ds.x_test) == len(ds.y_test) > 0


def test_generated_corruptions_are_read_with_tiny_imagenet_labels(tmp_path):
    root = GeneratedDataRoot(tmp_path)
    data.download("tinyimagenet", root)
    data.download("tinyimagenet-c", root)
    sets = data.load_corruptions(root, corruptions=["fog", "jpeg_compression"], severities=[1, 5])
    x, y = sets[("fog", 5)]
    assert x.shape[1:] == (3, 64, 64) and len(x) == len(y) == 20
    assert y.tolist() == list(range(20))  # the first 20 wnids of Tiny ImageNet's sorted classes


def test_generation_is_deterministic(tmp_path):
    assert rehearsal_data.write("cifar10", tmp_path / "a") == rehearsal_data.write("cifar10", tmp_path / "b")


def test_a_plain_root_refuses_generated_files(tmp_path):
    data.download("cifar10", GeneratedDataRoot(tmp_path))
    for call in (lambda: data.load("cifar10", tmp_path), lambda: data.load("cifar10", str(tmp_path)),
                 lambda: data.download("cifar10", tmp_path)):
        with pytest.raises(data.DatasetError, match="holds generated files.*scale_map.generated_data"):
            call()


@pytest.mark.parametrize("name,relative", [("cifar10", "cifar-10-batches-py/data_batch_2"),
                                           ("svhn", "test_32x32.mat"), ("mnist", "MNIST/raw/t10k-labels-idx1-ubyte.gz")])
def test_a_changed_generated_file_fails_its_checksum(tmp_path, name, relative):
    root = GeneratedDataRoot(tmp_path)
    folder = data.download(name, root)
    path = folder / relative
    content = path.read_bytes()
    path.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))
    assert not data.is_downloaded(name, root)
    with pytest.raises(data.DatasetError, match="not ready"):
        data.load(name, root)


def test_a_changed_generated_archive_is_not_extracted(tmp_path, monkeypatch):
    write = rehearsal_data.write

    def write_then_change(name, folder):  # the archive no longer the one its marker names
        checksums = write(name, folder)
        with open(Path(folder) / "tiny-imagenet-200.zip", "ab") as stream:
            stream.write(b"\0")
        return checksums

    monkeypatch.setattr(rehearsal_data, "write", write_then_change)
    folder = GeneratedDataRoot(tmp_path) / "tinyimagenet"
    with pytest.raises(data.DatasetError, match="fails the md5"):
        data.DATASETS["tinyimagenet"].generate(folder)
    assert not (folder / "tiny-imagenet-200").exists()


def test_the_rehearsal_scale_reads_generated_data_and_keeps_paper_shapes():
    catalog = cfg.load_catalog(REHEARSAL)
    assert catalog.scale == "rehearsal"
    assert isinstance(catalog.data_root, GeneratedDataRoot)
    paper = cfg.load_catalog(REHEARSAL[:1])
    assert not isinstance(paper.data_root, GeneratedDataRoot)
    for run_id, spec in catalog.runs.items():
        ref = paper.runs[run_id]
        for key in ("dataset", "arch", "batch_size", "optimizer", "augment"):
            assert getattr(spec, key) == getattr(ref, key), (run_id, key)
        # two steps of the run's own batch (CA-AT's 1024, the others' 128)
        assert spec.train_examples == 2 * ref.batch_size and spec.test_examples == 100
        assert spec.epochs == 2


def test_generated_data_is_refused_at_the_paper_scale():
    config = cfg.load_config(REHEARSAL)
    config["scale"] = "paper"
    with pytest.raises(cfg.ConfigError, match="scale_map.generated_data: the paper scale reads the real datasets"):
        cfg.resolve(config)


def test_a_generated_root_keeps_its_permission_along_paths(tmp_path):
    root = GeneratedDataRoot(tmp_path)
    assert isinstance(data.DATASETS["cifar10"].folder(root) / "x", GeneratedDataRoot)
    assert not isinstance(data.DATASETS["cifar10"].folder(str(tmp_path)), GeneratedDataRoot)
    assert isinstance(Path(tmp_path), Path) and not isinstance(Path(tmp_path), GeneratedDataRoot)


@pytest.mark.parametrize("arch", ["swin_t_adapter", "vit_b16_adapter"])
def test_a_generated_backbone_is_loaded_by_the_real_loader(tmp_path, arch):
    import torch

    from tradeoff.models import create_model

    path = adapters.write_backbone(arch, tmp_path / "pretrained" / f"{arch}.pth")
    model = create_model(arch, 7, pretrained=str(path))
    saved = torch.load(path, weights_only=True)["model"]
    own = model.net.state_dict()
    loaded = [key for key in saved if key in own and not key.endswith("relative_position_index")]
    assert len(loaded) > 100 and all(torch.equal(own[key], saved[key]) for key in loaded)
    with torch.no_grad():
        assert model.eval()(torch.rand(1, 3, 224, 224)).shape == (1, 7)


def test_generate_backbone_refuses_a_scale_without_generated_data(tmp_path):
    from tradeoff.cli import main

    config = tmp_path / "paper.yaml"
    config.write_text("pretrained: {swin_t_adapter: " + str(tmp_path / "x.pth") + "}\n")
    assert main(["--config", str(ROOT / "config" / "config.yaml"), "--config", str(config),
                 "generate-backbone", "swin_t_adapter"]) == 2
    assert not (tmp_path / "x.pth").exists()


def test_the_rehearsal_falls_back_to_the_cpu_where_no_gpu_is_visible():
    """tests/conftest.py hides the GPUs; the paper scale would stop there, the rehearsal runs on the CPU."""
    from tradeoff.core.runtime import Runtime

    assert Runtime.from_config({"device": "auto"}, scale="rehearsal").device.type == "cpu"
