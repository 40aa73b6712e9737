"""Generalist: the global learner's EMA, communication, schedules, and a bit-identical resume."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import data_root
from methods_support import CPU, SMOKE, TinyBN, build, digits, method_spec, same_weights, with_method

from tradeoff import config as cfg
from tradeoff import data
from tradeoff.core.spec import Schedule
from tradeoff.methods.generalist import (
    TRAIN_SIZES,
    Generalist,
    communication_epoch,
    communication_period,
    communication_step,
)
from tradeoff.storage import checkpoint
from tradeoff.storage.layout import Layout
from tradeoff.training.train import train

NEVER = 10**6  # a t' no run reaches: no communication


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_learners_start_from_the_same_weights():
    method = build("generalist", model=TinyBN)
    assert same_weights(method.nt.model, method.at.model) and same_weights(method.at.model, method.global_model)
    assert method.nt.optimizer is not method.at.optimizer


def test_gamma_one_without_communication_is_the_ema_of_the_at_learner():
    x, y = digits(64)
    method = build("generalist", model=TinyBN, t_prime=NEVER, ema_decay=0.9,
                   gamma={"epochs": [0], "values": [1.0]})
    expected = _state(method.at.model)
    method.set_epoch(0)
    for i in range(4):
        method.train_step(x[16 * i:16 * (i + 1)], y[16 * i:16 * (i + 1)])
        at = _state(method.at.model)
        for name, param in method.at.model.named_parameters():
            expected[name] = 0.9 * expected[name] + 0.1 * at[name]
        method.end_epoch(i)
    got = method.global_model.state_dict()
    for name, _ in method.at.model.named_parameters():
        assert torch.allclose(got[name], expected[name], atol=1e-6), name
    # BatchNorm statistics: the AT learner's current ones (gamma = 1), not averaged by default
    assert torch.equal(got["bn.running_mean"], method.at.model.state_dict()["bn.running_mean"])
    assert not same_weights(method.nt.model, method.at.model)


def test_mix_without_ema_and_buffer_averaging():
    x, y = digits(32)
    method = build("generalist", model=TinyBN, ema=False, gamma={"epochs": [0], "values": [0.25]})
    method.set_epoch(0)
    method.train_step(x, y)
    r, n, g = _state(method.at.model), _state(method.nt.model), method.global_model.state_dict()
    for name in r:
        if r[name].is_floating_point():
            assert torch.allclose(g[name], 0.25 * r[name] + 0.75 * n[name], atol=1e-7), name
    averaged = build("generalist", model=TinyBN, ema_decay=0.5, average_buffers=True)
    start = _state(averaged.global_model)
    averaged.set_epoch(0)
    averaged.train_step(x, y)
    r = _state(averaged.at.model)
    assert torch.allclose(averaged.global_model.bn.running_var, 0.5 * start["bn.running_var"] + 0.5 * r["bn.running_var"])


@pytest.mark.parametrize("mode", ["epoch", "iteration"])
def test_after_communication_all_three_learners_are_equal(mode):
    x, y = digits(64)
    method = build("generalist", model=TinyBN, t_prime=2, c=1, communication=mode, ema_decay=0.5,
                   gamma={"epochs": [0], "values": [0.5]})
    n = method.steps_per_epoch  # the smoke spec's 256 training digits in batches of 64: 4
    size = len(x) // n
    for epoch in range(3):
        method.set_epoch(epoch + 1)  # the trainer reads schedules at the 1-based epoch
        for i in range(n):
            method.train_step(x[size * i:size * (i + 1)], y[size * i:size * (i + 1)])
            if mode == "iteration":  # in communication epochs, after every iteration
                assert same_weights(method.nt.model, method.at.model) == (epoch + 1 >= 2)
            elif i < n - 1:  # whole-epoch c: at the epoch's end only
                assert not same_weights(method.nt.model, method.at.model)
        method.end_epoch(epoch)
        equal = same_weights(method.nt.model, method.global_model) and same_weights(method.at.model, method.global_model)
        assert equal == (epoch + 1 >= 2), epoch


def test_a_fraction_of_an_epoch_communicates_within_epochs():
    """The demo's c = 5/12 epoch of 23 iterations is every 10 iterations from t' = 6.25 epochs (iteration 143.75):
    after iterations 150, 160, ..., 230, 9 times in 10 epochs as the paper's 10 in 120 (the epoch version rounded c
    to one epoch: 4 times)."""
    steps = [t for t in range(1, 231) if communication_step(t, 75 / 12, 5 / 12, 23)]
    assert communication_period(5 / 12, 23) == 10 and steps == list(range(150, 231, 10))
    # whole-epoch t' and c: the last iterations of communication_epoch's epochs (the paper's, 391 per epoch)
    paper = [t for t in range(1, 120 * 391 + 1) if communication_step(t, 75, 5, 391)]
    assert paper == [e * 391 for e in range(1, 121) if communication_epoch(e, 75, 5)]


def test_communication_within_an_epoch_in_training():
    """In the method: a period shorter than an epoch communicates after its iterations; one due at an epoch's last
    iteration waits for end_epoch (after the trainer has observed the learners)."""
    x, y = digits(64)
    method = build("generalist", model=TinyBN, t_prime=0.5, c=0.5, ema_decay=0.5,
                   gamma={"epochs": [0], "values": [0.5]})
    assert method.steps_per_epoch == 4 and communication_period(0.5, 4) == 2
    method.set_epoch(1)
    equal = []
    for i in range(4):
        method.train_step(x[16 * i:16 * (i + 1)], y[16 * i:16 * (i + 1)])
        equal.append(same_weights(method.nt.model, method.at.model))
    assert equal == [False, True, False, False]  # after iteration 2; iteration 4's waits for the epoch's end
    method.end_epoch(0)
    assert same_weights(method.nt.model, method.at.model)


def test_mechanism_epoch():
    """The first epoch whose model mixes in the NT learner and has communicated (a report flags a model selected
    before it): the demo's Generalist, gamma < 1 from epoch 7 and the first communication at iteration 150 (epoch
    7 of 23 iterations each: all 1437 training digits, no validation split held out)."""
    spec = method_spec("generalist", t_prime=75 / 12, c=5 / 12,
                       gamma={"epochs": [0, 10 / 3, 20 / 3, 10], "values": [1, 1, 1, 0]})
    spec = spec.replace(epochs=10, batch_size=64, train_examples=None,
                        selection=spec.selection.replace(split="test", validation=0))
    method = build("generalist", spec=spec)
    assert method.steps_per_epoch == 23
    assert method.mechanism()["epoch"] == 7
    spec = with_method(spec, t_prime=8.5)  # iteration 195.5: the first communication after iteration 200 (epoch 9)
    assert build("generalist", spec=spec).mechanism()["epoch"] == 9
    spec = with_method(spec, gamma={"epochs": [0], "values": [1.0]})
    assert build("generalist", spec=spec).mechanism()["epoch"] is None  # never a Generalist: always flagged


def test_communication_epochs():
    paper = [e for e in range(1, 121) if communication_epoch(e, 75, 5)]
    assert paper == list(range(75, 121, 5))
    # demo scale: t' = 75/120*20 = 12.5, c = 5/120*20 = 0.83 -> every epoch from 13 on
    demo = [e for e in range(1, 21) if communication_epoch(e, 12.5, 5 / 6)]
    assert demo == list(range(13, 21))
    # t mod c == 0 from t' on (Algorithm 1), c rounded half up: 2.5 -> 3
    assert [e for e in range(1, 61) if communication_epoch(e, 37.5, 2.5)] == list(range(39, 61, 3))


def test_schedules_hit_their_breakpoints():
    spec = method_spec("generalist").replace(lr=Schedule(epochs=(0, 40, 60, 120),
                                                         values=(0.01, 0.01, 0.001, 0.0001)))
    method = build("generalist", spec=spec)
    for epoch, gamma in ((0, 1.0), (40, 1.0), (80, 1.0), (100, 0.5), (120, 0.0)):
        method.set_epoch(epoch)
        assert method.gamma == pytest.approx(gamma)
    for epoch, lr in ((0, 0.01), (40, 0.01), (60, 0.001), (90, 0.00055), (120, 0.0001)):
        method.set_epoch(epoch)
        assert method.at.optimizer.param_groups[0]["lr"] == pytest.approx(lr)
        assert method.nt.optimizer.param_groups[0]["lr"] == pytest.approx(10 * lr)  # 0.1 at the start
    for mode, expected in (("constant", 0.1), ("at", 0.00055)):
        other = build("generalist", spec=with_method(spec, nt_lr_schedule=mode))
        other.set_epoch(90)
        assert other.nt.optimizer.param_groups[0]["lr"] == pytest.approx(expected)


def test_code_gamma_and_nt_optimizer():
    method = build("generalist", gamma={"epochs": [0, 40, 80, 120], "values": [1, 1, 1, 0.4]},
                   nt_optimizer={"name": "adam", "weight_decay": 0.0}, nt_lr=1e-4, nt_lr_schedule="constant")
    method.set_epoch(120)
    assert method.gamma == pytest.approx(0.4)
    assert isinstance(method.nt.optimizer, torch.optim.Adam) and isinstance(method.at.optimizer, torch.optim.SGD)
    assert method.nt.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)


def test_weight_averaged_learners_feed_the_global_learner():
    x, y = digits(32)
    method = build("generalist", model=TinyBN, nt_wa=True, ema_decay=0.5, ema=False, gamma={"epochs": [0], "values": [0.0]})
    start = _state(method.nt.model)
    method.set_epoch(0)
    method.train_step(x, y)
    nt = _state(method.nt.model)
    for name, _ in method.nt.model.named_parameters():
        assert torch.allclose(method.global_model.state_dict()[name], 0.5 * start[name] + 0.5 * nt[name], atol=1e-7)


def test_ema_horizon_and_warmup():
    spec = method_spec("generalist", ema_horizon=2.5575).replace(dataset="cifar10", batch_size=128,
                                                                  train_examples=None)
    assert Generalist(spec, lambda: TinyBN(), CPU).decay == pytest.approx(0.999, abs=1e-7)  # 391 iterations/epoch
    digits_data = data.load("digits")
    assert TRAIN_SIZES["digits"] == len(digits_data.x_train)
    assert data.SPLIT_SIZES["digits"] == (len(digits_data.x_train), len(digits_data.x_test))
    x, y = digits(16)
    method = build("generalist", model=TinyBN, ema_warmup=True, t_prime=NEVER, gamma={"epochs": [0], "values": [1.0]})
    method.set_epoch(0)
    method.train_step(x, y)  # first update: decay min(0.999, 1/10)
    at, g = _state(method.at.model), method.global_model.state_dict()
    init = _state(build("generalist", model=TinyBN).at.model)
    assert torch.allclose(g["fc.weight"], 0.1 * init["fc.weight"] + 0.9 * at["fc.weight"], atol=1e-7)


def test_parallel_on_cpu_is_the_serial_computation():
    x, y = digits(32)
    runs = []
    for parallel in (False, True):
        method = build("generalist", model=TinyBN, parallel=parallel)
        method.set_epoch(0)
        torch.manual_seed(5)
        method.train_step(x, y)
        runs.append(method)
    assert same_weights(runs[0].global_model, runs[1].global_model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_parallel_streams_match_serial_on_gpu():
    from tradeoff.core.runtime import Runtime

    gpu = Runtime(torch.device("cuda"))
    x, y = digits(64)
    runs = []
    for parallel in (False, True):
        torch.manual_seed(0)
        method = Generalist(method_spec("generalist", parallel=parallel), lambda: TinyBN(), gpu)
        method.set_epoch(0)
        torch.manual_seed(5)
        for _ in range(3):
            method.train_step(x.cuda(), y.cuda())
        runs.append(method.global_model.state_dict())
    for k in runs[0]:
        assert torch.allclose(runs[0][k].float(), runs[1][k].float(), atol=1e-5), k


def test_resume_mid_run_gives_the_same_global_learner(tmp_path):
    config = cfg.load_config(SMOKE)
    config["scale_map"].update(epochs=4, train_examples=128, test_examples=32)
    config["runs"]["g"] = {"preset": "generalist-resnet18", "dataset": "cifar10", "arch": "resnet18",
                           "selection": {"mode": "last"},
                           "method": {"name": "generalist", "t_prime": 60, "c": 30, "nt_wa": True,
                                      "ema_horizon": 2.5575}}
    spec = cfg.resolve(config).runs["g"]
    assert spec.method.get("t_prime") == pytest.approx(2) and spec.method.get("c") == pytest.approx(1)
    kw = dict(data_root=data_root(), runtime=CPU, progress=False)
    whole = train("g", spec, results=tmp_path / "a", **kw)
    paths = Layout(tmp_path / "b").run("g")
    train("g", spec, results=tmp_path / "b", **kw)
    newest = checkpoint.list_states(paths.state)[-1]
    newest.unlink()  # as if killed during the last epoch: it resumes after epoch 3 (communication epochs 2, 3)
    paths.model.unlink()
    train("g", spec, results=tmp_path / "b", **kw)
    a, b = checkpoint.load(whole.model), checkpoint.load(paths.model)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert set(a["learners"]) == {"nt", "at"}
    assert all(torch.equal(a["learners"]["at"][k], a["model"][k]) for k in a["model"])  # epoch 4 communicated
    assert math.isfinite(float(a["model"]["classifier.2.bias"].sum()))
