"""Session set-up of the test suite, and its guard of the checkout.

Tests never read or write the checkout's ``results/``, ``data/`` or ``config/`` (a `make demo` in the same clone
must neither break a test nor be changed by one): the session works from a fresh temporary folder (so a relative
``data`` or ``results`` of a config lands there; the digits split made there is shared by the whole session), and
at the end the three folders are compared with a snapshot taken at the start. Anything created, modified or
deleted there fails the session, naming the paths.

`make test` runs the suite on every core (pytest-xdist, ``-n auto``): each test module is one unit of work (its
module fixtures computed once), the two modules that share the smoke build one unit, the real SLURM cluster another;
the longest units are handed out first (:func:`pytest_collection_modifyitems`), so the smoke build starts at once
while the other worker takes the modules one by one.
"""

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Tests run on the CPU with one thread, so timings and results do not depend on the machine.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import torch  # noqa: E402

torch.set_num_threads(1)

CHECKOUT = Path(__file__).resolve().parents[1]
GUARDED = ("results", "data", "config")
_session: dict = {}


def snapshot(root: Path = CHECKOUT, guarded=GUARDED) -> dict[str, tuple]:
    """Every file and folder under the guarded folders of ``root``: files by size, time and (small ones) content
    digest, folders and links by their existence (and target)."""
    out: dict[str, tuple] = {}
    for name in guarded:
        top = root / name
        if top.is_symlink():
            out[name] = ("link", os.readlink(top))
            continue
        if not top.exists():
            continue
        out[name] = ("dir",)
        for folder, dirs, files in os.walk(top):
            for d in dirs:
                path = Path(folder, d)
                out[str(path.relative_to(root))] = ("link", os.readlink(path)) if path.is_symlink() else ("dir",)
            for f in files:
                path = Path(folder, f)
                rel = str(path.relative_to(root))
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    continue
                digest = (hashlib.sha256(path.read_bytes()).hexdigest()
                          if st.st_size <= 1 << 20 and path.is_file() and not path.is_symlink() else None)
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def changes(before: dict, after: dict) -> list[str]:
    created = sorted(set(after) - set(before))
    deleted = sorted(set(before) - set(after))
    modified = sorted(k for k in set(before) & set(after) if before[k] != after[k] and before[k][0] != "dir")
    return ([f"created  {p}" for p in created] + [f"deleted  {p}" for p in deleted]
            + [f"modified {p}" for p in modified])


def pytest_sessionstart(session):
    _session["before"] = snapshot()
    _session["cwd"] = os.getcwd()
    if session.config.getoption("dist", "no") != "no" and not hasattr(session.config, "workerinput"):
        return  # pytest-xdist's controller: it runs no test, and its workers start where it was started
    # relative paths of a config (`paths: {data: data, results: results}`) resolve here, never in the checkout
    _session["work"] = Path(tempfile.mkdtemp(prefix="tradeoff-tests-"))
    os.chdir(_session["work"])
    os.environ["TRADEOFF_TEST_DATA"] = str(_session["work"] / "data")  # tests/helpers.data_root()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    os.chdir(_session.get("cwd", CHECKOUT))
    work = _session.get("work")
    if work is not None:
        shutil.rmtree(work, ignore_errors=True)
    if "before" not in _session:
        return
    found = changes(_session["before"], snapshot())
    if found:
        shown = "\n  ".join(found[:30]) + (f"\n  ... and {len(found) - 30} more" if len(found) > 30 else "")
        message = (f"\nERROR: the test session changed the checkout's {', '.join(GUARDED)} "
                   f"({CHECKOUT}); tests must use temporary folders:\n  {shown}\n")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(message, red=True, bold=True)
        else:
            print(message)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: the test modules that share the smoke build (``smoke_clone``): one unit of work, so that it is built once
SMOKE_MODULES = ("tests/test_pipeline.py", "tests/test_readme_commands.py")
#: the units of work that take longest (`--durations` of a full run), handed out first in this order, so that no long
#: one starts last
FIRST = ("smoke", "tests/test_slurm.py", "tests/test_rehearsal.py", "tests/test_structure.py", "tests/test_costs.py",
         "tests/test_rebuild.py", "tests/test_dvc.py")


def unit(nodeid: str) -> str:
    """A test's unit of work under pytest-xdist: "smoke" for the modules of SMOKE_MODULES, else its module."""
    module = nodeid.split("::")[0]
    return "smoke" if module in SMOKE_MODULES else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist hands out whole units (:func:`unit`), in collection order. (Its own ``--dist loadgroup`` groups by
    a suffix of the node id that pytest 9.2 no longer keeps: every test was scheduled alone, and both workers built
    the smoke build.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return ByUnit(config, log)


def pytest_collection_modifyitems(config, items):
    """The units of FIRST first, the rest in collection order (the order xdist hands the units out in)."""
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(unit(item.nodeid), len(FIRST)))  # stable: collection order within a rank


@pytest.fixture(scope="session")
def smoke_clone(tmp_path_factory):
    """A fresh clone of the working tree with every target built at the smoke scale by the README's own command,
    nothing activated (tests/readme_clone.py): tests/test_pipeline.py and tests/test_readme_commands.py share it."""
    from readme_clone import built_clone

    return built_clone(tmp_path_factory.mktemp("smoke-clone"))
