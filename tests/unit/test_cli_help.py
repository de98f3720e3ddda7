"""`raypress --version`, and every command's --help names the values its options take (no
``<bool>``/``<int>``/``<str>`` type placeholders, no click ``TEXT``; flags take none)."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import typer
from typer.testing import CliRunner

from raypress.cli import app

REPO = Path(__file__).resolve().parents[2]
TYPE_PLACEHOLDER = re.compile(r"<(?:bool|int|str|float|path|list\[[^\]]*\])>|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN)\b",
                              re.IGNORECASE)
COMMANDS = ("validate", "plan", "run", "analyze", "submit", "rejects", "ops", "serve", "server")


def help_of(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=120)
    assert result.exit_code == 0, result.output
    return result.output


def test_version_prints_the_installed_version():
    proc = subprocess.run([sys.executable, "-m", "raypress.cli", "--version"], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"raypress {version('raypress')}\n"


def test_every_commands_help_names_its_values():
    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(COMMANDS)  # a new command joins this test
    for command in ((), *((name,) for name in COMMANDS)):
        text = help_of(*command)
        assert not TYPE_PLACEHOLDER.search(text), (command, TYPE_PLACEHOLDER.search(text).group(0), text)
        assert re.search(r"--help\s{2,}Show this message", text), (command, text)  # a flag: no value
    top = help_of()
    assert re.search(r"--version\s{2,}print raypress's version", top), top


def test_options_say_what_goes_there():
    run = help_of("run")
    for option in ("FILE", "--run-dir DIR", "--set NODE.PARAM=VALUE", "--address HOST:PORT", "--ray-host HOST"):
        assert option in run, (option, run)
    assert re.search(r"-v, --verbose\s{2,}show Ray's own log lines", run), run
    assert "--in-process" not in run and "--event-lines" not in run  # the supervisor's own flags stay hidden
    server = help_of("server")
    for option in ("--runs-root DIR", "--port PORT", "--cancel-grace SECONDS", "--ingress auto|haproxy|proxy",
                   "--max-active-runs N", "--token-file PATH"):
        assert option in server, (option, server)
    assert "--max-len TOKENS" in help_of("serve") and "--pip REQUIREMENT" in help_of("submit")
