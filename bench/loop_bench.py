"""How often the real model's answers loop, and how often it answers right, per set of penalties.

    .venv/bin/python -m bench.loop_bench [--seeds 0,1,2] [--max-tokens 160]
                                         [--penalties NAME=JSON ...] [--json PATH]

For each set of penalties (`--penalties`, repeatable; by default `defaults`, the engine's own
for its model, and `none`, every penalty at the value that changes nothing), it runs:
- the open-ended prompts of bench/open_prompts.json (English and Japanese) at the engine's
  temperature and top_p, `--max-tokens` tokens each, once per seed, and counts the answers that
  loop: some sequence of 4 words that appears 3 or more times (a word: a run of letters or
  digits; in Japanese or Chinese, which put no spaces between words, one character);
- the questions of bench/quality_questions.json greedy and at the engine's temperature and
  top_p (bench/quality_bench.py's `greedy` and `defaults`), with those penalties added to both.

    .venv/bin/python -m bench.loop_bench --penalties 'rep1.2={"repetition_penalty": 1.2}'

Prints one table (docs/model.md, "Penalties") and writes every answer to bench/results/loops.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.quality_bench import (
    RESULTS,
    Question,
    answer_all,
    load_engine,
    load_questions,
    run,
    shares,
    summary,
)
from streaming.core.request import NEUTRAL_PENALTIES

PROMPTS = Path(__file__).with_name("open_prompts.json")
NGRAM_WORDS = 4
LOOP_TIMES = 3
# A character of a script without spaces between words is a word of its own.
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD = re.compile(rf"[{UNSPACED}]|[^\W_{UNSPACED}]+")
BUILT_IN = {"defaults": {}, "none": dict(NEUTRAL_PENALTIES)}


def load_prompts(path: Path = PROMPTS) -> list[Question]:
    """The open-ended prompts, as questions that no answer is right to."""
    return [
        Question(p["id"], p["lang"], p["prompt"], ())
        for p in json.loads(path.read_text())["prompts"]
    ]


def loops(text: str, n: int = NGRAM_WORDS, times: int = LOOP_TIMES) -> bool:
    """Whether some sequence of `n` words appears `times` times or more in `text`."""
    words = [word.casefold() for word in WORD.findall(text)]
    grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return any(count >= times for count in grams.values())


def parse_penalties(values: list[str] | None) -> dict[str, dict[str, float]]:
    """`NAME=JSON` pairs, each a set of penalties by name; none given: the built-in two."""
    if not values:
        return dict(BUILT_IN)
    sets = {}
    for value in values:
        name, _, raw = value.partition("=")
        if name in BUILT_IN and not raw:
            sets[name] = BUILT_IN[name]
            continue
        penalties = json.loads(raw)
        unknown = set(penalties) - set(NEUTRAL_PENALTIES)
        if unknown:
            raise SystemExit(f"{name}: not a penalty: {', '.join(sorted(unknown))}")
        sets[name] = {key: float(number) for key, number in penalties.items()}
    return sets


def loop_runs(
    engine: Any,
    prompts: list[Question],
    penalties: dict[str, float],
    seeds: list[int],
    max_tokens: int,
) -> list[dict[str, Any]]:
    """The prompts answered once per seed: which answers loop, per language."""
    runs = []
    for seed in seeds:
        answers = asyncio.run(answer_all(engine, prompts, penalties, seed, max_tokens))
        for answer in answers:
            answer["loops"] = loops(answer["text"])
        runs.append(
            {
                "seed": seed,
                "share": shares(prompts, [a["loops"] for a in answers]),
                "answers": answers,
            }
        )
        print(f"    seed {seed}: {runs[-1]['share']['all']:.2f} loop", flush=True)
    return runs


def markdown(table: dict[str, dict[str, Any]], prompts: int, questions: int) -> str:
    """One row per set of penalties: the looping share and the share right."""
    lines = [
        f"| penalties | looping answers ({prompts} prompts), en / ja / all | tokens per answer "
        f"| right, greedy ({questions}) | right, at the defaults |",
        "|---|---|---|---|---|",
    ]
    for name, row in table.items():
        looping = " / ".join(f"{row['looping'][lang]:.2f}" for lang in ("en", "ja", "all"))
        lines.append(
            f"| {name} {json.dumps(row['penalties'])} | {looping} | {row['tokens']:.0f} | "
            f"{row['right']['greedy']:.2f} | {row['right']['defaults']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the sampled runs")
    parser.add_argument("--max-tokens", type=int, default=160, help="per open-ended answer")
    parser.add_argument("--quality-max-tokens", type=int, default=48, help="per question")
    parser.add_argument("--penalties", action="append", metavar="NAME=JSON")
    parser.add_argument("--model", default="", help="STREAMING_MODEL's value (default: packaged)")
    parser.add_argument("--json", type=Path, default=RESULTS / "loops.json")
    args = parser.parse_args(argv)
    sets = parse_penalties(args.penalties)
    seeds = [int(s) for s in args.seeds.split(",")]
    prompts, questions = load_prompts(), load_questions()
    started = time.perf_counter()
    engine = load_engine(args.model, queue=max(len(prompts), len(questions)))
    print(f"{engine.model}: defaults {engine.sampling_defaults}", flush=True)
    table, report = {}, {}
    try:
        for name, penalties in sets.items():
            print(f"  {name} {penalties}", flush=True)
            looped = loop_runs(engine, prompts, penalties, seeds, args.max_tokens)
            settings = {
                "greedy": {"temperature": 0.0, "top_p": 1.0, **penalties},
                "defaults": dict(penalties),
            }
            quality = run(
                engine, questions, list(settings), seeds, args.quality_max_tokens, settings
            )
            right = summary(quality)
            table[name] = {
                "penalties": {**engine.sampling_defaults.penalties(), **penalties},
                "looping": {
                    lang: statistics.fmean(r["share"][lang] for r in looped)
                    for lang in ("en", "ja", "all")
                },
                "tokens": statistics.fmean(a["tokens"] for r in looped for a in r["answers"]),
                "right": {setting: right[setting]["all"]["mean"] for setting in settings},
            }
            report[name] = {"loop_runs": looped, "quality": quality}
    finally:
        engine.close()
    print(markdown(table, len(prompts), len(questions)))
    print(f"\n{time.perf_counter() - started:.0f} s in all, model load included")
    result = {
        "model": engine.model,
        "defaults": engine.sampling_defaults.as_json(),
        "table": table,
        "runs": report,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    return result


if __name__ == "__main__":
    main()
