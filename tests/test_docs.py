"""The repository stands on its own: its documents link only inside it, and the API reference
names every setting the code reads."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.live import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's target
SETTING = re.compile(
    r"""env_(?:str|int|float|bool|list|url|json_object)\(\s*["']([A-Z0-9_]+)["']"""
)


def documents() -> list[Path]:
    """Every Markdown file git knows of (tracked, or new and not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [ROOT / name for name in listed.stdout.split()]


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(document):
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address, or a place on the same page
        path = (document.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"{target} leads outside the repository"
        assert path.exists(), f"{target} does not exist"


def test_the_api_reference_names_every_setting():
    read = set(SETTING.findall((ROOT / "chatsite" / "settings.py").read_text()))
    assert len(read) > 30  # the pattern still finds them
    reference = (ROOT / "docs" / "api.md").read_text()
    missing = sorted(name for name in read if f"`{name}`" not in reference)
    assert missing == [], f"docs/api.md does not name {missing}"


def test_the_readme_links_to_the_reference():
    assert "(docs/api.md)" in (ROOT / "README.md").read_text()
