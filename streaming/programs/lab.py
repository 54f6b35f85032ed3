"""`manage.py lab`: the article's lab, end to end, narrated for someone learning it.

Stream an answer and measure it; close the connection mid-answer and prove with the server's own
counters that generation stopped; then say what a server without cancellation would have spent.
Each proof is a comparison of counters, never of wall-clock time: "time passes" is measured by
the engine's own pace, as the tokens of a second stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
from dataclasses import dataclass
from typing import Any, TextIO

from streaming.core.latency import percentile
from streaming.programs.lab_config import LabConfig
from streaming.programs.lab_output import TEXT_WIDTH, Echo, histogram
from streaming.programs.lab_server import own_server
from streaming.programs.lab_stream import stream
from streaming.programs.streamclient import ClientError, fetch_json
from streaming.wire.origin import Origin

PROMPT = "스트리밍은 왜 사용자 경험을 바꾸나요?"  # Korean, like the article's sample tokens
SEED = 7
FINAL_STATUSES_OF_A_DISCONNECT = ("client_disconnected", "cancelled")
POLL_S = 0.005  # between reads of the generation's state while waiting for the server to notice


@dataclass
class Proof:
    """One claim the lab checks, and what it saw."""

    claim: str
    passed: bool
    evidence: str


class Lab:
    """The four steps, written to `out` as they happen."""

    def __init__(self, origin: Origin, out: TextIO, config: LabConfig, *, private: bool) -> None:
        self.origin = origin
        self.out = out
        self.config = config
        self.private = private  # the lab started this server: nothing else runs on it
        self.proofs: list[Proof] = []
        self.pace_s: float | None = None  # seconds per token, as measured in step 1

    def say(self, text: str = "") -> None:
        """One paragraph or line of the narration."""
        self.out.write(text + "\n")
        self.out.flush()

    def tell(self, text: str) -> None:
        """A paragraph of explanation, wrapped and indented."""
        self.say(textwrap.fill(text, TEXT_WIDTH + 6, initial_indent="   ", subsequent_indent="   "))

    def prove(self, claim: str, passed: bool, evidence: str) -> bool:
        """Record a proof and print its verdict with the evidence under it."""
        self.proofs.append(Proof(claim, passed, evidence))
        self.say(f"   {'✓' if passed else '✗ FAILED:'} {claim}")
        self.say(f"       {evidence}")
        return passed

    async def run(self) -> list[Proof]:
        """All steps; a step whose ground is missing is skipped, and its proofs fail."""
        status, stats = await self._get("/api/stats")
        if status != 200:
            raise ClientError(
                "bad_server", f"GET /api/stats answered {status}: is this our server?"
            )
        self.say(f"Engine: {stats.get('engine')} (model {stats.get('model')}).")
        self.say()
        self.tell(
            "The lab of “Why streaming changes UX”: stream an answer and measure it, leave "
            "in the middle, prove with the server's counters that generation stopped, and "
            "count what it would have cost if it had not."
        )
        self.say()
        if await self.step_stream():
            generation = await self.step_leave()
            if generation is not None:
                await self.step_prove(generation)
                await self.step_waste(generation)
        return self.proofs

    async def _get(self, path: str) -> tuple[int, dict[str, Any]]:
        status, body = await fetch_json(self.origin, "GET", path)
        return status, body if isinstance(body, dict) else {}

    async def _post(self, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, body = await fetch_json(self.origin, "POST", path, payload)
        return status, body if isinstance(body, dict) else {}

    # --- step 1 -----------------------------------------------------------------------------

    async def step_stream(self) -> bool:
        """Stream an answer; measure TTFT and the gaps."""
        c = self.config
        self.say("1. Stream an answer and measure it")
        self.say(f'   POST /api/stream  {{"prompt": "{PROMPT}", "max_tokens": {c.answer_tokens}}}')
        self.say()
        echo = Echo(self.out, indent="   │ ")
        run = await stream(
            self.origin,
            "POST",
            "/api/stream",
            {"prompt": PROMPT, "max_tokens": c.answer_tokens, "seed": SEED},
            echo=echo,
        )
        echo.end()
        self.say()
        ok = self.prove(
            "the answer streamed to its end",
            run.done and run.token_count > 0,
            f"{run.token_count} tokens, then "
            + ("data: [DONE]" if run.done else f"no [DONE] ({run.error or 'cut'})"),
        )
        if not run.chunks:
            return False
        gaps_ms = [g * 1000 for g in run.gaps_s]
        head_ms = (run.head_at - run.started_at) * 1000 if run.head_at else None
        ttft_ms = (run.ttft_s or 0) * 1000
        total_s = run.token_times[-1] - run.started_at
        if run.token_count > 1:
            self.pace_s = (run.token_times[-1] - run.token_times[0]) / (run.token_count - 1)
        self.say()
        if head_ms is not None:
            self.say(
                f"   headers after {head_ms:9.1f} ms   the 200 and text/event-stream: the "
                "stream is open"
            )
        self.say(
            f"   first token   {ttft_ms:9.1f} ms   TTFT: how long the reader looks at an "
            "empty screen"
        )
        self.say(
            f"   whole answer  {total_s * 1000:9.1f} ms   sent whole, nothing would show until here"
        )
        if gaps_ms and self.pace_s is not None:
            self.say(
                f"   gaps between tokens: p50 {percentile(gaps_ms, 50):.1f} ms, "
                f"p99 {percentile(gaps_ms, 99):.1f} ms, max {max(gaps_ms):.1f} ms; "
                f"TPOT {self.pace_s * 1000:.1f} ms per token"
            )
            self.say()
            for line in histogram(gaps_ms):
                self.say("   " + line)
        self.say()
        if run.reads > run.token_count // 2:
            self.tell(
                f"The {run.token_count} tokens came in {run.reads} separate reads: "
                "nothing on the way buffered them."
            )
        else:
            self.tell(
                f"The {run.token_count} tokens came in only {run.reads} reads: something "
                "buffered the stream (a proxy, gzip, the framework; the article's table "
                "of culprits says which fix applies)."
            )
        self.tell(
            "TTFT decides when reading can start; the gaps decide whether reading keeps "
            "up. Look at p99, not only p50: batching on a busy GPU makes the gaps swing."
        )
        self.say()
        return ok

    # --- step 2 -----------------------------------------------------------------------------

    async def step_leave(self) -> dict[str, Any] | None:
        """Start a long answer, read a little of it, close the connection."""
        c = self.config
        self.say("2. Leave in the middle of an answer (the user closes the tab)")
        status, created = await self._post(
            "/api/generations", {"prompt": PROMPT, "max_tokens": c.max_tokens, "seed": SEED + 1}
        )
        if status != 201:
            self.prove("a generation could be created", False, f"POST answered {status}")
            return None
        generation_id = created["id"]
        self.say(f"   POST /api/generations (max_tokens {c.max_tokens}) → 201, id {generation_id}")
        run = await stream(self.origin, "GET", created["stream_url"], leave_after=c.leave_after)
        if run.closed_at is None:
            self.prove(
                "the stream could be left mid-answer",
                False,
                f"it ended after {run.token_count} tokens ({run.error or 'done'})",
            )
            return None
        self.say(f"   GET …/stream: read {run.token_count} tokens, then closed the socket.")
        state, noticed_at = await self._wait_final(generation_id, run.closed_at)
        noticed = state is not None
        if noticed:
            self.say(
                f"   GET /api/generations/<id>, {(noticed_at - run.closed_at) * 1000:.0f} ms "
                f"after the disconnect: status {state['status']},"
            )
            self.say(
                f"   tokens_generated {state['tokens_generated']}, tokens_after_abort "
                f"{state['tokens_after_abort']}."
            )
            state = {**state, "received": run.token_count}
        else:
            _, state = await self._get(f"/api/generations/{generation_id}")
            state = {**(state or {}), "received": run.token_count}
        if noticed:
            evidence = f"status {state.get('status')!r}"
        elif state.get("status") in ("pending", "streaming"):
            evidence = f"still {state.get('status')!r} {c.notice_wait_s:g} s after the disconnect"
        else:
            evidence = f"status {state.get('status')!r}: it ran on to its end"
        self.prove("the server noticed the disconnect and ended the generation", noticed, evidence)
        self.say()
        return {"id": generation_id, **state}

    async def _wait_final(
        self, generation_id: str, since: float
    ) -> tuple[dict[str, Any] | None, float]:
        deadline = since + self.config.notice_wait_s
        while True:
            status, state = await self._get(f"/api/generations/{generation_id}")
            now = time.perf_counter()
            if status == 200 and state.get("status") in FINAL_STATUSES_OF_A_DISCONNECT:
                return state, now
            if status == 200 and state.get("status") not in ("pending", "streaming"):
                return None, now  # ended some other way (ran to completion): not noticed
            if now > deadline:
                return None, now
            await asyncio.sleep(POLL_S)  # polling the server's state, with a deadline

    # --- step 3 -----------------------------------------------------------------------------

    async def step_prove(self, generation: dict[str, Any]) -> None:
        """Let the engine's own pace measure time passing; the counters must not move."""
        c = self.config
        path = f"/api/generations/{generation['id']}"
        self.say("3. Prove that generation stopped")
        _, before = await self._get(path)
        _, stats_before = await self._get("/api/stats")
        clock = await stream(
            self.origin,
            "POST",
            "/api/stream",
            {"prompt": "clock", "max_tokens": c.clock_tokens, "seed": SEED},
        )
        _, after = await self._get(path)
        _, stats_after = await self._get("/api/stats")
        pace = f" (≈ {clock.token_count * self.pace_s:.2f} s)" if self.pace_s else ""
        self.tell(
            f"Meanwhile a second stream read {clock.token_count} tokens: the engine's own "
            f"pace says that much time passed{pace}. The left generation's counters are "
            "read before and after."
        )
        self.prove(
            "the engine had time to run",
            clock.done and clock.token_count > 0,
            f"the clock stream delivered {clock.token_count} tokens"
            + ("" if clock.done else f" and no [DONE] ({clock.error or 'cut'})"),
        )
        self.prove(
            "its token counter stayed frozen while time passed",
            before.get("tokens_generated") == after.get("tokens_generated"),
            f"tokens_generated {before.get('tokens_generated')} → {after.get('tokens_generated')}",
        )
        self.prove(
            "not one token was generated after the abort",
            after.get("tokens_after_abort") == 0,
            f"tokens_after_abort = {after.get('tokens_after_abort')} "
            f"(tokens_generated {after.get('tokens_generated')}, of which this client read "
            f"{generation['received']})",
        )
        self.prove(
            "server-wide, no abort leaked tokens",
            stats_before.get("tokens_after_abort_total")
            == stats_after.get("tokens_after_abort_total"),
            f"/api/stats tokens_after_abort_total {stats_before.get('tokens_after_abort_total')}"
            f" → {stats_after.get('tokens_after_abort_total')}",
        )
        if self.private:
            grown = stats_after.get("tokens_generated_total", 0) - stats_before.get(
                "tokens_generated_total", 0
            )
            self.prove(
                "the only tokens generated were the clock's",
                grown == clock.token_count,
                f"/api/stats tokens_generated_total grew by {grown}",
            )
        generation.update(after)
        self.say()

    # --- step 4 -----------------------------------------------------------------------------

    async def step_waste(self, generation: dict[str, Any]) -> None:
        """What a server that never checks for the disconnect would have spent."""
        c = self.config
        generated = generation.get("tokens_generated") or 0
        deterministic = generation.get("engine") == "deterministic"
        total = full_answer_tokens(c.max_tokens, SEED + 1) if deterministic else c.max_tokens
        exact = "" if deterministic else "up to "
        would = total - generated
        self.say("4. What a server without cancellation would have wasted")
        if generation.get("status") in ("pending", "streaming"):
            self.tell(
                f"This server did not stop it: {generated} tokens so far for nobody, and "
                f"it is still going (it was asked for {c.max_tokens}). That is the quiet, "
                "expensive accident the article warns about; its section 5 says the fix: "
                "check for the disconnect on every token and abort the request in the "
                "engine."
            )
            self.say()
            return
        seconds = (
            ""
            if self.pace_s is None
            else (
                f": {would * self.pace_s:.1f} s of engine time at the {self.pace_s * 1000:.1f} ms "
                "per token measured in step 1"
            )
        )
        self.tell(
            f"Left alone, this answer would have run to {exact}{total} tokens; it stopped "
            f"at {generated}. A server that never checks for the disconnect would have "
            f"gone on for {exact}{would} more tokens{seconds}, for a reader who had "
            "already left, holding a batch slot another request was waiting for. That is "
            "one closed tab; multiply by your traffic."
        )
        self.say()


def full_answer_tokens(max_tokens: int, seed: int) -> int:
    """How long the deterministic engine's answer to the lab's prompt would have been."""
    from streaming.core.request import GenerationRequest, Message
    from streaming.engines.script import tokens_for

    request = GenerationRequest(
        id="lab", messages=(Message("user", PROMPT),), max_tokens=max_tokens, seed=seed
    )
    return len(tokens_for(request)[0])


def run_lab(config: LabConfig, out: TextIO) -> list[Proof]:
    """Run the lab against `config.url`, or against a server it starts and stops itself."""
    config = config.checked()
    with contextlib.ExitStack() as stack:
        if config.url is None:
            origin = Origin.parse(stack.enter_context(own_server(config, out)))
        else:
            origin = Origin.parse(config.url)
            out.write(f"Server: {origin}\n")
        lab = Lab(origin, out, config, private=config.url is None)
        return asyncio.run(lab.run())
