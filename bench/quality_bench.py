"""How often the real model answers right, at the engine's sampling defaults and beside them.

    .venv/bin/python -m bench.quality_bench [--seeds 0,1,2] [--max-tokens 48] [--model M]
                                            [--settings defaults,neutral,greedy] [--json PATH]
                                            [--dtype auto|float32|bfloat16] [--packed auto|off]
                                            [--against JSON]

`--dtype`, `--packed` and `--against` compare configurations: run fp32 as loaded with
`--dtype float32 --packed off --json fp32.json`, then the default with `--against fp32.json`,
and it prints the share of greedy answers token for token alike.

The questions are bench/quality_questions.json: short ones in English and Japanese, each with
the spellings that count as right. An answer is right when it contains one of them,
case-insensitively (an ASCII spelling must stand as a word: "4" is not in "40").

The project's TransformersEngine runs in this process (the packaged SmolLM2, or `--model`), with
every question of a run submitted at once. Settings:

- `defaults`: no temperature or top_p in the request, so the engine's defaults for its model;
- `neutral`: temperature 1.0, top_p 1.0 (what every request got before those defaults);
- `greedy`: temperature 0 (top_p 1.0, which greedy ignores anyway).

Sampled settings run once per seed, greedy once. torch is seeded before each run, but sequences
batched together share one sampler, so a seed fixes a run only roughly. Prints the share right
per language (mean and range over seeds) and writes every answer's text and token count to
bench/results/quality.json, so that another run (another model, another precision) can be
compared answer by answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.core.request import GenerationRequest, Message
from streaming.engines.precision import Precision
from streaming.engines.transformers import TransformersEngine

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = Path(__file__).with_name("quality_questions.json")
RESULTS = ROOT / "bench" / "results"
SETTINGS: dict[str, dict[str, float]] = {
    "defaults": {},
    "neutral": {"temperature": 1.0, "top_p": 1.0},
    "greedy": {"temperature": 0.0, "top_p": 1.0},
}
SAMPLED = ("defaults", "neutral")  # run once per seed; greedy needs one run
MAX_BATCH = 8  # the engine's default batch
LANGUAGES = {"en": "English", "ja": "Japanese"}


@dataclass(frozen=True)
class Question:
    """One question and the spellings of its answer that count as right."""

    id: str
    lang: str
    question: str
    answers: tuple[str, ...]


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    """The question set, in file order."""
    return [
        Question(q["id"], q["lang"], q["question"], tuple(q["answers"]))
        for q in json.loads(path.read_text())["questions"]
    ]


def is_right(text: str, answers: tuple[str, ...]) -> bool:
    """Whether `text` contains one of `answers` (case-insensitive; ASCII ones as a word)."""
    for answer in answers:
        if answer.isascii():
            pattern = rf"(?<![0-9a-z]){re.escape(answer)}(?![0-9a-z])"
            if re.search(pattern, text, re.IGNORECASE):
                return True
        elif answer.casefold() in text.casefold():
            return True
    return False


def shares(questions: list[Question], right: list[bool]) -> dict[str, float]:
    """The share right per language and in all."""
    result = {}
    for lang in [*LANGUAGES, "all"]:
        marks = [r for q, r in zip(questions, right, strict=True) if lang in ("all", q.lang)]
        result[lang] = sum(marks) / len(marks) if marks else float("nan")
    return result


async def answer_all(
    engine: TransformersEngine,
    questions: list[Question],
    sampling: dict[str, float],
    seed: int | None,
    max_tokens: int,
) -> list[dict[str, Any]]:
    """Every question's answer at `sampling`, all submitted at once: text and token count."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)

    async def one(index: int, question: Question) -> dict[str, Any]:
        request = GenerationRequest(
            id=f"q{index:04d}{time.monotonic_ns():028x}"[:32],
            messages=(Message("user", question.question),),
            max_tokens=max_tokens,
            seed=seed,
            **sampling,
        )
        engine.check_request(request)
        stream = engine.generate(request)
        texts = []
        try:
            async for batch in stream.batches():
                texts += [chunk.text for chunk in batch]
        finally:
            engine.release(request.id)
        text = "".join(texts)
        return {
            "id": question.id,
            "text": text,
            "tokens": stream.stats.tokens_generated,
            "right": is_right(text, question.answers),
        }

    return list(await asyncio.gather(*(one(i, q) for i, q in enumerate(questions))))


def run(
    engine: TransformersEngine,
    questions: list[Question],
    settings: list[str],
    seeds: list[int],
    max_tokens: int,
    table: dict[str, dict[str, float]] = SETTINGS,
) -> dict[str, Any]:
    """Every setting's runs (`table`: the fields each sets): the answers and the shares right."""
    results: dict[str, Any] = {}
    for name in settings:
        sampling = table[name]
        runs = []
        for seed in seeds if name in SAMPLED else [None]:
            started = time.perf_counter()
            answers = asyncio.run(answer_all(engine, questions, sampling, seed, max_tokens))
            runs.append(
                {
                    "seed": seed,
                    "seconds": round(time.perf_counter() - started, 1),
                    "share": shares(questions, [a["right"] for a in answers]),
                    "answers": answers,
                }
            )
            print(
                f"  {name} seed {seed}: {runs[-1]['share']['all']:.2f} right "
                f"({runs[-1]['seconds']} s)",
                flush=True,
            )
        used = engine.sampling_defaults.for_request(
            GenerationRequest(id="-", messages=(), max_tokens=1, **sampling)
        )
        results[name] = {"sampling": used.as_json(), "runs": runs}
    return results


def summary(results: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per setting and language: the mean, lowest and highest share over its runs."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, setting in results.items():
        table[name] = {}
        for lang in [*LANGUAGES, "all"]:
            values = [r["share"][lang] for r in setting["runs"]]
            table[name][lang] = {
                "mean": statistics.fmean(values),
                "low": min(values),
                "high": max(values),
            }
    return table


def markdown(results: dict[str, Any], questions: list[Question]) -> str:
    """The table docs/model.md shows."""
    counts = {lang: sum(q.lang == lang for q in questions) for lang in LANGUAGES}
    counts["all"] = len(questions)
    head = " | ".join(f"{LANGUAGES.get(lang, 'all')} ({n})" for lang, n in counts.items())
    lines = [
        f"| setting | temperature / top_p | runs | {head} |",
        "|---|---|---|" + "---|" * len(counts),
    ]
    for name, row in summary(results).items():
        sampling = results[name]["sampling"]
        cells = []
        for lang in counts:
            cell = row[lang]
            spread = (
                f" ({cell['low']:.2f}–{cell['high']:.2f})" if cell["high"] > cell["low"] else ""
            )
            cells.append(f"{cell['mean']:.2f}{spread}")
        lines.append(
            f"| {name} | {sampling['temperature']:g} / {sampling['top_p']:g} | "
            f"{len(results[name]['runs'])} | " + " | ".join(cells) + " |"
        )
    table = summary(results)
    if "defaults" in table and "greedy" in table and table["greedy"]["all"]["mean"]:
        ratio = table["defaults"]["all"]["mean"] / table["greedy"]["all"]["mean"]
        lines.append(f"\ndefaults / greedy (all): {ratio:.2f} (target ≥ 0.90)")
    return "\n".join(lines)


def greedy_alike(results: dict[str, Any], earlier: dict[str, Any]) -> tuple[int, int]:
    """How many greedy answers are token for token the earlier run's (the same text, of the
    same length in tokens), out of those both runs answered."""
    ours = {a["id"]: a for a in results["greedy"]["runs"][0]["answers"]}
    theirs = {a["id"]: a for a in earlier["settings"]["greedy"]["runs"][0]["answers"]}
    both = sorted(set(ours) & set(theirs))
    alike = sum(
        (ours[i]["text"], ours[i]["tokens"]) == (theirs[i]["text"], theirs[i]["tokens"])
        for i in both
    )
    return alike, len(both)


def load_engine(
    model: str, queue: int, dtype: Precision = "auto", packed: str = "auto"
) -> TransformersEngine:
    """The project's engine in this process, loaded: the default batch, `queue` waiting."""
    cache = os.environ.get("STREAMING_MODEL_CACHE") or ROOT / ".cache" / "models"
    engine = TransformersEngine(
        model=model,
        cache_dir=cache,
        max_batch=MAX_BATCH,
        max_queue=queue,
        dtype=dtype,
        packed_weights=packed,
    )
    engine.load()
    return engine


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the sampled settings")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--model", default="", help="STREAMING_MODEL's value (default: packaged)")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--json", type=Path, default=RESULTS / "quality.json")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "float32", "bfloat16"), help="STREAMING_DTYPE"
    )
    parser.add_argument(
        "--packed", default="auto", choices=("auto", "off"), help="STREAMING_PACKED_WEIGHTS"
    )
    parser.add_argument(
        "--against", type=Path, help="an earlier run's JSON: the share of greedy answers alike"
    )
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        parser.error(
            f"unknown setting(s) {', '.join(unknown)}; the settings are {', '.join(SETTINGS)}"
        )
    questions = load_questions()
    started = time.perf_counter()
    engine = load_engine(args.model, len(questions), args.dtype, args.packed)
    print(
        f"{engine.model}: defaults {engine.sampling_defaults}; {len(questions)} questions, "
        f"{args.max_tokens} tokens at most",
        flush=True,
    )
    try:
        results = run(
            engine, questions, settings, [int(s) for s in args.seeds.split(",")], args.max_tokens
        )
    finally:
        engine.close()
    elapsed = time.perf_counter() - started
    print(markdown(results, questions))
    if args.against is not None and "greedy" in results:
        alike, total = greedy_alike(results, json.loads(args.against.read_text()))
        print(
            f"\ngreedy answers identical to {args.against}'s: {alike}/{total} ({alike / total:.2f})"
        )
    print(f"\n{elapsed:.0f} s in all, model load included")
    report = {
        "model": engine.model,
        "dtype": args.dtype,
        "packed_weights": args.packed,
        "defaults": engine.sampling_defaults.as_json(),
        "max_tokens": args.max_tokens,
        "seconds": round(elapsed, 1),
        "summary": summary(results),
        "settings": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1))
    return report


if __name__ == "__main__":
    main()
