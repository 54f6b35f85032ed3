"""manage.py lab: it passes against our server, and fails against one that never cancels."""

from __future__ import annotations

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from streaming.programs.lab_output import histogram
from tests.support.live import ROOT


@pytest.mark.live
def test_lab_starts_its_own_server_and_proves_cancellation():
    out = StringIO()
    call_command("lab", "--ttft-ms", "20", "--tps", "100", stdout=out)
    text = out.getvalue()

    assert "deterministic-20ms-100tps" in text
    assert "gap (ms)" in text  # the histogram
    assert "tokens_after_abort = 0" in text
    assert "✓ the only tokens generated were the clock's" in text  # its own server: exact
    assert "✗" not in text
    assert "All 7 proofs passed" in text


@pytest.mark.live
def test_lab_exits_non_zero_against_a_server_that_never_stops(naive_server):
    # The naive server streams well but runs every generation to max_tokens after its reader
    # has gone: the counter keeps moving while the clock stream runs.
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "lab",
            "--url",
            naive_server.url,
            "--wait",
            "0.5",
            "--max-tokens",
            "2000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert "✓ the answer streamed to its end" in result.stdout
    assert "✗ FAILED: the server noticed the disconnect" in result.stdout
    assert "✗ FAILED: its token counter stayed frozen while time passed" in result.stdout
    assert "This server did not stop it" in result.stdout
    assert "proofs failed" in result.stderr


def test_histogram_bins_every_value():
    lines = list(histogram([10.0, 10.5, 11.0, 20.0, 50.0], bins=4))
    assert lines[0].strip().startswith("gap (ms)")
    # Bins of 10 ms from 10 to 50; the maximum falls in the last one.
    assert [int(line.split()[-1]) for line in lines[1:]] == [3, 1, 0, 1]
    assert lines[1].split()[:3] == ["10.0", "–", "20.0"]
    same = list(histogram([5.0, 5.0]))
    assert len(same) == 2 and same[1].endswith(" 2")
    assert list(histogram([])) == []
