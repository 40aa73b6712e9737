"""The command line's shape (issue 30): one module per subcommand in tradeoff/cli/commands, its parser beside its
handler, found by name and imported only when it runs; the external-model options listed once; imports at the top."""

from __future__ import annotations

import ast
import subprocess
import sys

from helpers import ROOT, env

from tradeoff import cli
from tradeoff.cli import model_options

COMMANDS = ROOT / "src" / "tradeoff" / "cli" / "commands"


def test_each_subcommand_is_a_module_with_its_parser_beside_its_handler():
    modules = cli.command_modules()
    assert {p.stem for p in COMMANDS.glob("*.py")} - {"__init__"} == {m.rpartition(".")[2] for m in modules.values()}
    parser = cli.build_parser()
    actions = next(a for a in parser._actions if a.dest == "command")
    assert set(actions.choices) == set(modules)  # each module adds the subcommand it is named after
    for name, sub in actions.choices.items():
        assert sub.get_default("func").__module__ == modules[name], name


def test_a_command_line_imports_only_its_own_subcommand():
    code = ("import sys; from tradeoff import cli; status = cli.main(sys.argv[1:]); "
            "print(sorted(m for m in sys.modules if m.startswith('tradeoff.cli.commands.'))); sys.exit(status)")
    out = subprocess.run([sys.executable, "-c", code, "list", "targets"], cwd=ROOT, env=env(), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "['tradeoff.cli.commands.list']"
    assert cli.chosen_command(["--config", "a.yaml", "-v", "train", "--run", "x"]) == "train"
    assert cli.chosen_command(["--help"]) is None and cli.chosen_command(["--config"]) is None


def test_the_external_model_options_are_listed_once():
    """evaluate and audit take the same options, from model_options.OPTIONS, and name them the same in errors."""
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    wanted = {model_options.flag(k) for k in model_options.OPTIONS} | {"--model"}
    for name in ("evaluate", "audit"):
        assert wanted <= {o for a in subs[name]._actions for o in a.option_strings}, name
    assert model_options.flag("paper_dataset") == "--paper-dataset" and model_options.flag("checkpoint") == \
        "--checkpoint" and model_options.flag("other_key") == "--other_key"
    for path in (ROOT / "src" / "tradeoff" / "cli").rglob("*.py"):
        text = path.read_text()
        assert path.name == "model_options.py" or "--paper-dataset" not in text and "--sha256" not in text, path


def test_the_command_lines_imports_are_at_the_top():
    for path in (ROOT / "src" / "tradeoff" / "cli").rglob("*.py"):
        tree = ast.parse(path.read_text())
        inner = [node.lineno for function in ast.walk(tree) if isinstance(function, ast.FunctionDef)
                 for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert inner == [], f"{path}: imports inside functions at lines {inner}"
