"""A fresh clone of the working tree, built at the smoke scale by the README's own command with nothing activated
(tests/test_readme_commands.py; tests/conftest.py's ``smoke_clone`` shares it with tests/test_pipeline.py).

A user's fresh clone: the working tree's tracked files and the untracked ones git does not ignore (so that what is
being changed is what is tested), committed in a new repository, and ``.venv``, the environment `make install`
made, linked in (installing it again is `make demo`'s minutes and downloads). Commands run as a user types them in
a new shell: ``env -i HOME=<a temporary folder> PATH=/usr/bin:/bin``, nothing else, nothing activated.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the README's first command of "Running", read at the smoke scale (tests/test_readme_commands.py's one rewrite)
SMOKE_BUILD = ".venv/bin/snakemake --cores 2 --configfile config/smoke.yaml"


def bare_env(home: Path) -> dict[str, str]:
    """A new shell's environment, nothing activated: `env -i HOME=... PATH=/usr/bin:/bin`."""
    return {"HOME": str(home), "PATH": "/usr/bin:/bin"}


def run_bare(command: str, cwd: Path, home: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``command`` as a user types it into bash in ``cwd`` (its comments too), in a bare environment."""
    return subprocess.run(["/bin/bash", "-c", f"set -eo pipefail\n{command}"], cwd=cwd, env=bare_env(home),
                          capture_output=True, text=True, timeout=timeout)


def installed_stamp(venv: Path = Path(sys.prefix)) -> Path:
    """The stamp `make install` leaves in the environment for this pyproject.toml (the Makefile's STAMP): with it,
    `make <target>` in the clone installs nothing (without it, it would install into this environment)."""
    digest = hashlib.sha1((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:12]
    return venv / f".installed-{digest}"


def fresh_clone(dest: Path) -> Path:
    """The working tree as a fresh clone of it, in ``dest`` (a git repository of one commit), with ``.venv`` linked to
    the environment that runs the tests."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    files = sorted({f.decode() for f in listed if f and os.path.lexists(ROOT / f.decode())})
    dest.mkdir(parents=True, exist_ok=True)
    listing = dest.parent / f".{dest.name}.files"
    listing.write_bytes(b"\0".join(f.encode() for f in files))
    copied = subprocess.run(["/bin/sh", "-c", 'tar -C "$1" --null -T "$2" -cf - | tar -C "$3" -xf -', "sh", str(ROOT),
                             str(listing), str(dest)], capture_output=True, text=True)
    listing.unlink()
    assert copied.returncode == 0, copied.stderr
    for command in (["git", "init", "-q"], ["git", "config", "user.name", "tradeoff tests"],
                    ["git", "config", "user.email", "tests@tradeoff.invalid"], ["git", "add", "-A"],
                    ["git", "commit", "-qm", "a fresh clone of the working tree"]):
        subprocess.run(command, cwd=dest, check=True, capture_output=True)
    os.symlink(sys.prefix, dest / ".venv")
    return dest


def built_clone(dest: Path) -> Path:
    """A fresh clone with every target built at the smoke scale by SMOKE_BUILD, in a bare environment."""
    clone = fresh_clone(dest / "clone")
    done = run_bare(SMOKE_BUILD, clone, dest, timeout=3600)
    assert done.returncode == 0, f"{SMOKE_BUILD} failed ({done.returncode}):\n{done.stdout[-3000:]}\n" \
                                 f"{done.stderr[-6000:]}"
    return clone
