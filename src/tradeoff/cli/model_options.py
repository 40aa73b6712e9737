"""The options that name a model this pipeline did not train (``evaluate`` and ``audit``): ``--checkpoint FILE`` with
the options that describe it, or ``--model FILE.py:FUNCTION``. :data:`OPTIONS` lists them once; the parser, the
checks, the :class:`~tradeoff.pipeline.evaluation_jobs.CheckpointFile` they make and the option an error message names all
come from it."""

from __future__ import annotations

import argparse

from tradeoff.config import ConfigError
from tradeoff.evaluation.external import name_of
from tradeoff.evaluation.load import PYTHON_FORMAT
from tradeoff.evaluation.user_model import arch_of, parse
from tradeoff.pipeline.evaluation_jobs import CheckpointFile

#: the options that describe a --checkpoint file, by the external-model setting each sets (as CheckpointFile's
#: keywords): their argparse keywords
OPTIONS: dict[str, dict] = {
    "arch": {"help": "with --checkpoint: its architecture (a registered one, or RobustBench's name for it)"},
    "dataset": {"help": "with --checkpoint: the dataset it classifies (its test set is evaluated)"},
    "normalize": {"metavar": "MEAN,STD", "help": "with --checkpoint: the per-channel input normalisation, applied "
                  "inside the model (attacks perturb [0, 1] images): MEAN,STD, M1,...,Mc,S1,...,Sc, or imagenet, "
                  "cifar10, cifar100"},
    "format": {"choices": ["auto", "plain", "robustbench", "torchvision", "timm"],
               "help": "with --checkpoint: the file's layout (default auto: the first that fits)"},
    "paper_dataset": {"help": "with --checkpoint: the dataset its attacks' budgets are written for, as a run's at a "
                      "smaller scale (default: with --suite, the paper dataset of the target's rows of the same "
                      "dataset; else its own)"},
    "sha256": {"help": "with --checkpoint: refuse the file unless it has this SHA-256"},
    "name": {"help": "with --checkpoint: its id, the folder of its metrics (default: the file's stem)"},
}
#: of OPTIONS, those that --model does not take (its function builds the model)
CHECKPOINT_ONLY = ("arch", "format")


def flag(key: str) -> str:
    """The command-line option of an external-model setting, as an error message names it (``paper_dataset``:
    ``--paper-dataset``)."""
    return f"--{key.replace('_', '-')}" if key in OPTIONS or key == "checkpoint" else f"--{key}"


def add_run(p: argparse.ArgumentParser) -> None:
    """--run: the model of the catalog a subcommand reads (evaluate, audit)."""
    p.add_argument("--run", help="a run of the catalog, or an external model (the config's `external:`)")


def add_options(p: argparse.ArgumentParser) -> None:
    """--model FILE.py:FUNCTION and the options that describe a --checkpoint file (the subcommand adds --checkpoint
    itself, with its own help)."""
    for key, keywords in OPTIONS.items():
        p.add_argument(flag(key), **keywords)
    p.add_argument("--model", metavar="FILE.py:FUNCTION", help="a model from your own Python file: FUNCTION() returns "
                   "a torch.nn.Module taking images in [0, 1] (preprocessing, randomness, a detector inside); with "
                   "--dataset. The file is your code and runs as such (docs/external-models.md)")


def given(args, keys=tuple(OPTIONS)) -> list[str]:
    """The options among ``keys`` given on the command line, as they were spelt."""
    return [flag(key) for key in keys if getattr(args, key) is not None]


def checkpoint_file(args) -> CheckpointFile:
    """--checkpoint FILE and the options that describe it."""
    if args.arch is None or args.dataset is None:
        raise ConfigError(f"{args.command} --checkpoint FILE needs --arch NAME and --dataset NAME (the "
                          "architecture and the dataset the model was trained for)")
    return CheckpointFile(args.checkpoint, **{key: getattr(args, key) for key in OPTIONS})


def model_file(args) -> CheckpointFile:
    """--model FILE.py:FUNCTION and --dataset (a model from the user's own Python file:
    tradeoff.evaluation.user_model)."""
    if args.dataset is None:
        raise ConfigError(f"{args.command} --model FILE.py:FUNCTION needs --dataset NAME (the dataset the model "
                          "classifies)")
    wrong = given(args, CHECKPOINT_ONLY)
    if wrong:
        raise ConfigError(f"{args.command} --model: {', '.join(wrong)} go with --checkpoint (the function builds "
                          "the model)")
    path, function = parse(args.model)
    return CheckpointFile(str(path), **{key: getattr(args, key) for key in OPTIONS}
                          | {"arch": arch_of(function), "format": PYTHON_FORMAT, "name": args.name or name_of(path)})
