"""`python -m bench [--quick] [--parts 1,2,3,4]`: run the suite, print and write the results.

Writes bench/results/results.json (every figure, the settings, the machine) and results.md (the
tables); part 4 also writes model-batching.svg. Timing figures depend on the machine and on
what else runs on it: the load average before and after is recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import cancellation, diagnose, many_streams, model, throughput
from .servers import raise_open_files

ROOT = Path(__file__).resolve().parent.parent
QUICK = {
    1: throughput.Settings(streams=4, tokens=20_000, warmup_s=0.5, window_s=2.0, rounds=1),
    2: many_streams.Settings(streams=200, arrivals_per_s=25, plateau_s=2.0),
    3: cancellation.Settings(streams=40, concurrency=20),
    4: model.Settings(caps=(1, 4), max_tokens=32, warmup_s=3.0, window_s=10.0),
}
FULL = {
    1: throughput.Settings(),
    2: many_streams.Settings(),
    3: cancellation.Settings(),
    4: model.Settings(),
}
RUNNERS = {1: throughput.run, 2: many_streams.run, 3: cancellation.run, 4: model.run}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        "load_average_before": os.getloadavg(),
    }


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "–" if value is None else str(value)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown tables: one per part, then the targets."""
    out = [
        f"Measured on {results['machine']['cpus']} CPUs, commit {results['machine']['commit']}, "
        f"load average before/after {results['machine']['load_average_before'][0]:.1f}/"
        f"{results['machine']['load_average_after'][0]:.1f}"
        f"{' (--quick)' if results['quick'] else ''}.",
        "",
    ]
    for part in results["parts"]:
        out += [f"### {part['part']}. {part['title']}", ""]
        if "skipped" in part:
            out += [f"Skipped: {part['skipped']}.", ""]
            continue
        if part["part"] == 1:
            out += _table(
                part["rows"],
                [
                    "server",
                    "frames_per_s",
                    "frames_per_server_cpu_s",
                    "ours_over_this",
                    "ours_over_this_per_cpu_s",
                ],
            )
        elif part["part"] == 2:
            rows, notes = [], []
            for name, f in (("ours", part["figures"]), ("bare ASGI + our engine", part["floor"])):
                rows += [
                    {"server": name, "figure": "TTFT added (ms)", **f["added_ttft_ms"]},
                    {"server": name, "figure": "inter-token gap (ms)", **f["itl_ms"]},
                ]
                notes.append(
                    f"{name}: at most {f['streams_open_together']:,} open together; RSS "
                    f"{f['server_rss_mb']['before']} → {f['server_rss_mb']['most_open']} MB, "
                    f"{f['memory_per_stream_kb']} KB per stream; server CPU per frame with all "
                    f"open {_cell(f['server_cpu_us_per_frame_all_open'])} µs; busiest second "
                    f"{f['server_cpu_busiest_second']} of a core (near 1: saturated)."
                )
            out += _table(rows, ["server", "figure", "p50", "p90", "p99", "max"])
            out += ["", *(f"- {note}" for note in notes)]
        elif part["part"] == 3:
            rows = []
            for name, f in part["figures"].items():
                abort = f["disconnect_to_abort_ms"] or {}
                after = f["tokens_after_disconnect"]
                rows.append(
                    {
                        "path": name,
                        "streams": f["streams"],
                        "tokens after disconnect (total)": after["total"],
                        "worst stream": after["max"],
                        "abort p50 (ms)": abort.get("p50"),
                        "abort p99 (ms)": abort.get("p99"),
                        "never aborted": f["never_aborted"],
                    }
                )
            out += _table(rows, list(rows[0]))
        elif part["part"] == 4:
            out += _table(
                part["rows"],
                [
                    "cap",
                    "clients",
                    "requests",
                    "throughput_tokens_per_s",
                    "ttft_p50_ms",
                    "ttft_p99_ms",
                    "itl_p99_ms",
                    "failed",
                ],
            )
            out += ["", f"Plot: {part['plot']}"]
        targets = part.get("targets", [])
        if targets:
            out += [
                "",
                *_table(
                    [{**t, "met": "yes" if t["met"] else "**no**"} for t in targets],
                    ["name", "value", "target", "met"],
                ),
            ]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Parse, run the parts asked for, write the results."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs (about two minutes)")
    parser.add_argument("--parts", default="1,2,3,4", help="comma-separated parts to run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="only measure what a request costs the server, piece by piece",
    )
    args = parser.parse_args(argv)
    if args.diagnose:
        raise_open_files(8192)
        found = diagnose.run(diagnose.Settings())
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "diagnose.json").write_text(json.dumps(found, indent=2))
        print("\n".join(_table(found["rows"], list(found["rows"][0]))))
        return 0
    parts = [int(p) for p in args.parts.split(",") if p.strip()]
    if any(p not in RUNNERS for p in parts):
        parser.error("parts are 1, 2, 3 and 4")
    open_files = raise_open_files(8192)
    settings = QUICK if args.quick else FULL
    results: dict[str, Any] = {
        "quick": args.quick,
        "machine": machine(),
        "open_files_limit": open_files,
        "parts": [],
    }
    for number in parts:
        started = time.monotonic()
        print(f"part {number}…", file=sys.stderr, flush=True)
        part = RUNNERS[number](settings[number])
        part["seconds"] = round(time.monotonic() - started, 1)
        results["parts"].append(part)
    results["machine"]["load_average_after"] = os.getloadavg()

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    table = markdown(results)
    (args.out / "results.md").write_text(table)
    for part in results["parts"]:
        if part["part"] == 4 and "rows" in part:
            (args.out / part["plot"]).write_text(model.plot(part["rows"], part["title"]))
    print(table)
    print(f"written to {args.out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
