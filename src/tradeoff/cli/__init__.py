"""The `tradeoff` command line: every pipeline step is a subcommand over a library function.

Snakemake rules and DVC stages call these; so can a user. Every subcommand validates the whole configuration
first and exits with status 2 and a message naming the key when it is wrong.

Each subcommand is a module of tradeoff.cli.commands, named after it, with its parser beside its handler; this module
holds the global options and :func:`main`, which imports only the module of the subcommand it runs (found by name:
:func:`command_modules`). That lazy import is the command line's one concession to start-up time: ``tradeoff list``
does not load PyTorch, and a DVC stage depends on the code of its own subcommand only (tradeoff.pipeline.dvc_export).
Every other import is at the top of its module. A subcommand module may set ``JOB = True`` (a job of the pipeline:
it keeps the resolved catalog for the next job, tradeoff.config.load_catalog) and ``GPU = True`` (it computes on a
GPU: on a machine with several, it takes one of its own, tradeoff.core.gpus).

May import: every package (it is the top).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import logging
import os
import pkgutil
import socket
import sys
from pathlib import Path

from tradeoff import config as cfg
from tradeoff.cli import commands
from tradeoff.cli.common import LIST_TARGETS
from tradeoff.core import gpus
from tradeoff.core.errors import UserError
from tradeoff.storage.layout import log_history

CONFIG_ENV = "TRADEOFF_CONFIG"  # the config files of a job that names none (Snakemake's common.smk sets it)


def configuration_error(exc: Exception) -> str:
    """The one line of a bad configuration, exit status 2: every subcommand's, and Snakemake's (the Snakefile prints
    it before any job: workflow/rules/common.smk)."""
    return f"tradeoff: configuration error: {exc}"


def unknown_target(name: str, known) -> str:
    """The message of a target that is none of ``known`` (the catalog's targets, and a subcommand's or Snakemake's
    own: the audit targets): the closest names. The same words on the command line and in Snakemake."""
    return cfg.unknown("target", name, known, LIST_TARGETS)


# ------------------------------------------------------------------------------------------ the subcommands


def command_modules() -> dict[str, str]:
    """Every subcommand and the name of its module, from the files of tradeoff/cli/commands (none is imported):
    ``export-dvc`` is ``tradeoff.cli.commands.export_dvc``."""
    return {info.name.replace("_", "-"): f"{commands.__name__}.{info.name}"
            for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda info: info.name)}


class _Unparsed(Exception):
    pass


class _Quiet(argparse.ArgumentParser):
    """A parser that raises instead of printing usage and exiting (the real parser reports the error)."""

    def error(self, message):
        raise _Unparsed(message)


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", action="append", metavar="FILE",
                        help="configuration file; repeat to overlay (default: the files in $TRADEOFF_CONFIG, "
                             "separated by ':', as Snakemake's jobs get them; else config/config.yaml of the "
                             "workflow the command runs in)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--log", metavar="FILE",
                        help="the job's log file (Snakemake's `log:`, deleted whenever Snakemake starts the job): "
                             "also append everything written to stderr to its history, <name>.history.log, after a "
                             "header line per start, so a restarted job keeps the lines of its earlier tries")


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand a command line runs, read before any subcommand module is imported: the first word after the
    global options (None if there is none, or it is no subcommand)."""
    pre = _Quiet(add_help=False)
    _add_global_options(pre)
    try:
        rest = pre.parse_known_args(argv)[1]
    except _Unparsed:
        return None
    word = next((w for w in rest if not w.startswith("-")), None)
    return word if word in command_modules() else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``tradeoff``: the global options and the parser of ``command`` only (its module is imported),
    or of every subcommand (``tradeoff --help``, or a word that is no subcommand)."""
    parser = argparse.ArgumentParser(prog="tradeoff", description=__doc__.splitlines()[0])
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    modules = command_modules()
    for name in [command] if command in modules else modules:
        importlib.import_module(modules[name]).add_parser(sub)
    return parser


def _device_wanted(args, catalog: cfg.Catalog) -> str:
    """The device a GPU command asked for: its --device, else the config's runtime.device."""
    if getattr(args, "cpu_only", False):
        return "cpu"
    return getattr(args, "device", None) or catalog.runtime_settings.device


# ------------------------------------------------------------------------------------------ the job's log


class _Tee:
    """stderr that also appends to a file (the job's log history): Python-level, so no extra process stands between
    the job and the signals SLURM sends it."""

    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, text: str) -> int:
        try:
            self.copy.write(text)
        except (OSError, ValueError):  # the history is a convenience: a full disk must not stop the job here
            pass
        return self.stream.write(text)

    def flush(self) -> None:
        for stream in (self.copy, self.stream):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def isatty(self) -> bool:
        """Never: what goes to a terminal is also written to the history file, where a progress bar's carriage
        returns do not belong (tradeoff.core.progress writes plain lines instead)."""
        return False

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _open_history(log: str, argv: list[str]):
    """Append a header line for this start to the log's history and return the open file (None if it cannot be)."""
    path = log_history(Path(log).absolute())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        history = open(path, "a", buffering=1)
    except OSError as exc:
        print(f"tradeoff: cannot append to the log history {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
    slurm = f", SLURM job {os.environ['SLURM_JOB_ID']}" if os.environ.get("SLURM_JOB_ID") else ""
    history.write(f"=== {datetime.datetime.now():%Y-%m-%d %H:%M:%S} start: tradeoff {' '.join(argv)} "
                  f"(pid {os.getpid()} on {socket.gethostname()}{slurm}) ===\n")
    return history


def default_config(start: Path | None = None) -> Path:
    """The config file of a command that names none: the workflow's that the command runs in (the nearest folder,
    from ``start`` (the current folder) up, with a Snakefile and config/config.yaml: a checkout, a clone, a copy),
    else the package's own (tradeoff.config.DEFAULT_CONFIG). Not the package's first: an environment installed from
    one checkout that runs in another (a clone beside it) must read and write that other's files."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / "Snakefile").is_file() and (folder / "config" / "config.yaml").is_file():
            return folder / "config" / "config.yaml"
    return cfg.DEFAULT_CONFIG


def enter_workflow(config_files: list[str]) -> list[str]:
    """Work from the workflow's folder (the one with the Snakefile above the first config file), as Snakemake and
    DVC do, whatever folder the command was started in: the config's relative paths (``results``, ``data``) then
    mean the same folders for every job and every user. Returns the config files relative to it. Without such a
    folder (a config file outside any workflow), the current folder stays."""
    for given in config_files:
        if "=" in given and not Path(given).exists():  # `--config runtime='{threads: 2}'`, as for Snakemake
            key, _, value = given.partition("=")
            raise cfg.ConfigError(f"--config takes a YAML file, not a key=value override ({given!r}): put "
                                  f"`{key}: {value}` in an overlay file (e.g. config/mine.yaml) and pass "
                                  "--config config/config.yaml --config config/mine.yaml")
    files = [Path(f).absolute() for f in config_files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise cfg.ConfigError(f"--config: no such file: {', '.join(missing)}")
    root = next((d for d in files[0].parents if (d / "Snakefile").is_file()), None)
    if root is None:
        return [str(f) for f in files]
    os.chdir(root)
    return [os.path.relpath(f, root) if f.is_relative_to(root) else str(f) for f in files]


# ----------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(chosen_command(argv)).parse_args(argv)
    history, stderr = (_open_history(args.log, argv) if args.log else None), sys.stderr
    if history is not None:
        sys.stderr = _Tee(stderr, history)
    try:
        return _main(args)
    finally:
        if history is not None:
            sys.stderr = stderr
            history.close()


def _main(args) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    if args.config is None and os.environ.get(CONFIG_ENV):  # a Snakemake job: the workflow's config files
        args.config = [f for f in os.environ[CONFIG_ENV].split(os.pathsep) if f]
    args.config_given = args.config is not None
    command = sys.modules[command_modules()[args.command]]
    cwd = os.getcwd()
    try:
        args.config = enter_workflow(args.config or [str(default_config())])
        catalog = cfg.load_catalog(args.config, write_cache=getattr(command, "JOB", False))
        if getattr(command, "GPU", False) and _device_wanted(args, catalog) != "cpu":
            gpus.claim_gpu()  # several GPUs on this machine: one of its own (before CUDA starts), see tradeoff.core.gpus
        # the targets a subcommand names, checked here unless it checks them itself (export-dvc: against the
        # catalog its stages read); a subcommand may know targets beyond the catalog's (plan: the audit targets)
        named = [args.target] if getattr(args, "target", None) is not None else list(getattr(args, "targets", []))
        more = getattr(args, "more_targets", None)
        known = [*catalog.targets, *(more(catalog) if more is not None else ())]
        for name in [] if getattr(args, "own_targets", False) else named:
            if name not in known:
                raise cfg.ConfigError(unknown_target(name, known))
        status = args.func(args, catalog)
        sys.stdout.flush()  # here, so that a reader that went away (`| head`) is seen now, not at exit
        return status
    except cfg.ConfigError as exc:
        print(configuration_error(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line in the log, the shell's status for SIGINT
        print("tradeoff: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tradeoff list runs | head`: the reader has what it wanted
        _discard_stdout()
        return 141
    except UserError as exc:  # problems of the input or the machine: one clear line, no traceback
        signum = getattr(exc, "signum", None)
        if signum is not None:  # stopped by SIGTERM / SIGUSR1 after saving its state (tradeoff.training.train.Stopped)
            print(f"tradeoff: {exc}", file=sys.stderr)
            return 128 + signum
        print(f"tradeoff: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        os.chdir(cwd)  # a caller in the same process (a test, a notebook) keeps its folder


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a caller's in-memory stdout)
        pass


if __name__ == "__main__":
    sys.exit(main())
