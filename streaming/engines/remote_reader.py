"""An upstream's 200 read into a TokenStream as it arrives: each chunk with content, reasoning or
tool calls is one token (of that kind).

The reader runs inside the connection's reads (upstream.py: no coroutine per chunk), pauses the
connection while the reader of our stream is slow (TCP makes the upstream wait too), and takes
the finish reason and the usage from the last chunks.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from streaming.core import text
from streaming.core.chunk_log import ChunkKind
from streaming.core.exceptions import GenerationError, StreamingError
from streaming.core.stream import TokenStream
from streaming.engines.upstream import UpstreamConnection
from streaming.wire.openai_format import our_code
from streaming.wire.sse import EventParser

DRAIN_S = 1.0  # seconds we wait for the body's end after `[DONE]` before closing instead


class UpstreamReader:
    """The body of a 200, parsed as it arrives: each chunk with content is one token.

    Runs inside the connection's reads (no coroutine per chunk), so it never raises: a failure
    finishes the stream and closes the connection.
    """

    def __init__(self, stream: TokenStream) -> None:
        self.stream = stream
        self.connection: UpstreamConnection | None = None
        self.parser = EventParser()
        self.finish_reason = "stop"
        self.usage: dict[str, Any] | None = None
        self.done = False
        self._waiting_for_room: asyncio.Task[None] | None = None
        self._drain_timer: asyncio.TimerHandle | None = None

    def feed(self, data: bytes) -> None:
        """Body bytes from the upstream."""
        stream = self.stream
        if self.done or stream.finished:
            return
        try:
            for event in self.parser.feed(data):
                if event.data == "[DONE]":
                    self._done()
                    return
                self._event(event.data)
        except StreamingError as error:
            stream.finish(error=error)
            self._close()
            return
        if not stream.has_room and self.connection is not None:
            # The reader is slow: stop reading, and TCP makes the upstream wait too.
            self.connection.pause()
            self._waiting_for_room = asyncio.ensure_future(stream.wait_for_room())
            self._waiting_for_room.add_done_callback(self._room)

    def _event(self, data: str) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            raise GenerationError(
                "engine_error", "The upstream sent a frame that is not JSON."
            ) from None
        if text.may_hold_surrogates(data):  # not text: replaced (core/text.py)
            payload = text.replace_lone_surrogates(payload)
        error = payload.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise GenerationError(our_code(error), message or None)
        for choice in payload.get("choices") or ():
            delta = choice.get("delta") or {}
            # vLLM named the thinking `reasoning_content`, and newer versions `reasoning`.
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                self.stream.push(reasoning, kind=ChunkKind.REASONING)
            if delta.get("tool_calls"):
                self.stream.push(
                    json.dumps(delta["tool_calls"], ensure_ascii=False, separators=(",", ":")),
                    kind=ChunkKind.TOOL_CALLS,
                )
            content = delta.get("content")
            if content and choice.get("logprobs"):  # asked for: kept with the text they belong to
                self.stream.push(
                    json.dumps(
                        [content, choice["logprobs"]], ensure_ascii=False, separators=(",", ":")
                    ),
                    kind=ChunkKind.LOGPROBS,
                )
            elif content:
                self.stream.push(content)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        self.usage = payload.get("usage") or self.usage

    def _done(self) -> None:
        self.done = True
        stream, usage = self.stream, self.usage
        if usage:
            stream.stats.prompt_tokens = usage.get("prompt_tokens")
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            stream.stats.cached_tokens = cached if isinstance(cached, int) else None
            stream.recount(usage.get("completion_tokens") or 0)
        reason = self.finish_reason
        stream.finish(reason if reason in ("length", "tool_calls") else "stop")
        # Only the body's end is left (the connection goes back to the pool with it); a close
        # is fine if it does not come soon.
        self._drain_timer = asyncio.get_running_loop().call_later(DRAIN_S, self._close)

    def _room(self, _: asyncio.Future[None]) -> None:
        self._waiting_for_room = None
        if self.connection is not None:
            self.connection.resume()

    def _close(self) -> None:
        if self.connection is not None:
            self.connection.close()

    def stop(self) -> None:
        """The generation's task is over: nothing of ours may touch the connection after it."""
        if self._waiting_for_room is not None:
            self._waiting_for_room.cancel()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
