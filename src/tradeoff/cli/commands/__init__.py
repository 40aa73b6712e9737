"""The subcommands of ``tradeoff``: one module per subcommand, named after it (``export-dvc``: ``export_dvc.py``),
each holding its parser (``add_parser(sub)``) beside its handler (``run(args, catalog) -> int``). tradeoff.cli finds
them by name and imports only the one a command line runs, so each module imports what it needs at its top, and a
new subcommand is a new module here: no other file changes (the DVC stages of the others stay unchanged)."""
