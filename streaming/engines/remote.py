"""A remote OpenAI-compatible upstream (vLLM, TGI, llama.cpp's server) as an engine.

Each generation is one streamed `POST {base}/chat/completions`, read by a producer task into
the generation's TokenStream. Aborting closes that response, which closes its connection: the
upstream sees the disconnect and drops the sequence from its batch (how vLLM and TGI abort).
The upstream's answer to the request is awaited before our 200 (`TokenStream.accepted`), so a
dead or refusing upstream is still an HTTP error; after that, failures are error events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..exceptions import (
    BadRequest,
    BodyTooLarge,
    EngineBusy,
    EngineUnavailable,
    GenerationError,
    StreamingError,
)
from ..openai_format import our_code
from ..sse import EventParser
from .base import GenerationRequest, TaskEngine, TokenStream

logger = logging.getLogger(__name__)


class RemoteEngine(TaskEngine):
    """Streams from an OpenAI-compatible `/v1` base URL; one pooled httpx client per process."""

    name = "openai"
    HEALTH_TIMEOUT_S = 5.0  # /models must answer within this for /readyz
    ERROR_BODY_LIMIT = 64 * 1024  # bytes of an upstream error body we read for its message
    ATTEMPTS = 2  # sends of one request when the connection breaks before any answer
    # Idle pooled connections are dropped before the upstream's own keep-alive timeout (5 s in
    # uvicorn, so vLLM, and in llama.cpp's server), so that we rarely reuse a closing one.
    KEEPALIVE_EXPIRY_S = 2.0

    def __init__(
        self, *, base_url: str, model: str, api_key: str = "",
        connect_timeout_s: float = 5.0, read_timeout_s: float | None = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__()
        if not base_url or not model:
            raise ValueError("the openai engine needs STREAMING_REMOTE_URL and "
                             "STREAMING_REMOTE_MODEL")
        self.base_url = base_url.rstrip("/")
        self.remote_model = model
        self.api_key = api_key
        # Connecting is quick or broken: fail fast. Reading waits for a model that may think
        # for a long time between tokens (prompt processing); our own heartbeat keeps the
        # client's connection alive meanwhile, so the read limit only catches a dead upstream.
        self.timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s,
                                     write=connect_timeout_s, pool=connect_timeout_s)
        self.transport = transport  # None: real sockets; tests may pass httpx.MockTransport
        self._client: httpx.AsyncClient | None = None

    @property
    def model(self) -> str:
        """The upstream's model name, as `/v1/models` shows it."""
        return self.remote_model

    @property
    def client(self) -> httpx.AsyncClient:
        """The pooled client (made on first use, on the serving loop)."""
        if self._client is None:
            headers = {"Accept": "text/event-stream"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            # No cap on connections: each stream holds one for its whole life (HTTP/1.1), and
            # a cap would queue streams out of sight; our own limits bound how many there are.
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=128,
                                  keepalive_expiry=self.KEEPALIVE_EXPIRY_S)
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=headers, timeout=self.timeout, limits=limits,
                transport=self.transport,
            )
        return self._client

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start the upstream request; readers wait in `accepted()` for its answer."""
        stream = TokenStream(request)
        stream.defer_acceptance()
        # Abort cancels this task, which leaves `client.stream()`'s block: that closes the
        # response and, since it is unfinished, its connection (how vLLM and TGI see an abort).
        return self._start(stream, self._run(stream))

    async def check_health(self) -> None:
        """The upstream answers `GET /models` and lists our model."""
        try:
            response = await self.client.get("/models", timeout=self.HEALTH_TIMEOUT_S)
        except httpx.HTTPError as error:
            raise EngineUnavailable(f"The upstream {self.base_url} is unreachable: "
                                    f"{_describe(error)}") from None
        if response.status_code != 200:
            raise EngineUnavailable(f"The upstream answered /models with "
                                    f"{response.status_code}.")
        try:
            served = [card.get("id") for card in response.json().get("data", [])]
        except (ValueError, AttributeError):
            raise EngineUnavailable("The upstream's /models is not OpenAI's shape.") from None
        if self.remote_model not in served:
            raise EngineUnavailable(f"The upstream does not serve {self.remote_model!r} "
                                    f"(it serves {', '.join(map(str, served))}).")

    def body_of(self, request: GenerationRequest) -> dict[str, Any]:
        """The upstream request: our validated parameters, streamed, with usage at the end."""
        body: dict[str, Any] = {
            "model": self.remote_model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    async def _run(self, stream: TokenStream) -> None:
        accepted = False
        body = self.body_of(stream.request)
        try:
            for attempt in range(self.ATTEMPTS):
                try:
                    async with self.client.stream("POST", "/chat/completions", json=body) as reply:
                        if reply.status_code != 200:
                            stream.accept(await self._refusal(reply))
                            return
                        accepted = True
                        stream.accept()
                        await self._relay(stream, reply)
                        return
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # Before any answer this is a pooled connection that the upstream closed
                    # as we reused it (its keep-alive ran out): it never read the request.
                    if accepted or attempt == self.ATTEMPTS - 1:
                        raise
        except StreamingError as error:
            stream.finish(error=error)
        except httpx.HTTPError as error:
            if accepted:
                stream.finish(error=_stream_error(error))
            else:
                stream.accept(EngineUnavailable(
                    f"The upstream {self.base_url} is unavailable: {_describe(error)}"))
        except Exception as error:
            logger.exception("remote engine: generation %s failed", stream.id)
            if accepted:
                stream.finish(error=GenerationError("engine_error"))
            else:
                stream.accept(EngineUnavailable(f"The upstream request failed: {error!r}"))

    async def _relay(self, stream: TokenStream, response: httpx.Response) -> None:
        """Push each chunk's text as it arrives; one chunk with content counts as one token."""
        parser = EventParser()
        finish_reason = "stop"
        usage: dict[str, Any] | None = None
        chunks = response.aiter_bytes()
        async for data in chunks:
            for event in parser.feed(data):
                if event.data == "[DONE]":
                    if usage:
                        stream.prompt_tokens = usage.get("prompt_tokens")
                        stream.recount(usage.get("completion_tokens") or 0)
                    stream.finish("length" if finish_reason == "length" else "stop")
                    await _drain(chunks)  # so that the connection goes back to the pool
                    return
                try:
                    payload = json.loads(event.data)
                except ValueError:
                    raise GenerationError("engine_error", "The upstream sent a frame that is "
                                                          "not JSON.") from None
                error = payload.get("error")
                if error:
                    message = error.get("message") if isinstance(error, dict) else str(error)
                    raise GenerationError(our_code(error), message or None)
                for choice in payload.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        if not stream.has_room:
                            await stream.wait_for_room()  # the reader is slow: so is reading
                        stream.push(content)
                    finish_reason = choice.get("finish_reason") or finish_reason
                usage = payload.get("usage") or usage
        raise GenerationError("worker_unavailable", "The upstream ended the stream before "
                                                    "[DONE].")

    async def _refusal(self, response: httpx.Response) -> StreamingError:
        """An upstream's non-200 as the error our client gets before its stream."""
        body = b""
        async for part in response.aiter_bytes():
            body += part
            if len(body) > self.ERROR_BODY_LIMIT:
                break
        message = _message_of(body) or f"The upstream answered {response.status_code}."
        status = response.status_code
        if status in (400, 422):  # 422: TGI's validation errors
            return BadRequest(message)
        if status == 413:
            return BodyTooLarge(message)
        if status == 429:
            return EngineBusy(message, retry_after_s=_retry_after(response))
        logger.warning("remote engine: upstream answered %s: %s", status, message)
        return EngineUnavailable(f"The upstream answered {status}: {message}")


def _message_of(body: bytes) -> str:
    """The message of an upstream error body: OpenAI's, TGI's (`"error": str`) or the text."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:500]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")
    if isinstance(error, str):
        return error
    return str(payload)[:500]


def _retry_after(response: httpx.Response) -> int:
    try:
        return max(1, int(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1


def _stream_error(error: httpx.HTTPError) -> GenerationError:
    """A transport failure after the 200, as the code our client receives."""
    if isinstance(error, httpx.TimeoutException):
        return GenerationError("timeout", f"The upstream sent nothing for too long "
                                          f"({_describe(error)}).")
    return GenerationError("worker_unavailable", f"The upstream connection broke: "
                                                 f"{_describe(error)}.")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


DRAIN_S = 1.0  # seconds we wait for the body's end after `[DONE]` before closing instead


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left after `[DONE]` (only the body's end); a close is fine if it fails."""
    try:
        async with asyncio.timeout(DRAIN_S):
            async for _ in chunks:
                pass
    except (httpx.HTTPError, TimeoutError):
        pass
