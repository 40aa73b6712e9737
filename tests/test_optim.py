import pytest
import torch

from tradeoff.optim import build_optimizer, piecewise_linear


def test_schedule_hits_breakpoints_and_interpolates():
    epochs, values = [0, 40, 60, 120], [0.01, 0.01, 0.001, 0.0001]
    for e, v in zip(epochs, values):
        assert piecewise_linear(e, epochs, values) == pytest.approx(v)
    assert piecewise_linear(50, epochs, values) == pytest.approx(0.0055)
    assert piecewise_linear(90, epochs, values) == pytest.approx(0.00055)
    assert piecewise_linear(-1, epochs, values) == pytest.approx(0.01)
    assert piecewise_linear(500, epochs, values) == pytest.approx(0.0001)


def test_schedule_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="3 breakpoints but 2 values"):
        piecewise_linear(1, [0, 1, 2], [1, 2])


def test_optimizers():
    p = [torch.nn.Parameter(torch.zeros(2))]
    sgd = build_optimizer(p, {"name": "sgd", "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True}, 0.1)
    assert sgd.param_groups[0]["nesterov"] and sgd.param_groups[0]["lr"] == 0.1
    adam = build_optimizer(p, {"name": "adam"}, 1e-4)
    assert isinstance(adam, torch.optim.Adam)
