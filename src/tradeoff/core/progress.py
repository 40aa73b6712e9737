"""Progress of long loops (training epochs and steps, evaluation batches, AutoAttack's components).

On a terminal a tqdm bar with its rate and ETA; elsewhere (a SLURM or Snakemake log, ``tradeoff --log``) no bar, whose
carriage returns would fill the file, but one plain log line at most every ``every`` seconds
(``TRADEOFF_PROGRESS_SECONDS``, default 60; 0: a line per update).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Callable

log = logging.getLogger(__name__)


def default_every() -> float:
    return float(os.environ.get("TRADEOFF_PROGRESS_SECONDS", 60))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Bar:
    """``total`` steps of work named ``desc``, ``initial`` of them done before this process (a resumed job: not
    counted in the rate). ``terminal``: draw a bar (None: when ``stream`` is a terminal). ``clock`` times the plain
    lines (a test's own clock). While bars are drawn, the log's lines to the terminal go through tqdm, above them
    (a line written under a bar would be cut by its next redraw)."""

    drawn = 0  # bars on the terminal now: the first redirects the log's console lines, the last one closed restores

    def __init__(self, total: int, desc: str, *, unit: str = "it", initial: int = 0, leave: bool = True,
                 terminal: bool | None = None, stream=None, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        stream = sys.stderr if stream is None else stream
        self.desc, self.unit, self.total, self.done, self.initial = desc, unit, total, initial, initial
        self.every, self.clock = default_every() if every is None else every, clock
        self.start = self.last = clock()
        self.bar = None
        if stream.isatty() if terminal is None else terminal:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, initial=initial, leave=leave, file=stream,
                            dynamic_ncols=True)
            self.redirect = logging_redirect_tqdm() if Bar.drawn == 0 else None
            if self.redirect is not None:
                self.redirect.__enter__()
            Bar.drawn += 1

    def update(self, n: int = 1, postfix: str = "") -> None:
        """``n`` more steps done; ``postfix``: what else to show (robust so far, a loss)."""
        self.done += n
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(n)
            return
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            rate = (self.done - self.initial) / (now - self.start) if now > self.start else 0.0
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            log.info("%s: %s %d/%d done%s, ETA %s", self.desc, self.unit, self.done, self.total,
                     f", {postfix}" if postfix else "", duration(eta))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            Bar.drawn -= 1
            if self.redirect is not None:
                self.redirect.__exit__(None, None, None)

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
