"""An answer another web process started, read here: from its worker while it runs, from its
log in Redis once it has ended (fleet/answer_log.py).

A second tab, a reloaded page or a reconnect behind a load balancer may reach a web process
that did not start the generation, possibly after the one that did has died. This process then
builds a replica: a Generation of its own (of its model's engine, with `Replicas` as its sharing)
whose TokenStream is not started here but fed like the home's, by the worker that makes it
(`follow`: every chunk so far, then each new one, then the end), or, for an answer that has
ended, from its log in Redis. Its readers go through the very path local readers take (ids,
positions, grace, 400/410) and get the same bytes. The replica is not counted in this process's
metrics, and writes the log row only if the worker says the process that started it is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Any

from streaming.core.exceptions import GenerationError, Gone, StreamCut
from streaming.core.stream import TokenStream
from streaming.engines.models import Models
from streaming.fleet import answer_log
from streaming.fleet.client import FleetClient
from streaming.fleet.protocol import end_as_the_worker_did
from streaming.fleet.request_codec import request_from_message
from streaming.fleet.sharing import CATCH_UP_S, FleetSharing
from streaming.generations.registry import REGISTRY, Generation

logger = logging.getLogger(__name__)

FIND_AGAIN_POLL_S = 0.1  # its worker gone: how often we ask which worker goes on with it


class Replicas(FleetSharing):
    """This process's replicas: built here, fed by their workers through the fleet client or
    from the answers' logs, and shared like any fleet answer (a reader here counts among the
    answer's readers; a Stop reaches its worker, `Generation.stop`)."""

    def __init__(
        self, client: FleetClient, models: Models, answer_logs: answer_log.AnswerLog
    ) -> None:
        """`models`: the engine of each (a replica is of its request's model's); `answer_logs`:
        where the answers' logs are read (Redis; a test's own)."""
        super().__init__(client)
        self.models = models
        self.answer_logs = answer_logs
        self._following: dict[str, Generation] = {}  # replicas fed by their worker, until the end
        self._answers: dict[str, asyncio.Future[str]] = {}  # `follow` sent, its answer awaited

    def keep(self, generation_id: str, options: dict[str, Any]) -> None:
        """Its home keeps the log, in Redis."""

    async def catch_up(
        self, stream: TokenStream, *, event_id: int | None = None, chunks: int = 0
    ) -> None:
        """Wait, at most CATCH_UP_S, until the replica holds token `event_id` (or `chunks`)."""
        if event_id is None:
            await super().catch_up(stream, chunks=chunks)
        else:
            # Not there in time, or ended: the position decides (400, or its ending).
            await stream.until(lambda: stream.stats.tokens_generated > event_id, CATCH_UP_S)

    def release(self, generation_id: str) -> None:
        """A finished replica is followed no more."""
        self._unfollow(generation_id)

    # --- building a replica ----------------------------------------------------------------

    async def replicate(self, generation_id: str) -> Generation | None:
        """A replica of an answer that has a log, registered here; None if it has none.

        Raises Gone when the log is there but no longer readable (past its cap or retention).
        """
        entries = await self.answer_logs.entries(generation_id)
        if not entries:
            return None
        (kind, first), *parsed = entries
        if kind != "r":
            raise Gone()  # the start of the log is lost (a Redis restart): not whole
        # After a handover, the worker that went on with it wrote its own `r` (fleet/handover.py).
        worker = next(
            (value.get("worker") for kind, value in reversed(parsed) if kind == "r"),
            first.get("worker"),
        )
        for kind, value in parsed:
            if kind == "x" or (
                kind == "e" and time.time() >= value["ended_at"] + value["retention_s"]
            ):
                raise Gone()
        generation = REGISTRY.get().get(generation_id)
        if generation is not None:
            return generation  # another request built it meanwhile
        request = request_from_message(first["request"])
        generation = Generation(
            request,
            self.models.of(request).engine,
            self,
            api=first["api"],
            in_conversation=first.get("conversation", False),
            client=first["client"],
            owner=first["owner"],
            created_at=datetime.fromisoformat(first["created_at"]),
            runs_here=False,
            counted=False,
            writes_row=False,
        )
        REGISTRY.get().add(generation)
        stream = generation.start(durable=True)
        if parsed and parsed[-1][0] == "e":
            self._read_log(generation, stream, parsed)
        else:
            await self._follow(generation, stream, worker)
        return generation

    async def _follow(
        self, generation: Generation, stream: TokenStream, worker: str | None
    ) -> None:
        """Have the worker feed the replica, and wait (CATCH_UP_S) until it holds every chunk
        the worker had sent."""
        answer = self._answers[stream.id] = asyncio.get_running_loop().create_future()
        self._following[stream.id] = generation
        state = ""
        try:
            if worker is None:
                raise LookupError("its log names no worker")
            await self.client.follow(stream, worker, self)
            state = await asyncio.wait_for(answer, CATCH_UP_S)
            if state == "logged":  # it ended meanwhile: its log in Redis has all of it
                self._unfollow(stream.id)
                await self._read_rest(generation)
        except Exception as error:
            self._fail(stream, f"following it failed: {error!r}")
        finally:
            self._answers.pop(stream.id, None)
        if state == "gone":  # past its cap at the worker: no longer whole
            self._unfollow(stream.id)
            stream.stop_keeping_whole()
            stream.finish(error=StreamCut())
            raise Gone()

    def followed(self, generation_id: str, state: str) -> None:
        """The worker's answer to `follow`: `live` (the chunks so far came first), `logged`
        (ended: read its log) or `gone`."""
        answer = self._answers.get(generation_id)
        if answer is not None and not answer.done():
            answer.set_result(state)
            return
        generation = self._following.get(generation_id)
        if generation is None or generation.stream is None or state == "live":
            return
        # An answer to asking again (after a loss, or on the worker that took it over).
        if state == "logged":
            self._unfollow(generation_id)
            asyncio.get_running_loop().create_task(self._read_rest(generation))
        else:
            self._fail(generation.stream, "its worker no longer has all of it")

    def moved(self, generation_id: str) -> None:
        """Its worker died or stopped: follow it on the worker that goes on with it."""
        generation = self._following.get(generation_id)
        if generation is not None and generation.stream is not None:
            asyncio.get_running_loop().create_task(self._find_again(generation))

    async def _find_again(self, generation: Generation) -> None:
        stream = generation.stream
        assert stream is not None
        following = self.client.assignments.followed.get(stream.id)
        gone = following.worker if following is not None else ""
        loop = asyncio.get_running_loop()
        # Its home sees the worker's silence when we do, then hands it over (a round trip).
        deadline = loop.time() + self.client.fleet_settings.timeout_s + CATCH_UP_S
        while not stream.finished and loop.time() < deadline:
            try:
                state = await self.client.query(stream.id)
                if state is not None and state.get("worker") not in (None, gone):
                    await self.client.follow(stream, state["worker"], self)
                    return
                if state is None and await self._ended_in_log(stream.id):
                    self._unfollow(stream.id)
                    await self._read_rest(generation)
                    return
            except Exception as error:
                logger.warning("replica of %s: finding its worker: %r", stream.id, error)
            await asyncio.sleep(FIND_AGAIN_POLL_S)
        self._fail(stream, "no worker went on with it")

    async def _ended_in_log(self, generation_id: str) -> bool:
        last = await self.answer_logs.last(generation_id)
        return last is not None and last[0] == "e"

    async def _read_rest(self, generation: Generation) -> None:
        """Take what the replica lacks from its answer's log (it has ended)."""
        assert generation.stream is not None
        entries = await self.answer_logs.entries(generation.id)
        self._read_log(generation, generation.stream, entries[1:])

    def ended(self, generation_id: str, end: dict[str, Any]) -> None:
        """The worker ended a replica's generation; `end`: its log's last entry."""
        generation = self._following.get(generation_id)
        self._unfollow(generation_id)
        if generation is not None and generation.stream is not None:
            self._apply(generation, generation.stream, "e", end)

    def _unfollow(self, generation_id: str) -> None:
        self._following.pop(generation_id, None)
        self.client.unfollow(generation_id)

    def _read_log(
        self, generation: Generation, stream: TokenStream, entries: list[tuple[str, Any]]
    ) -> None:
        for kind, value in entries:
            self._apply(generation, stream, kind, value)
        if not stream.finished:
            self._fail(stream, "its log has no end")

    def _apply(self, generation: Generation, stream: TokenStream, kind: str, value: Any) -> None:
        if stream.finished:
            return
        stats = stream.stats
        if kind == "c":
            for index, text, tokens, *kind in value:
                if index < stats.tokens_generated:
                    continue  # it has that one (followed live before the end)
                if index != stats.tokens_generated:
                    self._fail(stream, f"tokens {stats.tokens_generated}..{index} are missing")
                    return
                stream.push(text, tokens, *kind)  # a kind only when not TEXT
        elif kind == "x":
            stream.finish(error=StreamCut())  # no longer whole here: a reconnect gets 410
        elif kind == "e":
            stream.count_as(value["tokens_generated"])  # the worker's: the truth
            stats.tokens_after_abort = value["tokens_after_abort"]
            if value["orphan"]:
                generation.writes_row = True  # nobody else will write its row
                # Its latencies as the worker measured them, not as its log was replayed here.
                generation.measured_elsewhere = {
                    "tokens_generated": value["tokens_generated"],
                    "tokens_after_abort": value["tokens_after_abort"],
                    "finish_reason": value["finish_reason"] or "",
                    **value["figures"],
                }
            end_as_the_worker_did(stream, value["finish_reason"], value["error_code"])

    @staticmethod
    def _fail(stream: TokenStream, why: str) -> None:
        if not stream.finished:
            logger.warning("replica of %s: %s", stream.id, why)
            stream.finish(error=GenerationError("worker_unavailable"))
