"""A model worker's generations going out: each new chunk to every web process that reads it,
then its end (for a durable answer, once its log in Redis has it).

The queue and the one send loop per web process are in fleet/outbox.py; this is what the worker
puts in them (mixed into ModelWorkerConsumer, fleet/worker.py).
"""

from __future__ import annotations

import time
from typing import Any

from streaming.core.abort import AbortReason
from streaming.core.config import Config
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.latency import summarize
from streaming.engines.base import Engine
from streaming.fleet import answer_log
from streaming.fleet.audience import Audience
from streaming.fleet.outbox import Outboxes
from streaming.fleet.protocol import HANDED_OVER, End
from streaming.fleet.webs import Webs


class Delivers:
    """The worker's part in sending what its engine makes (mixed into ModelWorkerConsumer: it
    uses the consumer's records)."""

    config: Config
    engine: Engine
    audiences: dict[str, Audience]
    known: dict[str, str]
    webs: Webs
    answer_logs: answer_log.AnswerLog
    outboxes: Outboxes
    generations: dict[str, Audience]

    async def _pump(self, audience: Audience) -> None:
        stream = audience.stream
        error_code, finish_reason = None, None
        durable = stream.id in self.answer_logs.open
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

        def tell_the_readers(last_entry: dict[str, Any] | None = None) -> None:
            self.audiences.pop(stream.id, None)
            ending = End(
                stream.id,
                finish_reason,
                error_code,
                stream.stats.tokens_generated,
                stream.stats.tokens_after_abort,
                audience.streamed,
                last_entry,
            )
            for web in audience.fed:
                self._tell(web, ending)

        if error_code == HANDED_OVER:
            self.answer_logs.drop(stream.id)  # the worker that goes on with it writes its log
        if not durable or error_code == HANDED_OVER:
            tell_the_readers()
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
            then=lambda: tell_the_readers(end),
        )

    def _tell(self, web: str, end: End) -> None:
        """Queue a generation's end for `web` (after the chunks queued before it)."""
        self.outboxes[web].ends.append(end)
        self.outboxes.flush(web)

    def _in_use(self, web: str) -> bool:
        return any(a.home == web for a in self.audiences.values())

    def _delivered(self, web: str, ends: list[End]) -> None:
        for end in ends:
            if self.known.get(end.id) == web:
                del self.known[end.id]

    async def _give_up_on(self, web: str) -> None:
        """`web` has read nothing for GIVE_UP_FULL_S (outbox.py): abort what it is home to."""
        for generation_id, audience in list(self.generations.items()):
            if audience.home == web:
                await self.engine.abort(generation_id, AbortReason.CANCELLED)
