"""One GPU per job on a machine with several (`snakemake --profile workflow/profiles/local`).

Snakemake's ``gpu`` resource (the local profile's ``resources: {gpu: N}``, each training or evaluation rule asking
for ``gpu: 1``) bounds how many GPU jobs run at once, but tells no job which device is its own, and Snakemake 9 has no
per-job slot number to tell it. So a job takes one itself: before PyTorch initialises CUDA, :func:`claim_gpu` locks a
free device of the pool (an exclusive ``flock`` on ``<lock dir>/gpu-<index>.lock``, held by the process until it
exits: a crash or a kill frees it too) and sets ``CUDA_VISIBLE_DEVICES`` to that device alone. Two jobs never share a
device, and a job waits (up to ``TRADEOFF_GPU_WAIT`` seconds, default 600) rather than double up.

The pool: ``TRADEOFF_GPUS`` (device indices, comma-separated), else ``CUDA_VISIBLE_DEVICES``, else the NVIDIA
driver's devices (``/proc/driver/nvidia/gpus``; no PyTorch, no ``nvidia-smi``). A pool of one device or none
(a SLURM job given one GPU, a machine without GPUs) claims nothing and changes nothing. The lock folder is
``TRADEOFF_GPU_LOCKS``, else one per user in the machine's temporary folder (per SLURM job inside a SLURM job, whose
device indices are its own). Only the pipeline's GPU commands claim (tradeoff.cli).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

from tradeoff.core.errors import UserError

POOL_VARIABLE = "TRADEOFF_GPUS"
LOCKS_VARIABLE = "TRADEOFF_GPU_LOCKS"
WAIT_VARIABLE = "TRADEOFF_GPU_WAIT"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")

_held: dict[str, int] = {}  # device -> the open, locked file descriptor (kept until the process ends)


class NoFreeGPU(UserError, RuntimeError):
    pass


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def device_pool(environ: dict | None = None) -> list[str]:
    """The devices a job may take, in order (see the module docstring)."""
    environ = os.environ if environ is None else environ
    for name in (POOL_VARIABLE, "CUDA_VISIBLE_DEVICES"):
        if environ.get(name) is not None:
            return _split(environ[name])
    return [str(i) for i in range(driver_gpus())]


def driver_gpus() -> int:
    """How many NVIDIA GPUs this node has (the driver's devices, read without CUDA), whether or not this process may
    use them: 0 on a machine without them."""
    try:
        return len(list(NVIDIA_GPUS.iterdir()))
    except OSError:
        return 0


def lock_folder(environ: dict | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get(LOCKS_VARIABLE):
        return Path(environ[LOCKS_VARIABLE])
    job = f"-slurm{environ['SLURM_JOB_ID']}" if environ.get("SLURM_JOB_ID") else ""
    return Path(tempfile.gettempdir()) / f"tradeoff-gpus-{os.getuid()}{job}"


def claim_gpu(environ: dict | None = None, *, wait: float | None = None, poll: float = 0.2) -> str | None:
    """Lock a free device of the pool and make it the process's only visible one (``CUDA_VISIBLE_DEVICES``); return
    it, or None when the pool has at most one device (nothing to choose). Raises NoFreeGPU after ``wait`` seconds
    with every device taken. Call it before anything initialises CUDA."""
    environ = os.environ if environ is None else environ
    pool = device_pool(environ)
    if len(pool) <= 1:
        return None
    if _held:  # claimed already (a second call in the same process)
        device = next(iter(_held))
        environ["CUDA_VISIBLE_DEVICES"] = device
        return device
    folder = lock_folder(environ)
    folder.mkdir(parents=True, exist_ok=True)
    wait = float(environ.get(WAIT_VARIABLE, 600)) if wait is None else wait
    deadline = time.monotonic() + wait
    start = os.getpid() % len(pool)  # jobs starting together try different devices first
    while True:
        for device in pool[start:] + pool[:start]:
            fd = os.open(folder / f"gpu-{device}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}\n".encode())
            _held[device] = fd
            environ["CUDA_VISIBLE_DEVICES"] = device
            return device
        if time.monotonic() >= deadline:
            raise NoFreeGPU(f"every GPU of {pool} is taken by another job (locks in {folder}) after {wait:.0f} s; "
                            f"give Snakemake `--resources gpu={len(pool)}` at most (the local profile's `resources: "
                            f"gpu`), or set {POOL_VARIABLE} to the devices jobs may use")
        time.sleep(poll)
