"""CPU decode-step options for the packaged model, measured side by side (issue 28).

    PYTHONPATH=. .venv/bin/python -m bench.cpu_decode_bench [--configs fp32,bf16,...]
        [--rounds 1] [--tokens 64] [--timeout 240] [--json PATH]

Each configuration runs in its own subprocess (one model per process, so memory and thread
figures are its own), the configurations in turns, `--rounds` times. A subprocess loads the
packaged SmolLM2-135M-Instruct from the engine's converted cache (`model_source.load`, as the
engine does; `STREAMING_MODEL_CACHE` or `.cache/models`), applies its option, and measures:

- **generate**: plain `model.generate`, greedy, 1 stream, `--tokens` new tokens: tokens/s;
- **cb1 / cb8**: a continuous-batching manager made as the engine makes it
  (`batching.new_manager`, batch 8, the engine's page, KV and prefill sizes), 1 and 8 streams
  of `--tokens` tokens at the packaged model's sampling: total tokens/s, and the time to the
  first token at 1 stream;
- **RSS** after load (and peak at the end);
- **greedy**: the first 32 greedy tokens of 5 short prompts through the manager; the parent
  reports the share identical to fp32's from the same run.

Configurations (`CONFIGS`): fp32 (today's, the numeric guard included; `fp32-noguard` without
it), bf16 weights, linear layers packed for oneDNN
(`packed_linear.py`, in fp32 and bf16), the manager's own compile
(`ContinuousBatchingConfig.default_compile_level`, the varlen path: on a CPU with SDPA there is
no decode fast path), `torch.compile(model.forward)` for generate, torchao int8 weight-only,
and thread settings. Prints a markdown table with ratios against fp32 in the same run; writes
JSON to bench/results/cpu_decode.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PROMPT = "Write a long story about a lighthouse keeper and the sea."
GREEDY_PROMPTS = (
    "What is the capital of France?",
    "Name three colours of the rainbow.",
    "How many legs does a spider have?",
    "日本の首都はどこですか？",
    "Explain in one sentence why the sky is blue.",
)
GREEDY_TOKENS = 32
MAX_BATCH = 8
# name -> options: dtype, threads, interop, cb_compile (default_compile_level), forward_compile
# (torch.compile(model.forward) for generate and the manager), int8 (torchao weight-only),
# q_pad / kv_pad (the manager's padding intervals for compiled shapes).
CONFIGS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "fp32-noguard": {"no_guard": True},  # without the numeric guard (issue 52) the engine adds
    "bf16": {"dtype": "bfloat16"},
    "fp32-packed": {"pack": True},
    "bf16-packed": {"dtype": "bfloat16", "pack": True},
    "fp32-cbcompile1": {"cb_compile": 1},
    "fp32-cbcompile3": {"cb_compile": 3},
    # transformers pads a compiled varlen batch to 64 query tokens and 16384 KV tokens by
    # default: a 1-token decode step would compute 64; these pad to 8 and 256 instead.
    "fp32-cbcompile1-pad8": {"cb_compile": 1, "q_pad": 8, "kv_pad": 256},
    "bf16-cbcompile1": {"dtype": "bfloat16", "cb_compile": 1},
    "fp32-fwdcompile": {"forward_compile": True},
    "int8wo": {"int8": True},
    "bf16-int8wo": {"dtype": "bfloat16", "int8": True},
    "fp32-threads1": {"threads": 1},
    "fp32-interop1": {"interop": 1},
    "bf16-threads1": {"dtype": "bfloat16", "threads": 1},
}


def rss_mb() -> float:
    """This process's resident set now, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(name: str, tokens: int) -> dict[str, Any]:
    """Load, apply the option, measure; returns this configuration's figures."""
    options = CONFIGS[name]
    import torch

    if "interop" in options:
        torch.set_num_interop_threads(options["interop"])
    if "threads" in options:
        torch.set_num_threads(options["threads"])
    from streaming.engines import batching, model_source
    from streaming.engines.background import in_passing_thread

    out: dict[str, Any] = {"config": name, "options": options}
    cache = Path(os.environ.get("STREAMING_MODEL_CACHE") or ROOT / ".cache" / "models")
    dtype = getattr(torch, options.get("dtype", "float32"))
    started = time.perf_counter()
    source = model_source.resolve("")
    # Loaded on a thread that then ends, as the engine loads (background.in_passing_thread).
    model, tokenizer = in_passing_thread(
        lambda: model_source.load(source, cache_root=cache, device="cpu", dtype=dtype)
    )
    if options.get("pack"):
        from streaming.engines import packed_linear

        out["packed_layers"] = in_passing_thread(lambda: packed_linear.pack_linears(model))
    if options.get("int8"):
        import torchao
        from torchao.quantization import Int8WeightOnlyConfig, quantize_

        out["torchao"] = torchao.__version__
        in_passing_thread(lambda: quantize_(model, Int8WeightOnlyConfig()))
    out["load_s"] = time.perf_counter() - started
    out["rss_after_load_mb"] = rss_mb()
    out["threads"] = torch.get_num_threads()
    out["interop_threads"] = torch.get_num_interop_threads()
    eos = batching.eos_ids(model, tokenizer)
    ids = batching.encode_chat(tokenizer, [{"role": "user", "content": PROMPT}])

    # The manager as the engine makes it (LoadedModel.new_manager's sizes), with this
    # configuration's compile level slipped into its ContinuousBatchingConfig.
    init = model.init_continuous_batching

    def init_with_options(**kwargs: Any) -> Any:
        config = kwargs["continuous_batching_config"]
        if options.get("cb_compile"):
            config.default_compile_level = options["cb_compile"]
        if options.get("q_pad"):
            config.q_padding_interval_size = options["q_pad"]
            config.kv_padding_interval_size = options["kv_pad"]
        return init(**kwargs)

    model.init_continuous_batching = init_with_options
    sampling = model_source.sampling_defaults(source)
    if options.get("forward_compile"):
        model.forward = torch.compile(model.forward, dynamic=True)
    started = time.perf_counter()
    manager = batching.new_manager(
        model,
        eos_ids=eos,
        max_batch=MAX_BATCH,
        page_tokens=256,
        cpu_kv_tokens=MAX_BATCH * 1024,
        cpu_prefill_tokens=256,
        top_k=sampling.top_k,
        failed=None if options.get("no_guard") else lambda request_id: None,
    )
    out["manager_start_s"] = time.perf_counter() - started
    try:
        started = time.perf_counter()
        batching.warm_up(manager, ids, MAX_BATCH, timeout_s=600)
        out["manager_warmup_s"] = time.perf_counter() - started
        for streams in (1, MAX_BATCH):
            runs = [
                cb_run(manager, ids, streams, tokens, sampling.temperature, sampling.top_p)
                for _ in range(2)
            ]  # the first warms up
            out[f"cb{streams}_tok_s"], out[f"cb{streams}_tokens"] = runs[-1][0], runs[-1][2]
            if streams == 1:
                out["ttft_ms"] = runs[-1][1] * 1000
        out["greedy"] = cb_greedy(manager, tokenizer)
    finally:
        manager.stop(block=True)

    input_ids = torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(2):  # the first warms up (and compiles, with forward_compile)
            started = time.perf_counter()
            generated = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                pad_token_id=min(eos),
            )
            elapsed = time.perf_counter() - started
    out["generate_tok_s"] = (generated.shape[1] - input_ids.shape[1]) / elapsed
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def cb_run(
    manager: Any, ids: list[int], streams: int, tokens: int, temperature: float, top_p: float
) -> tuple[float, float, int]:
    """(total tokens/s, seconds to the first token of the first stream, tokens) of `streams`
    requests of `tokens` tokens, sent at once, read with get_result as the engine reads."""
    counts: dict[str, int] = {}
    first: float | None = None
    started = time.perf_counter()
    for index in range(streams):
        manager.add_request(
            ids,
            request_id=f"s{index}-{time.monotonic_ns()}",
            max_new_tokens=tokens,
            streaming=True,
            temperature=temperature,
            top_p=top_p,
        )
    while len(counts) < streams:
        output = manager.get_result(timeout=120)
        if output is None:
            raise RuntimeError("the manager gave nothing for 120 s")
        if output.error is not None:
            raise RuntimeError(f"the manager failed: {output.error}")
        if first is None and output.generated_tokens:
            first = time.perf_counter() - started
        if output.is_finished():
            counts[output.request_id] = len(output.generated_tokens)
    elapsed = time.perf_counter() - started
    return sum(counts.values()) / elapsed, first or elapsed, sum(counts.values())


def cb_greedy(manager: Any, tokenizer: Any) -> list[list[int]]:
    """The first GREEDY_TOKENS tokens of each GREEDY_PROMPTS prompt, through the manager, all at
    once, at the engine's near-zero temperature (what temperature 0 becomes in the engine)."""
    from streaming.engines import batching
    from streaming.engines.transformers import TransformersEngine

    names = {}
    for index, prompt in enumerate(GREEDY_PROMPTS):
        name = f"g{index}-{time.monotonic_ns()}"
        names[name] = index
        manager.add_request(
            batching.encode_chat(tokenizer, [{"role": "user", "content": prompt}]),
            request_id=name,
            max_new_tokens=GREEDY_TOKENS,
            streaming=False,
            temperature=TransformersEngine.MIN_TEMPERATURE,
            top_p=1.0,
        )
    answers: list[list[int]] = [[] for _ in GREEDY_PROMPTS]
    pending = set(names)
    while pending:
        output = manager.get_result(timeout=120)
        if output is None:
            raise RuntimeError("no greedy answer for 120 s")
        if output.request_id in pending and output.is_finished():
            answers[names[output.request_id]] = list(output.generated_tokens)
            pending.discard(output.request_id)
    return answers


def run_child(name: str, tokens: int, timeout: float) -> dict[str, Any]:
    """One configuration in a fresh interpreter; its figures, or why it failed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
    threads = CONFIGS[name].get("threads")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    command = [
        sys.executable,
        "-m",
        "bench.cpu_decode_bench",
        "--child",
        name,
        "--tokens",
        str(tokens),
    ]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"config": name, "error": f"over the {timeout:.0f} s limit"}
    wall = time.perf_counter() - started
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return {**json.loads(line.removeprefix("RESULT ")), "wall_s": wall}
    tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"config": name, "error": f"exit {done.returncode}: {tail[:200]}", "wall_s": wall}


def greedy_share(answers: list[list[int]], reference: list[list[int]]) -> float:
    """The share of prompts whose first GREEDY_TOKENS tokens equal the reference's."""
    pairs = zip(answers, reference, strict=True)
    same = sum(a[:GREEDY_TOKENS] == r[:GREEDY_TOKENS] for a, r in pairs)
    return same / len(reference)


def table(rounds: list[list[dict[str, Any]]], names: list[str]) -> str:
    """A markdown table of medians over rounds, ratios against fp32's medians."""
    keys = ("generate_tok_s", "cb1_tok_s", "cb8_tok_s", "ttft_ms", "rss_after_load_mb")

    def median(name: str, key: str) -> float:
        values = [r[key] for rnd in rounds for r in rnd if r["config"] == name and key in r]
        return statistics.median(values) if values else float("nan")

    reference = next(
        (r["greedy"] for rnd in rounds for r in rnd if r["config"] == "fp32" and "greedy" in r),
        None,
    )
    lines = [
        "| config | generate tok/s | CB 1-stream tok/s | CB 8-stream total tok/s | "
        "TTFT 1 stream ms | RSS MB | greedy = fp32 | generate × | CB1 × | CB8 × | "
        "TTFT × |",
        "|---" * 11 + "|",
    ]
    for name in names:
        errors = [r["error"] for rnd in rounds for r in rnd if r["config"] == name and "error" in r]
        if errors and all(r.get("error") for rnd in rounds for r in rnd if r["config"] == name):
            lines.append(f"| {name} | failed: {errors[0]} |" + " |" * 9)
            continue
        figures = [median(name, key) for key in keys]
        greedy = next(
            (r["greedy"] for rnd in rounds for r in rnd if r["config"] == name and "greedy" in r),
            None,
        )
        share = (
            f"{greedy_share(greedy, reference):.0%}"
            if greedy is not None and reference is not None
            else "?"
        )
        ratios = [figures[i] / median("fp32", keys[i]) for i in range(4)]
        lines.append(
            f"| {name} | {figures[0]:.1f} | {figures[1]:.1f} | {figures[2]:.1f} | "
            f"{figures[3]:.0f} | {figures[4]:.0f} | {share} | "
            + " | ".join(f"{r:.2f}" for r in ratios)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per config")
    parser.add_argument("--json", type=Path, default=RESULTS / "cpu_decode.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.tokens)), flush=True)
        return
    names = args.configs.split(",")
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    if "fp32" not in names:
        names.insert(0, "fp32")  # the reference for ratios and greedy output
    rounds: list[list[dict[str, Any]]] = []
    for index in range(args.rounds):
        rounds.append([])
        for name in names:
            result = run_child(name, args.tokens, args.timeout)
            rounds[-1].append(result)
            shown = {
                k: (round(v, 1) if isinstance(v, float) else v)
                for k, v in result.items()
                if k not in ("greedy", "options")
            }
            print(f"round {index + 1} {name}: {shown}", flush=True)
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rounds, indent=1))
    print(
        f"\n{args.tokens} tokens a stream; medians of {args.rounds} round(s), configs in "
        "turns, each in its own process; ratios against fp32 in this run"
    )
    print(table(rounds, names))


if __name__ == "__main__":
    main()
