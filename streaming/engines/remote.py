"""A remote OpenAI-compatible upstream (vLLM, TGI, llama.cpp's server) as an engine.

Each generation is one streamed `POST {base}/chat/completions` on a connection of our own lean
client (upstream.py: with httpx the front spent twice the CPU per token), parsed as it arrives
into the generation's TokenStream. Aborting closes that connection: the upstream
sees the disconnect and drops the sequence from its batch (how vLLM and TGI abort).
The upstream's answer to the request is awaited before our 200 (`Engine.accepted`), so a
dead or refusing upstream is still an HTTP error; after that, failures are error events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from streaming.core import routing as router
from streaming.core.capabilities import Capabilities
from streaming.core.config import Config
from streaming.core.exceptions import (
    BadRequest,
    BodyTooLarge,
    EngineBusy,
    EngineUnavailable,
    GenerationError,
    StreamingError,
)
from streaming.core.fields import FIELDS
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.acceptance import Acceptances
from streaming.engines.base import TaskEngine
from streaming.engines.remote_reader import UpstreamReader
from streaming.engines.replicas import Replica, Replicas
from streaming.engines.upstream import UpstreamConnection, UpstreamError, UpstreamPool
from streaming.engines.upstream_models import ModelList, message_of
from streaming.wire import openai_format
from streaming.wire.origin import Origin

logger = logging.getLogger(__name__)
# The table's fields passed to the upstream as they are; body_of writes `max_tokens` (by the name
# every upstream knows) and `stop` (only when set) itself, and `fault` never goes (not honoured).
PASSED = tuple(
    field for field in FIELDS if field.chat and field.name not in ("max_tokens", "stop", "fault")
)


class RemoteEngine(TaskEngine):
    """Streams from an OpenAI-compatible `/v1` base URL over pooled connections."""

    name = "openai"
    # Tools, tool_choice, reasoning_effort, … reach the upstream; it decides the rest.
    capabilities = Capabilities(upstream_options=True, penalties=True)
    sampling_defaults = None  # unset temperature and top_p are not sent: the upstream's apply
    ERROR_BODY_LIMIT = 64 * 1024  # bytes of an upstream error body we read for its message
    ERROR_BODY_WAIT_S = 5.0  # how long we wait for that body's end before using what came
    ATTEMPTS = 2  # sends of one request when the connection breaks before any answer
    # Idle pooled connections are dropped before the upstream's own keep-alive timeout (5 s in
    # uvicorn, so vLLM, and in llama.cpp's server), so that we rarely reuse a closing one.
    KEEPALIVE_EXPIRY_S = 2.0
    MAX_IDLE = 128  # idle connections kept for reuse

    @classmethod
    def from_config(cls, config: Config) -> RemoteEngine:
        """The upstream STREAMING_REMOTE_* names."""
        remote = config.remote
        try:
            return cls(
                base_url=remote.url,
                model=remote.model,
                api_key=remote.key,
                connect_timeout_s=remote.connect_timeout_s,
                read_timeout_s=remote.read_timeout_s or None,
                routing=router.parse_routing(
                    remote.routing, "STREAMING_REMOTE_ROUTING", settings.SECRET_KEY.encode()
                ),
                urls=remote.urls,
            )
        except ValueError as error:  # a URL that cannot be a base URL
            raise ImproperlyConfigured(f"STREAMING_REMOTE_URL: {error}") from None

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float | None = 300.0,
        routing: router.Routing = router.NO_ROUTING,
        urls: Sequence[str] = (),
    ) -> None:
        super().__init__()
        # Where requests go: `urls` (replicas), else the one `base_url` (ValueError: no URL).
        self.replicas = Replicas(urls or ([base_url] if base_url else []), self._new_pool)
        self.base_url = self.replicas.all[0].base_url  # the one `/models` asks (all the same)
        self.remote_model = model  # "" until the upstream names its one model (preflight, start)
        self.api_key = api_key
        # Connecting is quick or broken: fail fast. Reading waits for a model that may think
        # for a long time between tokens (prompt processing); our own heartbeat keeps the
        # client's connection alive meanwhile, so the read limit only catches a dead upstream.
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.models = ModelList(self.base_url, auth, connect_timeout_s)  # its GET /models
        self._acceptances = Acceptances()  # the upstream's answer to each request
        self.routing = routing  # what a router of replicas is told (core/routing.py)

    @property
    def own_model(self) -> str:
        """The upstream's model name, as `/v1/models` shows it."""
        return self.remote_model

    def _new_pool(self, origin: Origin) -> UpstreamPool:
        """UpstreamConnections to one replica, for the streams."""
        return UpstreamPool(
            origin,
            connect_timeout_s=self.connect_timeout_s,
            keepalive_s=self.KEEPALIVE_EXPIRY_S,
            max_idle=self.MAX_IDLE,
        )

    def close(self) -> None:
        """Stop probing replicas; close idle connections."""
        self.replicas.close()

    def totals(self) -> dict[str, Any]:
        """The counters, and each replica's where there are several (the models page)."""
        totals: dict[str, Any] = super().totals()
        if len(self.replicas) > 1:
            totals["replicas"] = [replica.describe() for replica in self.replicas.all]
        return totals

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start the upstream request; readers wait in `accepted()` for its answer."""
        stream = TokenStream(request, self.counters)
        self._acceptances.expect(stream)
        # Abort cancels this task, which closes its connection (how vLLM and TGI see an abort).
        return self._start(stream, self._run(stream))

    async def accepted(self, request_id: str) -> None:
        """Return once the upstream has answered 200; raise its refusal as our HTTP error."""
        await self._acceptances.wait(request_id)

    async def _stop(self, stream: TokenStream) -> None:
        await super()._stop(stream)
        self._acceptances.give(stream)  # a task cancelled before it ran never answers

    def release(self, request_id: str) -> None:
        """Forget the stream, its task and the upstream's answer."""
        super().release(request_id)
        self._acceptances.forget(request_id)

    def preflight(self) -> None:
        """Without STREAMING_REMOTE_MODEL: ask the upstream now which one model it serves.

        Several (or none) is a configuration error. An upstream that does not answer yet is
        not: `start()` asks again until it does, and /readyz says 503 meanwhile.
        """
        if not self.remote_model and (served := self.models.served_now()) is not None:
            self.remote_model = self.models.only_model(served)

    async def start(self) -> None:
        """Ready at once with STREAMING_REMOTE_MODEL; without it, once the upstream names the
        one model it serves (EngineUnavailable until it answers)."""
        if not self.remote_model:
            self.remote_model = self.models.only_model(await self.models.served())
            logger.info("the upstream %s serves %s", self.base_url, self.remote_model)
        self.replicas.start_probing(lambda replica: self.models.answers(replica.base_url))
        self.ready = True

    async def check_health(self) -> None:
        """The upstream answers `GET /models` and lists our model."""
        served = await self.models.served()
        if self.remote_model not in served:
            raise EngineUnavailable(
                f"The upstream does not serve {self.remote_model!r} "
                f"(it serves {', '.join(served)})."
            )

    def body_of(self, request: GenerationRequest) -> dict[str, Any]:
        """The upstream request: our validated parameters, streamed, with usage at the end."""
        body: dict[str, Any] = {
            "model": self.remote_model,
            "messages": [openai_format.chat_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # Only what the client sent: the upstream knows its model's defaults (vLLM applies the
        # model's generation_config), and a 1.0 of ours would override them.
        body.update(
            (field.chat, value)
            for field in PASSED  # by chat completions' names
            if (value := getattr(request, field.name)) is not None
        )
        if request.stop:
            body["stop"] = list(request.stop)  # the upstream stops at them, and leaves them out
        if request.upstream_options:
            body.update(json.loads(request.upstream_options))  # tools, tool_choice, … as sent
        if self.routing and request.person:  # ours, whatever `user` a client sent
            body["user"] = router.opaque_person(request.person, self.routing.secret)
        if self.routing.body_priority:  # vLLM's order is lower first, ours higher first
            body["priority"] = -request.priority
        return body

    def request_bytes(self, request: GenerationRequest, replica: Replica) -> bytes:
        """The whole HTTP request for one generation, to `replica`."""
        body = json.dumps(self.body_of(request)).encode()
        origin = replica.origin
        auth = f"Authorization: Bearer {self.api_key}\r\n" if self.api_key else ""
        if self.routing:
            auth += router.routing_headers(self.routing, request)
        head = (
            f"POST {origin.prefix}/chat/completions HTTP/1.1\r\n"
            f"Host: {origin.host_header}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{auth}\r\n"
        )
        return head.encode("latin-1") + body

    async def _run(self, stream: TokenStream) -> None:
        reader, acceptances = UpstreamReader(stream), self._acceptances
        reusable, replica = False, None
        try:
            replica, connection = await self.replicas.sent(
                stream.request, lambda to: self._send(stream.request, reader, to)
            )
            if connection.status != 200:
                try:
                    async with asyncio.timeout(self.ERROR_BODY_WAIT_S):
                        await connection.finished()  # the error body, for its message
                    reusable = True
                except (TimeoutError, UpstreamError):
                    pass  # what came of it will do
                acceptances.give(stream, self._refusal(connection))
                return
            acceptances.give(stream)
            await connection.finished()
            if not reader.done:
                raise GenerationError(
                    "worker_unavailable", "The upstream ended the stream before [DONE]."
                )
            reusable = True
        except StreamingError as error:
            stream.finish(error=error)
        except UpstreamError as error:
            if stream.finished:
                pass  # we closed it ourselves: an error frame, or the body's end never came
            else:
                logger.warning("remote engine: generation %s: %s", stream.id, error)
                if acceptances.pending(stream):
                    acceptances.give(stream, EngineUnavailable("The upstream is unavailable."))
                else:
                    code = "timeout" if error.timeout else "worker_unavailable"
                    what = "sent nothing for too long" if error.timeout else "connection broke"
                    stream.finish(error=GenerationError(code, f"The upstream {what}."))
        except Exception:
            logger.exception("remote engine: generation %s failed", stream.id)
            if acceptances.pending(stream):
                acceptances.give(stream, EngineUnavailable("The upstream request failed."))
            else:
                stream.finish(error=GenerationError("engine_error"))
        finally:
            acceptances.give(stream)  # ended unanswered: its readers learn how from it
            reader.stop()
            if replica is not None:
                self.replicas.done(replica)
            if reader.connection is not None:
                if reusable and replica is not None:
                    self.replicas.pool_of(replica).release(reader.connection)
                else:
                    reader.connection.close()  # an abort: the upstream sees the disconnect

    async def _send(
        self, request: GenerationRequest, reader: UpstreamReader, replica: Replica
    ) -> UpstreamConnection:
        """The request sent to `replica` and its head in; sent again on a fresh connection if
        a pooled one turns out closed before any answer."""
        sent = self.request_bytes(request, replica)
        for attempt in range(self.ATTEMPTS):
            connection = reader.connection = await self.replicas.pool_of(replica).acquire()
            connection.send(
                sent,
                read_timeout_s=self.read_timeout_s,
                body_limit=self.ERROR_BODY_LIMIT,
                body_callback=reader.feed,
            )
            try:
                await connection.response()
                return connection
            except UpstreamError as error:
                connection.close()
                # Before any answer this is a pooled connection that the upstream closed as we
                # reused it (its keep-alive ran out): it never read the request.
                if error.answered or attempt == self.ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _refusal(self, response: UpstreamConnection) -> StreamingError:
        """An upstream's non-200 as the error our client gets before its stream."""
        message = message_of(bytes(response.body)) or f"The upstream answered {response.status}."
        status = response.status
        if status in (400, 422):  # 422: TGI's validation errors
            return BadRequest(message)
        if status == 413:
            return BodyTooLarge(message)
        if status == 429:
            return EngineBusy(message, retry_after_s=_retry_after(response))
        logger.warning("remote engine: upstream answered %s: %s", status, message)
        return EngineUnavailable(f"The upstream answered {status}: {message}")


def _retry_after(response: UpstreamConnection) -> int:
    try:
        return max(1, int(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1
