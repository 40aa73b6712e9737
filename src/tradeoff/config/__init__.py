"""The configuration: load, merge, validate, and resolve into a catalog of runs, attacks and targets.

One source of truth: Snakemake (workflow/rules/common.smk), DVC (dvc.yaml, written by ``tradeoff export-dvc``) and
every CLI subcommand resolve the same files through :func:`load_catalog`. Every error names the key it is about and
what is allowed, and is raised before any job starts. The package, a module per concern:

- :mod:`.load`: the YAML files, merged and validated against the schema; the format's shared words;
- :mod:`.budgets`: budgets, steps and budget sweeps as written;
- :mod:`.scale`: the scale mapping (how a paper-scale run and attack look at a smaller scale), in one place;
- :mod:`.checks`: checks beyond the schema (registries, ranges, targets);
- :mod:`.catalog`: the resolved catalog and its queries (the jobs a target needs, the files that hold them);
- :mod:`.resolve`: resolving a configuration into its catalog, and the cache of resolutions.

May import: core, storage, data, models, attacks, methods.
"""

from tradeoff.config.budgets import eps_label, parse_budget, parse_step, rel_step, split_budget, sweep_labels
from tradeoff.config.catalog import Catalog
from tradeoff.config.load import (
    ALL_ATTACKS,
    AUTOATTACK_FAMILY,
    CORRUPTIONS_TYPE,
    DEFAULT_CONFIG,
    PSEUDO_COLUMNS,
    REFERENCE_DIR,
    ROOT,
    SCHEMA,
    load_config,
    load_yaml,
    merge,
    validate_schema,
)
from tradeoff.config.resolve import check_evaluation, load_catalog, resolve, with_external
from tradeoff.core.errors import ConfigError, unknown
from tradeoff.core.spec import spec_digest

__all__ = ["ALL_ATTACKS", "AUTOATTACK_FAMILY", "CORRUPTIONS_TYPE", "Catalog", "ConfigError", "DEFAULT_CONFIG",
           "PSEUDO_COLUMNS", "REFERENCE_DIR", "ROOT", "SCHEMA", "check_evaluation", "eps_label", "load_catalog",
           "load_config", "load_yaml", "merge", "parse_budget", "parse_step", "rel_step", "resolve", "spec_digest",
           "split_budget", "sweep_labels", "unknown", "validate_schema", "with_external"]
