"""How a result was made: code version, package versions, device, and the clock's measurements (seconds, images/s).

None of it goes into an output itself: an output's bytes depend only on what was computed, so that a rebuild of the
same settings on the same kind of machine gives the same bytes (and DVC sees no change). It goes into the output's
sidecar, ``<output>.provenance.json`` (tradeoff.storage.layout.Layout.sidecar), written with the output by
:func:`write_sidecar` and read by the reports with :func:`read_sidecar`: a checkpoint's (the training job's commit,
versions, device, and each epoch's seconds), a metrics file's (the evaluation's, its seconds and images/s), an
analysis's and an audit's. A missing sidecar is no corrupt output: what needs a timing says it is not recorded.
"""

from __future__ import annotations

import functools
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from tradeoff.core.errors import UserError
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import Layout

PACKAGES = ("torch", "torchvision", "numpy", "pyautoattack", "snakemake", "dvc")
#: the version of a sidecar's record
SIDECAR_FORMAT = "tradeoff-provenance/1"


class SidecarError(UserError, ValueError):
    """A sidecar that exists but cannot be read; the message names the file."""


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    try:
        out["tradeoff"] = metadata.version("tradeoff")
    except metadata.PackageNotFoundError:
        pass
    return out


def device_name(device: Any = None) -> str:
    import torch  # here, not at the top: the reports read sidecars without importing PyTorch

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def provenance(device: Any = None) -> dict:
    return {"git_commit": git_commit(), "versions": versions(), "device": device_name(device),
            "host": platform.node()}


def write_sidecar(output: str | Path, record: dict, device: Any = None) -> Path:
    """Write ``output``'s sidecar atomically: its provenance (``record``'s own, as a merge of shards made in other
    processes has it, else this process's commit, versions, device, host) and ``record`` (the clock's measurements
    and anything else that varies between two faithful builds of the output)."""
    path = Layout.sidecar(output)
    record = dict(record)
    body = {"format": SIDECAR_FORMAT, "of": Path(output).name,
            "provenance": record.pop("provenance", None) or provenance(device), **record}
    atomic_write_text(path, json.dumps(body, indent=1, default=float) + "\n")
    return path


def read_sidecar(output: str | Path) -> dict | None:
    """``output``'s sidecar, or None when it has none (written before sidecars, or copied without it). A sidecar
    that cannot be read: SidecarError naming it."""
    path = Layout.sidecar(output)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SidecarError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise SidecarError(f"{path}: not valid JSON ({exc}); delete it, or run the job that wrote "
                           f"{Path(output).name} again") from None
    if not isinstance(body, dict) or body.get("format") != SIDECAR_FORMAT:
        raise SidecarError(f"{path}: not a provenance sidecar of this version (expected format {SIDECAR_FORMAT!r})")
    return body


def training_epochs(model: str | Path) -> list[dict] | None:
    """What the clock and the machine gave each epoch of a trained model (``epoch``, ``seconds``, ``images_per_s``,
    ``device``; tradeoff.training.train's CLOCKED fields), from the model's sidecar; None when it has none.
    SidecarError for a sidecar that cannot be read or holds no such list."""
    body = read_sidecar(model)
    if body is None:
        return None
    epochs = body.get("epochs")
    if not isinstance(epochs, list) or not all(isinstance(e, dict) and isinstance(e.get("epoch"), int)
                                               for e in epochs):
        raise SidecarError(f"{Layout.sidecar(model)}: field 'epochs' must be a list of each epoch's record; run the "
                           "training again, or delete the sidecar")
    return epochs
