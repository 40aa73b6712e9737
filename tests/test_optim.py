import pytest
import torch

from tradeoff.core.spec import Optimizer, Schedule
from tradeoff.methods.optim import build_optimizer, piecewise_linear


def test_schedule_hits_breakpoints_and_interpolates():
    epochs, values = [0, 40, 60, 120], [0.01, 0.01, 0.001, 0.0001]
    for e, v in zip(epochs, values):
        assert piecewise_linear(e, epochs, values) == pytest.approx(v)
    assert piecewise_linear(50, epochs, values) == pytest.approx(0.0055)
    assert piecewise_linear(90, epochs, values) == pytest.approx(0.00055)
    assert piecewise_linear(-1, epochs, values) == pytest.approx(0.01)
    assert piecewise_linear(500, epochs, values) == pytest.approx(0.0001)


def test_schedule_is_numpy_interp_up_to_the_last_bit_and_bit_for_bit_its_own():
    """The semantics of numpy.interp (constant outside, one breakpoint, linear between), but not its rounding: the
    trained models (and the recorded results) depend on the last bit of the learning rate, which numpy's slope-first
    formula changes (here at t = 0.28 of the catalog's Generalist schedule)."""
    import numpy as np

    for epochs, values in [([0, 40, 60, 120], [0.01, 0.01, 0.001, 0.0001]), ([3], [2.0]),
                           ([0.0, 0.667, 1.333, 2.0], [0.25, 0.5, 0.75, 1])]:
        for t in [-1, 0, 0.28, 1, 3, 50, 119.5, 120, 500]:
            assert piecewise_linear(t, epochs, values) == pytest.approx(float(np.interp(t, epochs, values)), rel=1e-12)
    epochs, values = [0.0, 0.667, 1.333, 2.0], [0.25, 0.5, 0.75, 1]
    assert piecewise_linear(0.28, epochs, values) == 0.25 + (0.5 - 0.25) * 0.28 / 0.667 == 0.3549475262368816
    assert float(np.interp(0.28, epochs, values)) == 0.3549475262368815
    # a step: the value before it at the breakpoint itself
    assert piecewise_linear(40, [0, 40, 40, 80], [1.0, 1.0, 0.1, 0.1]) == 1.0


def test_schedule_of_a_run_spec_is_the_same_bits_as_of_lists():
    """A run's schedule is a Schedule of tuples (tradeoff.core.spec): the same numbers, bit for bit, as the lists it was
    read from."""
    epochs, values = [0.0, 0.667, 1.333, 2.0], [0.25, 0.5, 0.75, 1]
    schedule = Schedule.from_dict({"epochs": epochs, "values": values})
    assert isinstance(schedule.epochs, tuple) and isinstance(schedule.values, tuple)
    for t in [-1, 0, 0.28, 0.5, 1, 1.7, 2, 3]:
        assert piecewise_linear(t, schedule.epochs, schedule.values).hex() == piecewise_linear(t, epochs, values).hex()
    assert piecewise_linear(0.28, schedule.epochs, schedule.values) == 0.3549475262368816


def test_schedule_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="3 breakpoints but 2 values"):
        piecewise_linear(1, [0, 1, 2], [1, 2])


def test_optimizers():
    p = [torch.nn.Parameter(torch.zeros(2))]
    sgd = build_optimizer(p, Optimizer(name="sgd", momentum=0.9, weight_decay=5e-4, nesterov=True), 0.1)
    assert sgd.param_groups[0]["nesterov"] and sgd.param_groups[0]["lr"] == 0.1
    assert sgd.param_groups[0]["momentum"] == 0.9 and sgd.param_groups[0]["weight_decay"] == 5e-4
    adam = build_optimizer(p, Optimizer(name="adam"), 1e-4)
    assert isinstance(adam, torch.optim.Adam)
    # an unset field (None) is the optimizer's own default
    group = adam.param_groups[0]
    assert group["betas"] == (0.9, 0.999) and group["weight_decay"] == 0.0
    group = build_optimizer(p, Optimizer.from_dict({"name": "sgd"}), 0.1).param_groups[0]
    assert (group["momentum"], group["weight_decay"], group["nesterov"]) == (0.0, 0.0, False)
    assert build_optimizer(p, Optimizer.from_dict({"name": "adam", "betas": [0.5, 0.9]}), 1e-4).param_groups[0][
        "betas"] == (0.5, 0.9)
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        build_optimizer(p, Optimizer(name="rmsprop"), 0.1)
