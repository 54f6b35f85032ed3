"""The model worker: `manage.py runworker model-worker` runs generations for web processes.

The messages it takes and sends, and why one `chunks` message carries every new token for one
web process, are in streaming/fleet/protocol.py; a generation's life here is in docs/fleet.md;
how its chunks and end go out to the web processes that read it, in fleet/delivery.py.
A worker serves the models WORKER_MODELS names (fleet/model_workers.py): one consumer, channel
and engine per model, in one process; it makes an answer only for the model it serves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from bisect import bisect_right
from typing import Any

from channels.consumer import AsyncConsumer, get_handler_name
from channels.layers import get_channel_layer

from streaming.core import config
from streaming.core.abort import AbortReason
from streaming.core.chunk_log import Chunk
from streaming.core.exceptions import StreamingError, WorkerUnavailable
from streaming.core.request import GenerationRequest
from streaming.engines.base import Engine
from streaming.engines.startup import freeze_loaded
from streaming.fleet import answer_log, protocol, stopping, store
from streaming.fleet.audience import Audience, WorkerGenerations
from streaming.fleet.delivery import Delivery
from streaming.fleet.outbox import RETRY_FULL_S
from streaming.fleet.protocol import HANDED_OVER, HEARTBEATS_GROUP, WORKERS_GROUP, End
from streaming.fleet.webs import Webs

logger = logging.getLogger(__name__)

STOP_S = 5.0  # stopping: how long the last ends may take to reach the web processes


class WorkerCannotStart(Exception):
    """The worker's engine failed to start: the process must leave (runworker's ModelWorker)."""


class ModelWorkerConsumer(AsyncConsumer):
    """A thin adapter between channel-layer messages and one engine."""

    def __init__(
        self,
        engine: Engine,
        answer_logs: answer_log.AnswerLog | None = None,
        *,
        signals: bool = True,
    ) -> None:
        """`engine`: its model's, in this process (the deployment's, not started yet);
        `answer_logs`: where durable answers are logged (None: Redis; a test gives its own);
        `signals`: whether it stops on its own signals (not one of several, which
        `model_workers` stops together)."""
        super().__init__()
        self.config = config.current()  # this process's settings, as they were at its start
        self.channel_layer = get_channel_layer()
        self.channel_name = ""  # opened by `start`
        self.signals = signals
        self.engine = engine  # loaded by `start`
        # One record per generation, from `generate` until its end reached its home.
        self.records = WorkerGenerations()
        # Silent for WORKER_TIMEOUT_S, a web process is gone, and its readers.
        self.webs = Webs(self.config.fleet.timeout_s)
        # The one choice of where answers are logged: the client is made on first use, so a
        # worker without durable answers never needs Redis for them.
        self.answer_logs = answer_logs or answer_log.RedisLog(
            store.redis, retained_max=self.config.retention.retained_max
        )
        self.tasks: set[asyncio.Task[Any]] = set()
        self.delivery = Delivery(
            self.channel_layer,
            self.engine,
            generations=self.records,
            webs=self.webs,
            answer_logs=self.answer_logs,
            spawn=self._spawn,
        )
        self.outboxes = self.delivery.outboxes  # what each web process has not been sent yet
        self.shutting_down = False
        self.pings_seen = 0  # the last of our own pings to come back (`_heartbeats`)

    async def __call__(self, scope, receive, send):
        """Start, then take messages from both channels (`_listen`, by type: `dispatch`)."""
        # Channels has no start-up hook (a worker announces itself before any message comes),
        # and super().__call__ would open a second channel and end at the first failed receive.
        self.scope, self.base_send = scope, send  # as AsyncConsumer's, for its `send`
        await self.start()
        own = functools.partial(self.channel_layer.receive, self.channel_name)
        await asyncio.gather(self._listen(receive), self._listen(own))

    async def start(self) -> None:
        """Open our channel, load the engine (WorkerCannotStart if it fails), start heartbeats."""
        self.channel_name = await self.channel_layer.new_channel("model-worker.")
        self.outboxes.sender = self.channel_name  # every message names its worker
        if self.signals:
            stopping.on_signals(self.stop)  # before the engine's start, which may take minutes
        try:
            self.engine.preflight()
            await self.engine.start()
        except Exception as error:
            # A worker without its engine would sit on its channel answering nobody.
            raise WorkerCannotStart("the model worker's engine failed to start") from error
        freeze_loaded()
        logger.info(
            "model worker %s ready: %s (%s)", self.channel_name, self.engine.name, self.engine.model
        )
        self._spawn(self._heartbeats())

    @property
    def audiences(self) -> dict[str, Audience]:
        """Each generation's audience, until its end is on its way."""
        return dict(self.records.audiences())

    @property
    def generations(self) -> dict[str, Audience]:
        """The generations still being made (their ends may not have been sent yet)."""
        return {gid: a for gid, a in self.records.audiences() if not a.stream.finished}

    def _running(self, generation_id: str) -> Audience | None:
        """The generation, if it is ours and still being made."""
        audience = self.records.audience(generation_id)
        return audience if audience is not None and not audience.stream.finished else None

    async def stop(self, signum: int = signal.SIGTERM) -> None:
        """SIGTERM: take no new work, let what runs finish within WORKER_DRAIN_S, hand the rest
        over to other workers through their web processes (Ctrl-C: at once); once those ends
        are delivered, the engine stops."""
        self.shutting_down = True  # heartbeats say "not ready": no new work comes
        if signum == signal.SIGTERM:
            logger.info(
                "model worker stopping: draining %d generation(s) for %gs",
                len(self.generations),
                self.config.fleet.drain_s,
            )
            await stopping.until(lambda: not self.generations, self.config.fleet.drain_s)
        logger.info("model worker stopping: handing over %d generation(s)", len(self.generations))
        await asyncio.gather(
            *(
                self.engine.abort(generation_id, HANDED_OVER)
                for generation_id in list(self.generations)
            ),
            return_exceptions=True,
        )
        await stopping.until(lambda: not self.audiences and self.outboxes.idle, STOP_S)
        await asyncio.to_thread(self.engine.close)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """AsyncConsumer's dispatch without its database cleanup (a thread hop per message):
        a model worker never touches the database. Handlers take the typed message."""
        typed = protocol.decode(message)
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise protocol.ProtocolError(f"a {typed.type} message is for a web process")
        await handler(typed)

    async def _listen(self, receive) -> None:
        """Dispatch each message; a failed receive (Redis away) is retried, not the end."""
        while True:
            try:
                message = await receive()
            except Exception as error:
                logger.warning("receiving failed (%s); retrying", error)
                await asyncio.sleep(RETRY_FULL_S * 10)
                continue
            try:
                await self.dispatch(message)
            except protocol.ProtocolError as error:
                logger.warning("dropped a message: %s", error)
            except Exception:
                logger.exception("handling %s failed", message.get("type"))

    def _spawn(self, coroutine) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # --- handlers (one per message type) --------------------------------------------------

    async def generate(self, message: protocol.Generate) -> None:
        """Start a generation (or go on with one handed over: `carried`); its tokens go to
        `reply_to`, its home."""
        web, request = message.reply_to, message.request
        self.webs.heard(web)
        record = self.records.arrived(request.id, web)
        try:
            if self.shutting_down:
                # Sent before our last heartbeat said "not ready": let another worker take it.
                self.delivery.tell(web, End(request.id, None, HANDED_OVER, 0, 0, 0))
                return
            self._check_model(request)
            self.engine.check_request(request)
            stream = self.engine.generate(request)
        except StreamingError as error:
            self.delivery.tell(web, End(request.id, None, error.code, 0, 0, 0))
            return
        durable = message.log  # how a durable answer is kept (None: not durable)
        audience = record.audience = Audience(
            stream,
            web,
            grace_s=durable["grace_s"] if durable else 0.0,
            background=bool(durable and durable.get("background")),
        )
        if request.continuation is not None:
            # What the worker before us made: logged for followers, but its home has it.
            stream.carry_over(
                request.continuation.tokens, [Chunk(*item) for item in message.carried]
            )
            audience.sent, audience.streamed = stream.end, request.continuation.tokens
        # Kept whole here, up to its cap, for web processes that follow it later, or to send
        # again what was lost on the way.
        stream.max_log_bytes = (
            durable["max_bytes"] if durable else self.config.retention.resume_max_bytes
        )
        if durable is not None:
            first = {
                "request": protocol.request_message(request),
                **durable["meta"],
                "worker": self.channel_name,
            }
            self.answer_logs.start(request.id, first, retention_s=durable["retention_s"])
        self._spawn(self.delivery.pump(audience))

    def _check_model(self, request: GenerationRequest) -> None:
        """Refuse an answer of a model we do not serve (a web process's mistake, or another
        release's): it must never run on ours."""
        ours = self.engine.served_as or ""
        if request.model != ours:
            logger.error(
                "refused %s, an answer of %r: this worker serves %r",
                request.id,
                request.model,
                ours,
            )
            raise WorkerUnavailable(f"This worker serves {ours!r}, not {request.model!r}.")

    async def abort(self, message: protocol.Abort) -> None:
        """Stop a generation, if it is ours (aborts are broadcast to every worker);
        `handed_over`: it goes on elsewhere, so it ends here without an end for anyone."""
        audience = self._running(message.id)
        if audience is not None:
            audience.stream.count_unread(message.unread)  # made, never read: wasted
            code = HANDED_OVER if message.handed_over else AbortReason.CANCELLED
            await self.engine.abort(message.id, code)

    async def follow(self, message: protocol.Follow) -> None:
        """A web process reads a generation of ours from now on (a replica): send it every
        chunk from token `after` on, then each new one as its home gets it, then the end."""
        web, generation_id, after = message.channel, message.id, message.after
        self.webs.heard(web)
        audience = self.records.audience(generation_id)
        outbox = self.outboxes[web]
        if audience is None:
            state = "logged"  # ended, and its log is in Redis: read it there
        elif not audience.stream.complete:
            state = "gone"  # past its cap: no longer whole
        else:
            chunks = [
                c for c in audience.stream.chunks(audience.sent) if c.index + c.tokens > after
            ]
            if chunks and chunks[0].index < after:
                state = "gone"  # it has a part of that chunk only: its text would have a seam
            else:
                state = "live"
                outbox.add(generation_id, chunks)
                audience.follow(web)
        outbox.followed.append([generation_id, state])
        self.outboxes.flush(web)

    async def attach(self, message: protocol.Attach) -> None:
        """A web process has a reader of a generation again (or a first one), if it is ours."""
        audience = self.records.audience(message.id)
        if audience is not None:
            self.webs.heard(message.channel)
            audience.attach(message.channel)

    async def detach(self, message: protocol.Detach) -> None:
        """A web process has no reader of a generation left."""
        audience = self.records.audience(message.id)
        if message.leaving:
            self.webs.left(message.channel)
        if audience is None or not audience.detach(message.channel):
            return
        if message.leaving:
            if not audience.stream.finished:
                # With no grace period its last readers were ended by a shutdown, and say so.
                code = (
                    AbortReason.CLIENT_DISCONNECTED
                    if audience.grace_s > 0
                    else AbortReason.SERVER_SHUTDOWN
                )
                audience.after_grace(
                    self._spawn,
                    functools.partial(self._nobody_reads, code=code),
                    audience.stream.stats.tokens_generated,
                )
        else:
            # The last to leave says how much came, unread, since its last reader left.
            await self._nobody_reads(message.id, message.unread)

    async def _nobody_reads(
        self, generation_id: str, unread: int, code: AbortReason = AbortReason.CLIENT_DISCONNECTED
    ) -> None:
        """No web process reads it any more: abort, counting the `unread` tokens made since
        the last reader left as wasted."""
        audience = self._running(generation_id)
        if audience is None or audience.reading or audience.background:
            return
        audience.stream.count_unread(unread)
        await self.engine.abort(generation_id, code)

    async def web_heartbeat(self, message: protocol.WebHeartbeat) -> None:
        """A web process is alive."""
        self.webs.heard(message.channel)

    async def worker_ping(self, message: protocol.WorkerPing) -> None:
        """Our own ping came back: we can receive, so we may say we are ready."""
        self.pings_seen = max(self.pings_seen, message.seq)

    async def query(self, message: protocol.Query) -> None:
        """Report a live generation's counters, if it is ours."""
        audience = self._running(message.id)
        if audience is not None:
            stream = audience.stream
            await self.channel_layer.send(
                message.reply_to,
                protocol.State(
                    stream.id,
                    stream.stats.tokens_generated,
                    stream.stats.tokens_after_abort,
                    stream.finished,
                    self.channel_name,
                ).encode(),
            )

    # --- presence --------------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        # A heartbeat claims "send me work", so it must prove we can receive: with pub/sub a
        # publish can succeed while our subscription is still down (e.g. just after Redis
        # restarted), and work sent then would be lost. Each beat pings our own channel; we
        # say we are ready only while the previous ping came back.
        seq = 0
        while True:
            try:
                await self.channel_layer.group_add(WORKERS_GROUP, self.channel_name)
                seq += 1
                await self.channel_layer.send(self.channel_name, protocol.WorkerPing(seq).encode())
                if seq == 1:  # no previous ping: wait for this one (a round trip, not a beat)
                    await stopping.until(
                        lambda: self.pings_seen >= 1, self.config.fleet.heartbeat_s
                    )
                receiving = self.pings_seen >= max(seq - 1, 1)
                heartbeat = protocol.WorkerHeartbeat(
                    worker=self.channel_name,
                    free=self.engine.free_slots,
                    ready=self.engine.ready and receiving and not self.shutting_down,
                    engine=self.engine.name,
                    model=self.engine.model,
                    totals=self.engine.totals(),
                    ids=self.records.ids(),
                    description=self.engine.describe(),
                    capabilities=self.engine.capabilities.as_json(),
                )
                await self.channel_layer.group_send(HEARTBEATS_GROUP, heartbeat.encode())
                cut_off = not receiving
            except Exception as error:
                logger.warning("heartbeat failed: %s", error)
                self.pings_seen = 0  # a ping from before the outage proves nothing after it
                cut_off = True
            if cut_off:
                self.webs.deaf()
            await self._abort_for_silent_webs()
            await asyncio.sleep(self.config.fleet.heartbeat_s)

    async def _abort_for_silent_webs(self) -> None:
        """A web process that has gone silent has no readers left: a generation nobody else
        reads is aborted (after its grace period, for a reader to come back elsewhere)."""
        silent_since = time.monotonic() - self.config.fleet.timeout_s
        for generation_id, audience in list(self.generations.items()):
            for web in [w for w in audience.reading if not self.webs.alive(w)]:
                logger.warning("%s is silent: it reads %s no more", web, generation_id)
                audience.fed.discard(web)
                if audience.detach(web):
                    # Its readers left at the latest when it was last heard of.
                    heard = self.webs.heard_at.get(web, silent_since)
                    left_at = bisect_right(audience.stream.stats.token_times, heard)
                    audience.after_grace(self._spawn, self._nobody_reads, left_at)
        self.webs.forget_silent({web for _, a in self.records.audiences() for web in a.reading})
