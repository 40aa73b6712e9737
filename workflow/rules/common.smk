# Validate the configuration before anything else, resolve the catalog, and hold the input functions.
import json
import os
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from tradeoff import config as tcfg
from tradeoff.cli import evaluation_ready_markers
from tradeoff.report.build import target_outputs as build_outputs
from tradeoff.results import ready_marker

# The effective config is config/config.yaml overlaid by each --configfile, in order. Jobs re-read exactly
# these files through the CLI, so values given with --config key=value (which jobs would not see) are refused.
CONFIG_FILES = ["config/config.yaml"] + [str(f) for f in workflow.config_settings.configfiles]
OVERRIDE_HELP = ("--config key=value overrides are not supported (jobs read the config files); put the values in a "
                 "YAML overlay (e.g. config/mine.yaml) and pass it with --configfile config/mine.yaml")
if workflow.config_settings.config:  # before the schema, which would report the override's strings as type errors
    raise WorkflowError(f"configuration error: {OVERRIDE_HELP} (given: --config "
                        + " ".join(f"{k}=..." for k in workflow.config_settings.config) + ")")
validate(config, schema="../schemas/config.schema.yaml")
try:
    # resolved afresh, or read from the cache that the jobs of an earlier call kept of the same files and code
    # (this process only reads it, so that a dry run writes nothing)
    CATALOG = tcfg.load_catalog(CONFIG_FILES, write_cache=False)
    if CATALOG.config != config:
        raise tcfg.ConfigError(OVERRIDE_HELP)
except tcfg.ConfigError as exc:
    raise WorkflowError(f"configuration error: {exc}")

CONFIG_ARGS = " ".join(f"--config {shlex.quote(f)}" for f in CONFIG_FILES)
LAYOUT = CATALOG.layout
DATA = CATALOG.data_root
TRAIN_IDS = sorted(CATALOG.training_runs())
ATTACKS = sorted(CATALOG.attacks)
RES = config.get("resources", {})


NO_MATCH = "(?!x)x"  # a constraint that matches nothing, for an empty list


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


def _rule_names(prefix, runs):
    """run id -> a rule name (prefix + the id as an identifier), unique among the runs."""
    names = {}
    for i, run in enumerate(runs):
        name = prefix + re.sub(r"\W", "_", run, flags=re.ASCII)
        names[run] = name if name not in names.values() else f"{name}_{i}"
    return names


wildcard_constraints:
    run=_alternatives(TRAIN_IDS),
    attack=_alternatives(ATTACKS),
    dataset=_alternatives(CATALOG.datasets()),


def dataset_ready(wildcards):
    return str(ready_marker(DATA, CATALOG.runs[wildcards.run]["dataset"]))


def pretrained_input(wildcards):
    """An adapter run's backbone checkpoint (`pretrained.<arch>`): a file the training job reads, so a run of the
    pipeline that writes it (the demo's pretraining) comes first. Unset, it stops the DAG naming the key, but only
    when a requested target trains such a run."""
    try:
        path = CATALOG.pretrained_checkpoint(wildcards.run)
    except tcfg.ConfigError as exc:
        raise WorkflowError(f"configuration error: {exc}")
    return [] if path is None else [str(path)]


def run_spec_json(wildcards):
    """A run's resolved settings: a change re-runs its training (Snakemake's params rerun trigger)."""
    return json.dumps(CATALOG.runs[wildcards.run], sort_keys=True)


def attack_spec_json(wildcards):
    return json.dumps(CATALOG.attack_for(wildcards.attack, wildcards.run), sort_keys=True)


def target_inputs(name):
    """What a target reads: metrics and predictions (a table's intervals and tests, a per-class figure), curves,
    analyses, its paper numbers, or the outputs of a group's members."""
    target = CATALOG.targets[name]
    if target["kind"] == "group":
        return [p for member in target["targets"] for p in target_outputs(member)]
    pairs = CATALOG.evaluations(name)
    files = [str(LAYOUT.metrics(run, attack)) for run, attack in pairs]
    if target["kind"] == "table" or target.get("plot") == "per_class":
        files += [str(LAYOUT.predictions(run, attack)) for run, attack in pairs]
    if target.get("reference"):
        files.append(os.path.relpath(Path(CATALOG.reference_dir) / f"{target['reference']}.csv"))
    files += [str(LAYOUT.curves(run)) for run in CATALOG.curve_runs(name)]
    files += [str(LAYOUT.analysis(t)) for t in CATALOG.analysis_targets(name)]
    return files


def target_settings(name):
    """A target's settings as the report job sees them (a group's with its members'): a change re-runs that report
    job alone (Snakemake's params rerun trigger), e.g. a new title, rows, labels or plot options."""
    return json.dumps({t: CATALOG.targets[t] for t in [name, *CATALOG.leaf_targets(name)]}, sort_keys=True)


def target_outputs(name):
    return [str(p) for p in build_outputs(CATALOG, name)]


def all_target_outputs():
    return [p for name in CATALOG.targets for p in target_outputs(name)]


def job_shell(args):
    """A job's shell command: `tradeoff <args>`, its output in the job's log. Snakemake deletes a job's `log:` file
    whenever it starts the job (again: after a kill, a requeue, a resubmission by `retries`), so `--log` makes
    tradeoff also append everything it writes to the log's history (tradeoff.results.log_history:
    `<name>.history.log`), after a header line per start: the lines before a resume are kept there. `exec` makes
    tradeoff the job's process itself, so the signals SLURM sends a job (SIGTERM at a time limit or a preemption,
    the profile's --signal=USR1 ahead of the time limit) reach it: training then saves the step it reached."""
    return f"exec tradeoff --log {{log}} {args} > {{log}} 2>&1"


def resource(stage, key, default):
    return RES.get(stage, {}).get(key, default)
