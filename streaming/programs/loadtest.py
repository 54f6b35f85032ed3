"""`manage.py loadtest`: many streams against a server, timed as vLLM's serving benchmark does.

Each request is timed from the moment it is sent (connection included, as a browser opening a
stream pays it) by the reads that carry its events. The figures, per request and pooled, are
defined in docs/programs.md; loadtest_report.summarize_run computes them from the raw timestamps,
which its `write_json` saves so that any figure can be recomputed.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import sys
import time
from typing import Any, TextIO

from streaming.programs.loadtest_config import (
    FINAL_STATES_WAIT_S,
    PROMPT_WORDS,
    Limits,
    LoadTestConfig,
    LoadTestError,
)
from streaming.programs.loadtest_records import RequestRecord, RunResult, StreamReader
from streaming.programs.loadtest_report import Progress
from streaming.programs.streamclient import ClientConnection, ClientError, error_code, fetch_json


class LoadTest:
    """Drives one run: issues requests, reads their streams, collects records."""

    def __init__(self, config: LoadTestConfig, progress: Progress | None = None) -> None:
        self.config = config.checked()
        self.origin = config.origin
        self.progress = progress
        self.rng = random.Random(config.seed)
        self.records: list[RequestRecord] = []
        self.model: str | None = config.model
        self._tasks: set[asyncio.Task[None]] = set()
        self._deadline = 0.0

    async def run(self) -> RunResult:
        """Preflight, drive the load, then read the counters of cancelled generations."""
        _raise_open_file_limit(self._sockets_needed())
        stats_before = await self._preflight()
        wall, start = time.time(), time.perf_counter()
        self._deadline = start + self.config.max_duration_s
        progress_task = asyncio.create_task(self.progress.run()) if self.progress else None
        interrupted = False
        try:
            if self.config.rate is not None:
                await self._open_loop()
            else:
                await self._closed_loop()
        except asyncio.CancelledError:
            # Ctrl-C: stop issuing, end what is open, and still report what was measured.
            interrupted = True
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            if self.progress is not None and progress_task is not None:
                progress_task.cancel()
                self.progress.draw(final=True)
        end = max((r.ended_at or start for r in self.records), default=start)
        if not interrupted:
            await self._read_cancelled_counters()
        stats_after = None if interrupted else await self._stats()
        return RunResult(
            self.config,
            self.records,
            start,
            end,
            wall,
            self.model,
            stats_before,
            stats_after,
            interrupted,
        )

    def _sockets_needed(self) -> int:
        return (
            self.config.concurrency or self.config.max_concurrency or Limits.MAX_CONCURRENCY
        ) + 64

    async def _preflight(self) -> dict[str, Any] | None:
        """Fail early and clearly when nothing answers; learn the model for the OpenAI API."""
        try:
            stats = await self._stats(quiet=False)
        except ClientError as error:
            raise LoadTestError(str(error)) from None
        if self.config.api == "openai" and self.model is None:
            status_models, models = await fetch_json(self.origin, "GET", "/v1/models")
            try:
                self.model = models["data"][0]["id"]
            except (TypeError, KeyError, IndexError):
                raise LoadTestError(
                    f"GET /v1/models answered {status_models} without a model; pass --model"
                ) from None
        return stats

    async def _stats(self, *, quiet: bool = True) -> dict[str, Any] | None:
        """`/api/stats` (None where the server has none; ClientError unless `quiet`)."""
        try:
            status, stats = await fetch_json(self.origin, "GET", "/api/stats")
        except ClientError:
            if quiet:
                return None
            raise
        return stats if status == 200 and isinstance(stats, dict) else None

    # --- driving the load ----------------------------------------------------------------

    def _may_issue(self) -> bool:
        return len(self.records) < self.config.max_requests and time.perf_counter() < self._deadline

    def _new_record(self, scheduled_at: float | None = None) -> RequestRecord:
        record = RequestRecord(len(self.records), scheduled_at=scheduled_at)
        if self.rng.random() < self.config.cancel_fraction:
            record.cancel_after = self.rng.randint(1, self.config.max_tokens - 1)
        self.records.append(record)
        if self.progress:
            self.progress.issued += 1
        return record

    async def _closed_loop(self) -> None:
        async def worker() -> None:
            while self._may_issue():
                await self._tracked(self._new_record())

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency or 1)))

    async def _open_loop(self) -> None:
        rate = self.config.rate or 1.0
        cap = self.config.max_concurrency or Limits.MAX_CONCURRENCY
        slots = asyncio.Semaphore(cap)
        arrival = time.perf_counter()

        async def when_free(record: RequestRecord) -> None:
            async with slots:
                await self._tracked(record)

        while True:
            arrival += self.rng.expovariate(rate)
            delay = arrival - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self._may_issue():
                break
            task = asyncio.create_task(when_free(self._new_record(scheduled_at=arrival)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.gather(*self._tasks)

    async def _tracked(self, record: RequestRecord) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(record)
        finally:
            self._tasks.discard(task)
            if self.progress:
                self.progress.finished += 1
                self.progress.failed += record.outcome == "failed"
                self.progress.cancelled += record.outcome == "cancelled"

    async def _one(self, record: RequestRecord) -> None:
        record.started_at = time.perf_counter()
        deadline = record.started_at + self.config.timeout_s
        connection: ClientConnection | None = None
        try:
            connection = await ClientConnection.open(self.origin, self.config.timeout_s)
            reader = StreamReader(record, self.config.api, connection)
            if self.config.api == "openai":
                method, path, body = "POST", "/v1/chat/completions", self._openai_body(record)
            elif not self.config.creates_first:
                method, path, body = "POST", "/api/stream", self._native_body(record)
            else:
                method, body = "GET", b""
                path, connection = await self._create(record, connection, deadline)
                reader.connection = connection
            response = await connection.request(
                method,
                path,
                body=body,
                on_body=reader.feed,
                headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
                timeout_s=max(0.001, deadline - time.perf_counter()),
            )
            record.http_status = response.status
            record.response_at = response.first_byte_at
            self._classify(record, response.status, response.json(), reader.cancelled)
            record.ended_at = response.ended_at
        except ClientError as error:
            record.outcome, record.error = "failed", error.code
        except asyncio.CancelledError:
            record.outcome, record.error = "interrupted", "interrupted"
            raise
        finally:
            if connection is not None:
                connection.close()
            if record.ended_at is None:
                record.ended_at = time.perf_counter()

    async def _create(
        self, record: RequestRecord, connection: ClientConnection, deadline: float
    ) -> tuple[str, ClientConnection]:
        """The two-step native flow's first step: the generation id and where to stream it."""
        response = await connection.request(
            "POST",
            "/api/generations",
            body=self._native_body(record),
            headers={"Content-Type": "application/json"},
            timeout_s=max(0.001, deadline - time.perf_counter()),
        )
        record.created_at = response.ended_at
        payload = response.json()
        if response.status != 201 or not isinstance(payload, dict) or "stream_url" not in payload:
            record.http_status = response.status
            raise ClientError(error_code(payload, f"http_{response.status}"), "create failed")
        record.generation_id = str(payload.get("id"))
        if not connection.reusable:
            connection.close()
            connection = await ClientConnection.open(self.origin, self.config.timeout_s)
        return payload["stream_url"].removeprefix(self.origin.prefix), connection

    def _classify(self, record: RequestRecord, status: int, payload: Any, cancelled: bool) -> None:
        if not 200 <= status < 300:
            record.outcome, record.error = "failed", error_code(payload, f"http_{status}")
        elif record.error is not None:
            record.outcome = "failed"
        elif cancelled:
            record.outcome = "cancelled"
        elif record.done_at is None:
            # Ended without its end marker: the article's 「応答が途中で切れました」.
            record.outcome, record.error = "failed", "truncated"
        else:
            record.outcome = "ok"

    def _prompt(self, record: RequestRecord) -> str:
        rng = random.Random(f"{self.config.seed}:{record.index}")
        return " ".join(rng.choice(PROMPT_WORDS) for _ in range(self.config.prompt_words))

    def _native_body(self, record: RequestRecord) -> bytes:
        return json.dumps(
            {"prompt": self._prompt(record), "max_tokens": self.config.max_tokens},
            ensure_ascii=False,
        ).encode()

    def _openai_body(self, record: RequestRecord) -> bytes:
        return json.dumps(
            {
                "model": self.model,
                "stream": True,
                "stream_options": {"include_usage": True},
                "max_tokens": self.config.max_tokens,
                "messages": [{"role": "user", "content": self._prompt(record)}],
            },
            ensure_ascii=False,
        ).encode()

    # --- after the load --------------------------------------------------------------------

    async def _read_cancelled_counters(self) -> None:
        """Each cancelled generation's final counters, once the server has finished it."""
        slots = asyncio.Semaphore(16)  # a handful at a time: this is not part of the load

        async def read(record: RequestRecord) -> None:
            async with slots:
                record.server = await self._final_state(record.generation_id or "")

        await asyncio.gather(
            *(read(r) for r in self.records if r.outcome == "cancelled" and r.generation_id)
        )

    async def _final_state(self, generation_id: str) -> dict[str, Any] | None:
        deadline = time.perf_counter() + FINAL_STATES_WAIT_S
        while True:
            try:
                status, state = await fetch_json(
                    self.origin, "GET", f"/api/generations/{generation_id}"
                )
            except ClientError:
                state, status = None, 0
            if (
                status == 200
                and isinstance(state, dict)
                and state.get("status") not in ("pending", "streaming")
            ):
                return {
                    key: state.get(key)
                    for key in ("status", "tokens_generated", "tokens_after_abort")
                }
            if time.perf_counter() > deadline:
                return None
            await asyncio.sleep(0.02)  # polling the server's state, not waiting for readiness


def _raise_open_file_limit(wanted: int) -> None:
    """Each stream is a socket: lift the soft limit on open files up to what the run needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# --- the figures -------------------------------------------------------------------------------


def run(config: LoadTestConfig, *, progress_to: TextIO | None = sys.stderr) -> RunResult:
    """Run a load test to the end (or Ctrl-C) and return what it measured."""
    progress = Progress(progress_to, config) if progress_to is not None else None
    with asyncio.Runner(loop_factory=_fast_loop_factory()) as runner:
        return runner.run(LoadTest(config, progress).run())


def _fast_loop_factory() -> Any:
    """uvloop when installed (it is, for uvicorn): the client's own overhead stays small."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
