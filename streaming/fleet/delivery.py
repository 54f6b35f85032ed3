"""A model worker's generations going out: each new chunk to every web process that reads it,
then its end (for a durable answer, once its log in Redis has it).

The queue and the one send loop per web process are in fleet/outbox.py; this is what the worker
puts in them (the worker's `Delivery`, fleet/worker.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streaming.core.abort import AbortReason
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.latency import summarize
from streaming.engines.base import Engine
from streaming.fleet import answer_log
from streaming.fleet.audience import Audience, WorkerGenerations
from streaming.fleet.outbox import Outboxes
from streaming.fleet.protocol import HANDED_OVER, End, prompt_figures
from streaming.fleet.webs import Webs


class Delivery:
    """The worker's generations going out, through one outbox per web process (`outboxes`).

    `generations` is the worker's record of each (fleet/audience.py): its audience is freed
    here once its end is on its way, the record itself once its home has that end.
    """

    def __init__(
        self,
        layer: Any,
        engine: Engine,
        *,
        generations: WorkerGenerations,
        webs: Webs,
        answer_logs: answer_log.AnswerLog,
        spawn: Callable[[Any], Any],
    ) -> None:
        self.engine = engine
        self.generations = generations
        self.webs = webs
        self.answer_logs = answer_logs
        self.outboxes = Outboxes(
            layer,
            "",  # the worker's channel, once `start` has opened it
            spawn,
            delivered=self._delivered,
            give_up=self._give_up_on,
            in_use=self._in_use,
        )

    async def pump(self, audience: Audience) -> None:
        """Send each new chunk of the generation to every web process it feeds, then its end
        (for a durable answer, once its log has it)."""
        stream = audience.stream
        durable = stream.id in self.answer_logs.open
        finish_reason, error_code = await self._send_chunks(audience, durable)
        if error_code == HANDED_OVER:
            self.answer_logs.drop(stream.id)  # the worker that goes on with it writes its log
        if not durable or error_code == HANDED_OVER:
            self._tell_the_readers(audience, finish_reason, error_code)
            return
        # The web process that started it is gone: a reader elsewhere writes its row, with
        # the latencies measured here.
        orphan, stats = not self.webs.alive(audience.home), stream.stats
        end = {
            "finish_reason": finish_reason,
            "error_code": error_code,
            "tokens_generated": stats.tokens_generated,
            "tokens_after_abort": stats.tokens_after_abort,
            "orphan": orphan,
            "figures": summarize(stats.created_at, stats.token_times, time.monotonic())
            if orphan
            else {},
        }
        # Its readers hear of the end once the log has it, with the log's last entry (for a
        # replica): any reader after it, in any web process, finds the whole answer in Redis.
        self.answer_logs.end(
            stream.id,
            stream.chunks() if stream.complete else [],
            end,
            then=lambda: self._tell_the_readers(audience, finish_reason, error_code, end),
        )

    async def _send_chunks(
        self, audience: Audience, durable: bool
    ) -> tuple[str | None, str | None]:
        """Every chunk to the web processes it feeds, until it ends; (finish reason, error code)."""
        stream = audience.stream
        error_code, finish_reason = None, None
        reader = stream.join(audience.sent)
        try:
            async for batch in stream.batches(reader=reader):
                if not batch:
                    continue
                for web in audience.fed:  # its home, and any web process following it
                    self.outboxes[web].add(stream.id, batch)
                    self.outboxes.flush(web)
                audience.sent = reader.position
                audience.streamed = batch[-1].index + batch[-1].tokens
                if durable and not stream.complete:
                    self.answer_logs.spoil(stream.id)  # past its cap: no longer whole
            finish_reason = stream.finish_reason
        except GenerationError as error:
            error_code = error.code
        except StreamCut:
            error_code = "cut"
        finally:
            self.engine.release(stream.id)
            audience.close()
        return finish_reason, error_code

    def _tell_the_readers(
        self,
        audience: Audience,
        finish_reason: str | None,
        error_code: str | None,
        last_entry: dict[str, Any] | None = None,
    ) -> None:
        """Free the generation's audience and queue its end for every web process it fed."""
        stream = audience.stream
        self.generations.ending(stream.id)
        ending = End(
            stream.id,
            finish_reason,
            error_code,
            stream.stats.tokens_generated,
            stream.stats.tokens_after_abort,
            audience.streamed,
            last_entry,
            prompt_figures(stream.stats),
        )
        for web in audience.fed:
            self.tell(web, ending)

    def tell(self, web: str, end: End) -> None:
        """Queue a generation's end for `web` (after the chunks queued before it)."""
        self.outboxes[web].ends.append(end)
        self.outboxes.flush(web)

    def _in_use(self, web: str) -> bool:
        return any(a.home == web for _, a in self.generations.audiences())

    def _delivered(self, web: str, ends: list[End]) -> None:
        for end in ends:
            self.generations.delivered(end.id, web)

    async def _give_up_on(self, web: str) -> None:
        """`web` has read nothing for GIVE_UP_FULL_S (outbox.py): abort what it is home to."""
        for generation_id, audience in self.generations.audiences():
            if audience.home == web and not audience.stream.finished:
                await self.engine.abort(generation_id, AbortReason.CANCELLED)
