"""Cost accounting: FLOPs counted from real steps, and the plan built from them."""

import pytest
import torch
from helpers import build_attack

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.pipeline.bench.flops import forward_flops_per_example, step_flops_per_example
from tradeoff.pipeline.bench.train import bench_train
from tradeoff.pipeline.costs import Job, makespan, plan

ROOT = cfg.ROOT


def test_resnet18_forward_is_1_11_gflop():
    assert forward_flops_per_example("resnet18", "cifar10") == pytest.approx(2 * 0.5554e9, rel=0.01)


def test_pgd_at_step_costs_attack_plus_training_pass():
    """PGD-10 AT = 10 attack steps of 2 forward-equivalents (input gradients only) + 3 for the update."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    spec = catalog.runs["cifar10-resnet18-at-beta1"]
    fwd = forward_flops_per_example(spec.arch, spec.dataset)
    steps = spec.method.get("attack")["steps"]
    assert step_flops_per_example(spec) == pytest.approx((2 * steps + 3) * fwd, rel=0.02)
    nt = catalog.runs["cifar10-resnet18-nt"]
    assert step_flops_per_example(nt) == pytest.approx(3 * fwd, rel=0.02)


def test_bench_train_reports_throughput_on_cpu():
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    out = bench_train("cifar10-resnet18-nt", catalog.runs["cifar10-resnet18-nt"],
                      runtime=Runtime(torch.device("cpu")), steps=3, warmup=1)
    assert out["images_per_s"] > 0 and out["achieved_tflops"] > 0
    assert out["fraction_of_peak"] is None and out["settings"] == {"bf16": False, "channels_last": False, "compile": False}
    assert out["halves_differ"] >= 0  # the two halves' time per step, relative: how stable the timing is
    assert bench_train("cifar10-resnet18-nt", catalog.runs["cifar10-resnet18-nt"], runtime=Runtime(torch.device("cpu")),
                       steps=1, warmup=0)["halves_differ"] is None


def test_makespan_respects_dependencies_and_gpus():
    jobs = [Job("train a", "train", 4.0, None), Job("train b", "train", 2.0, None),
            Job("eval a", "evaluate", 1.0, "train a"), Job("eval b", "evaluate", 1.0, "train b")]
    assert makespan(jobs, 1) == pytest.approx(8.0)
    assert makespan(jobs, 2) == pytest.approx(5.0)
    assert makespan(jobs, 10) == pytest.approx(5.0)


def test_plan_of_table1a_at_paper_scale():
    """tradeoff.pipeline.costs prices jobs from pass counts and tradeoff/pipeline/flops.json (tests/test_costs.py checks both against
    counted steps); the plan takes a second, without PyTorch."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    result = plan(catalog, "table1a", gpus=4, device="h100", bench_folder="/nonexistent")
    trains = [j for j in result["jobs"] if j.kind == "train"]
    assert len(trains) == len(catalog.targets["table1a"].rows)
    assert result["basis"].startswith("assumed 30%")
    # PGD-10 AT, ResNet-18, 120 epochs of CIFAR-10 in fp32 at 30% of TF32's 395 TFLOP/s: about half a GPU-hour
    at = next(j for j in trains if j.name.endswith("at-beta1"))
    assert 0.3 < at.hours < 0.8
    assert result["makespan_hours"] <= result["total_hours"]


def test_input_only_pgd_step_is_cheaper_than_with_weight_gradients():
    """An attack's backward computes no weight gradients (the weight-gradient matmuls are about 1/3 of a step), nor
    leaves any behind. Counted in FLOPs through the attack itself, not timed (a time ratio depends on the machine's
    load): PGD-1's step costs less than a forward and a backward that also computes the weights' gradients."""
    from tradeoff import models
    from tradeoff.pipeline.bench.flops import count_flops
    from tradeoff.pipeline.bench.synthetic import synthetic_batch

    torch.manual_seed(0)
    model = models.create_model("small_cnn", 10, in_channels=1, image_size=8).eval()
    x, y = synthetic_batch("digits", 16, torch.device("cpu"))
    pgd = build_attack("pgd", model, eps=0.1, steps=1, step_size=0.1, random_start=False)
    with count_flops() as attack:
        pgd.perturb(x, y)
    delta = torch.zeros_like(x, requires_grad=True)
    with count_flops() as with_weights:
        loss = torch.nn.functional.cross_entropy(model(x + delta), y)
        torch.autograd.grad(loss, [delta, *model.parameters()])
    assert not any(p.grad is not None for p in model.parameters())
    assert attack.get_total_flops() < 0.9 * with_weights.get_total_flops(), (attack.get_total_flops(),
                                                                             with_weights.get_total_flops())


def test_epoch_time_ratio_of_at_over_nt_reflects_the_attack():
    from tradeoff.pipeline.bench.ratios import epoch_time_ratio

    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    result = epoch_time_ratio(catalog, "cifar10-resnet18-at-beta1", "cifar10-resnet18-nt", steps=2, repeats=3)
    assert result["ratio"] > 1.5, result  # PGD-3 at smoke scale: 9 forward-equivalents against 3


def test_attention_on_the_cpu_is_counted_as_on_the_gpu():
    """PyTorch's counter prices the CUDA attention kernels only: counted on the CPU, a ViT's attention would be free
    and its runs' planned cost too low (4% at ViT-B/16, 224 px). tradeoff.pipeline.bench.flops prices the CPU kernels
    alike."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    from tradeoff.pipeline.bench.flops import count_flops

    q, k, v = (torch.randn(2, 3, 16, 8, requires_grad=True) for _ in range(3))
    with count_flops() as forward:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    with count_flops() as backward:
        torch.autograd.grad(out.sum(), (q, k, v))
    shape = (2, 3, 16, 8)
    assert forward.get_total_flops() == sdpa_flop_count(shape, shape, shape) > 0
    assert backward.get_total_flops() == sdpa_backward_flop_count(shape, shape, shape, shape)
