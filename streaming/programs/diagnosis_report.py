"""The report of `manage.py diagnose_stream`: what arrived when, the verdict, each culprit once
with its fix (the verdict itself is tools/diagnosis.py's)."""

from __future__ import annotations

from streaming.programs.diagnosis import CULPRITS, SAME_READ_S, Diagnosis, arrivals, ms
from streaming.programs.stream_measure import Measurement


def render(record: Measurement, diagnosis: Diagnosis, *, all_reads: bool = False) -> str:
    """The human-readable report."""
    headers = record.headers
    lines = [
        f"{record.method} {record.url}",
        f"  HTTP {record.status}, headers after {ms(record.headers_at_s)}"
        + (f", server {headers['server']}" if "server" in headers else ""),
    ]
    for name in (
        "content-type",
        "cache-control",
        "x-accel-buffering",
        "content-encoding",
        "content-length",
        "transfer-encoding",
    ):
        lines.append(f"  {name + ':':20} {headers.get(name, '(none)')}")
    reads = arrivals(record.pieces, SAME_READ_S)
    pings = sum(piece.pings for piece in record.pieces)
    lines.append(
        f"  {len(reads)} reads, {record.events} events, {pings} pings; ended: {record.ended}"
    )
    shown = reads if all_reads or len(reads) <= 12 else reads[:10]
    lines.append("        ms  body bytes  events")
    lines += [f"  {a.at_s * 1000:8.0f}  {a.body_bytes:10d}  {a.events:6d}" for a in shown]
    if len(shown) < len(reads):
        lines.append(f"  … {len(reads) - len(shown)} more (-v 2 shows all)")
    lines += ["", f"Verdict: {diagnosis.summary}"]
    problems = diagnosis.problems
    for finding in problems:
        lines.append(f"PROBLEM [{finding.code}] {finding.seen}")
    # One fix per culprit, however many findings point at it.
    for culprit in dict.fromkeys(finding.culprit for finding in problems):
        if culprit:
            lines.append(f"  culprit: {CULPRITS[culprit]}")
        fixes = dict.fromkeys(f.fix for f in problems if f.culprit == culprit and f.fix)
        lines += [f"    fix: {fix}" for fix in fixes]
    lines += [
        f"note [{finding.code}] {finding.seen}"
        for finding in diagnosis.findings
        if not finding.problem
    ]
    if not problems:
        lines.append("No problem found.")
    return "\n".join(lines)
