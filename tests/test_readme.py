"""README's claims, checked against the code where a test can: the settings' defaults, the
modules each layer lists, the counters of `/api/stats`, what `make test` runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from streaming.core.stream import Counters
from tests.support.live import ROOT

README = (ROOT / "README.md").read_text()
ROW = re.compile(r"^\| (`[A-Z0-9_]+`(?:, `[A-Z0-9_]+`)*) \| ([^|]+) \|", re.MULTILINE)
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
# Defaults README gives in words or for `make run`, not as the settings' own value.
IN_WORDS = {"STREAMING_MAX_BATCH", "STREAMING_CONTEXT_TOKENS", "STREAM_RESUME_GRACE_S"}


def section(title: str) -> str:
    """README's text under `## title`, up to the next section."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def documented_defaults() -> dict[str, float]:
    """Each setting of README's table whose default column is numbers, one per variable."""
    found = {}
    for names, defaults in ROW.findall(section("Settings")):
        variables = re.findall(r"`([A-Z0-9_]+)`", names)
        values = [value.strip() for value in defaults.split(",")]
        if len(values) == len(variables) and all(NUMBER.match(value) for value in values):
            found.update(zip(variables, map(float, values), strict=True))
    return found


def test_the_settings_table_gives_the_defaults_the_code_has():
    documented = {
        name: value for name, value in documented_defaults().items() if name not in IN_WORDS
    }
    assert len(documented) > 15  # the pattern still finds the table's rows
    # A fresh process without the service's variables: the defaults as a new user gets them.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(
            (
                "STREAM",
                "DETERMINISTIC_",
                "WORKER_",
                "RESPONSES_",
                "CONVERSATIONS_",
                "PROMPT_",
                "REDIS_URL",
            )
        )
    }
    script = (
        "import json, chatsite.settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {sorted(documented)!r}}}))"
    )
    actual = json.loads(
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    wrong = {
        name: (value, actual[name])
        for name, value in documented.items()
        if float(actual[name]) != value
    }
    assert wrong == {}, "README's default (first) differs from the code's (second)"


@pytest.mark.parametrize(
    "package", ["core", "wire", "engines", "generations", "fleet", "usage", "ops", "http"]
)
def test_every_module_a_layer_lists_exists_there(package):
    row = next(
        line
        for line in section("How a token travels").splitlines()
        if line.startswith(f"| `{package}/` |")
    )
    named = set(re.findall(r"`([a-z_]+\.py)`", row))
    assert named, f"README's {package}/ row names no module"
    missing = sorted(name for name in named if not (ROOT / "streaming" / package / name).exists())
    assert missing == []


def test_the_stats_readme_shows_are_the_counters():
    row = next(line for line in README.splitlines() if line.startswith("| `GET /api/stats` |"))
    assert set(re.findall(r"`([a-z_]+)`", row)) <= set(Counters().as_dict())


def test_make_test_runs_the_linters_and_the_format_check():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ntest:") :].split("\n\n")[0]
    assert "ruff check ." in recipe and "ruff format --check ." in recipe
