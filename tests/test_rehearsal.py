"""The rehearsal scale through the real Snakemake rules: one run of each (architecture, dataset) family of the paper's
catalog trained and evaluated on generated data in the dataset's real format, at the paper's shapes, with the
tightest caps (one step of batch 4, one epoch, 8 test and 8 validation images, one attack iteration). docs/rehearsal.md."""

from __future__ import annotations

import json

import pytest
from helpers import results_of, run, workflow_copy

from tradeoff.storage import curves as live

pytestmark = pytest.mark.slow

# Tighter than config/rehearsal.yaml: here the batch is capped too (CA-AT's 1024 and the WRNs would take minutes).
TIGHTEST = """\
runtime: {eval_unit: attack}
scale_map: {steps_per_epoch: 1, epochs: 1, batch_size: 4, test_examples: 8, max_attack_steps: 1}
validation: {cifar10: 8, cifar100: 8, svhn: 8, mnist: 8, tinyimagenet: 8}
"""

# one run per (dataset, architecture) family, each evaluated under one attack of its tables (NROB on Tiny-ImageNet-C
# for the Tiny-ImageNet family, AutoAttack for two), with the image shape its model must have been trained on
FAMILIES = {
    "cifar10-resnet18-generalist": ("aa", (3, 32, 32), 10),
    "cifar10-resnet18-caat-gamma1": ("clean", (3, 32, 32), 10),
    "cifar100-resnet34-caat-gamma1": ("caat_pgd@8_255", (3, 32, 32), 100),
    "cifar10-wrn28-caat-gamma1": ("aa", (3, 32, 32), 10),
    "cifar10-wrn32-at-beta1": ("pgd20", (3, 32, 32), 10),
    "cifar100-resnet18-trades-lambda6": ("pgd20", (3, 32, 32), 100),
    "mnist-resnet18-trades": ("pgd20", (1, 28, 28), 10),
    "svhn-resnet18-fat": ("pgd20", (3, 32, 32), 10),
    "tinyimagenet-resnet18-at-beta1": ("nrob", (3, 64, 64), 200),
    # the adapters fine-tune a generated backbone (rule generate_backbone) on the 224 x 224 fine-grained sets
    "cub200-swin_t_adapter-caat-ce-gamma0_8": ("clean", (3, 224, 224), 200),
    "stanford-dogs-vit_b16_adapter-vanilla-ce-lambda0_5": ("clean", (3, 224, 224), 120),
}


def test_one_run_of_each_family_trains_and_evaluates_at_paper_shapes(tmp_path):
    work = workflow_copy(tmp_path / "work")
    (work / "config" / "tightest.yaml").write_text(TIGHTEST)
    layout = results_of(work, "rehearsal")
    outputs = [str(path.relative_to(work)) for run_id, (attack, _, _) in FAMILIES.items()
               for path in (layout.model(run_id), layout.metrics(run_id, attack))]
    run(["snakemake", *outputs, "--cores", "2", "--configfile", "config/rehearsal.yaml", "config/tightest.yaml"], work,
        timeout=1200)
    for run_id, (attack, shape, classes) in FAMILIES.items():
        record = json.loads(layout.metrics(run_id, attack).read_text())
        assert record["scale"] == "rehearsal" and record["dataset"] == record["paper_dataset"]
        assert record["arch"] == record["paper_arch"] and record["examples"] > 0
        assert live.read_curves(layout.curves(run_id)), run_id  # its epoch, logged by dvclive
    # the data are the generated files in their real formats, read through the real readers, and say so
    for dataset in ("cifar10", "cifar100", "mnist", "svhn", "tinyimagenet", "tinyimagenet-c", "cub200", "stanford-dogs"):
        assert json.loads((work / "data" / "rehearsal" / dataset / "GENERATED.json").read_text())["generated"]
    from tradeoff.evaluation.load import RunModel, load_model

    for run_id, (_, shape, classes) in FAMILIES.items():
        model, meta = load_model(RunModel(layout.model(run_id)), "cpu")
        import torch

        with torch.no_grad():
            assert model.eval()(torch.rand(2, *shape)).shape == (2, classes), run_id
