"""Progress: a tqdm bar with its ETA on a terminal; in a log (not a terminal) one plain line every N seconds, never a
carriage return. Times come from an injected clock, never from sleeping."""

from __future__ import annotations

import io
import logging
import os
import pty

import pytest
import torch

from tradeoff import cli
from tradeoff import config as cfg
from tradeoff.core import progress as bars
from tradeoff.core.runtime import Runtime
from tradeoff.training.train import train

SMOKE = [cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "smoke.yaml"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def log_stream():
    """What tradeoff.core.progress logs, as a job's log file would hold it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("tradeoff.core.progress")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)


def test_a_terminal_gets_a_bar_with_its_eta():
    terminal = FakeTerminal()
    with bars.Bar(4, "nt epoch 1/2", unit="step", stream=terminal) as bar:
        for _ in range(4):
            bar.update(postfix="loss 0.5")
    text = terminal.getvalue()
    assert "\r" in text and "nt epoch 1/2" in text and "4/4" in text and "loss 0.5" in text
    assert "<" in text  # tqdm's [elapsed<remaining]


def test_log_lines_go_above_the_bars_while_they_are_drawn(monkeypatch):
    root = logging.getLogger()
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    console = logging.StreamHandler()  # the log's lines to the terminal
    root.addHandler(console)
    try:
        outer = bars.Bar(2, "epochs", stream=terminal)
        inner = bars.Bar(3, "steps", stream=terminal, leave=False)
        assert console not in root.handlers  # replaced by tqdm's, which writes above the bars
        inner.close()
        assert console not in root.handlers
        outer.close()
        outer.close()  # twice: no harm
        assert console in root.handlers and bars.Bar.drawn == 0
    finally:
        root.removeHandler(console)


def test_a_real_pseudo_terminal_is_detected():
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as stream:
        bar = bars.Bar(2, "x", stream=stream)
        assert bar.bar is not None
        bar.close()
    os.close(leader)


def test_a_log_gets_a_plain_line_every_n_seconds_and_no_carriage_return(log_stream):
    clock, stream = Clock(), io.StringIO()
    bar = bars.Bar(10, "pgd20", unit="batch", initial=2, stream=stream, every=30, clock=clock)
    for seconds in (10, 20, 30, 40, 70):  # lines at 30 and 70 s (30 s apart at least)
        clock.now = seconds
        bar.update(postfix="5 of 8 images robust so far")
    bar.close()
    lines = log_stream.getvalue().splitlines()
    assert stream.getvalue() == "" and "\r" not in log_stream.getvalue()
    # 3 batches in 30 s (the 2 resumed ones do not count), 5 left: 50 s; then 5 in 70 s, 3 left: 42 s
    assert lines == ["pgd20: batch 5/10 done, 5 of 8 images robust so far, ETA 0m50s",
                     "pgd20: batch 7/10 done, 5 of 8 images robust so far, ETA 0m42s"]


def test_tradeoff_log_never_draws_a_bar_into_the_history(tmp_path):
    """`tradeoff --log` copies stderr into the job's history file: no bar there, even from a terminal."""
    history = open(tmp_path / "history.log", "w")
    tee = cli._Tee(FakeTerminal(), history)
    assert not tee.isatty()
    history.close()


@pytest.mark.parametrize("terminal", [True, False])
def test_training_shows_a_bar_on_a_terminal_and_plain_lines_in_a_log(tmp_path, monkeypatch, log_stream, terminal):
    config = cfg.load_config(SMOKE)
    config["scale_map"].update(epochs=2, train_examples=64, test_examples=32)
    catalog = cfg.resolve(config)
    stream = FakeTerminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setenv("TRADEOFF_PROGRESS_SECONDS", "0")
    train("cifar10-resnet18-nt", catalog.runs["cifar10-resnet18-nt"], results=tmp_path, data_root=catalog.data_root,
          runtime=Runtime(torch.device("cpu")), eval_batch_size=32)
    if terminal:
        assert "\r" in stream.getvalue() and "cifar10-resnet18-nt: 100%" in stream.getvalue()
        assert log_stream.getvalue() == ""
    else:
        assert stream.getvalue() == "" and "\r" not in log_stream.getvalue()
        assert "cifar10-resnet18-nt epoch 2/2: step 1/1 done" in log_stream.getvalue()
        assert "cifar10-resnet18-nt: epoch 2/2 done, loss" in log_stream.getvalue()
