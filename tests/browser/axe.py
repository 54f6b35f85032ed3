"""axe-core inside the browser tests: fetched once from npm into .cache/ (git-ignored), checked
against its pinned checksum, and run in the page on each state a test reaches.

The page's CSP allows only its own origin's scripts, so axe is served from there: a route of
the test answers a path of the page's origin with axe's file, and a <script src> loads it.
`make test` installs npm where it is missing; the first browser test that checks a page fetches
the file (`npm pack`: the published tarball alone, no install scripts).
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tests.support.live import ROOT

AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe.min.js
AXE_FILE = ROOT / ".cache" / "axe-core" / AXE_VERSION / "axe.min.js"
SERVED_AT = "/__axe__/axe.min.js"  # a path of the page's origin that only the test's route answers
BLOCKING = ("serious", "critical")  # the impacts a page state may not have

RUN_JS = """async () => {
  const results = await axe.run(document, {resultTypes: ["violations"]});
  return results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(" ")}: ${n.failureSummary}`),
  }));
}"""


def fetch_axe(destination: Path = AXE_FILE) -> None:
    """Download axe-core's tarball with npm and keep its axe.min.js, if its checksum is right."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("No npm: `make test` installs it (apt-get install npm).")
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(
            [npm, "pack", "--silent", f"axe-core@{AXE_VERSION}"],
            cwd=work,
            check=True,
            capture_output=True,
            timeout=300,
        )
        with tarfile.open(Path(work) / f"axe-core-{AXE_VERSION}.tgz") as tar:
            member = tar.extractfile("package/axe.min.js")
            data = member.read() if member else b""
    digest = hashlib.sha256(data).hexdigest()
    if digest != AXE_SHA256:
        raise RuntimeError(f"axe-core {AXE_VERSION}: sha256 {digest}, expected {AXE_SHA256}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(destination)


@functools.cache
def axe_source() -> bytes:
    """axe.min.js, fetched the first time."""
    if not AXE_FILE.exists():
        fetch_axe()
    data = AXE_FILE.read_bytes()
    if hashlib.sha256(data).hexdigest() != AXE_SHA256:
        raise RuntimeError(f"{AXE_FILE} is not axe-core {AXE_VERSION}: delete it to fetch again")
    return data


def violations(page: Any) -> list[dict[str, Any]]:
    """The serious and critical violations axe finds in the page as it is now."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        if not getattr(page.context, "serves_axe", False):
            page.context.route(
                f"**{SERVED_AT}",
                lambda route: route.fulfill(
                    status=200, content_type="text/javascript", body=axe_source()
                ),
            )
            page.context.serves_axe = True
        page.add_script_tag(url=SERVED_AT)
    return [v for v in page.evaluate(RUN_JS) if v["impact"] in BLOCKING]


def assert_accessible(page: Any, state: str) -> None:
    """No serious or critical axe violation in `state` (named in the failure)."""
    found = violations(page)
    assert found == [], f"{state}: " + "\n".join(
        f"{v['impact']} {v['id']} ({v['help']}): {v['nodes']}" for v in found
    )
