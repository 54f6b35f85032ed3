"""An engine's yes or no to a request, for engines that give it after `generate()` returns.

A remote upstream answers our request (200, or a refusal) some time after the stream exists;
its readers wait in `Engine.accepted` for that answer, the last moment a failure can still be an
HTTP status: after the 200 only an event can say so.
"""

from __future__ import annotations

import asyncio

from streaming.core.exceptions import StreamingError
from streaming.core.stream import TokenStream


class Acceptances:
    """One engine's pending and given answers, by generation id, until it releases each."""

    def __init__(self) -> None:
        # None once accepted, or the StreamingError that refused it before any token.
        self._answers: dict[str, asyncio.Future[StreamingError | None]] = {}

    def expect(self, stream: TokenStream) -> None:
        """`stream`'s request awaits the engine's answer: its readers wait until `give`."""
        self._answers[stream.id] = asyncio.get_running_loop().create_future()

    def give(self, stream: TokenStream, refusal: StreamingError | None = None) -> None:
        """The engine took the request, or (with `refusal`) turned it down before any token.

        A refusal is an error with an HTTP status (EngineUnavailable, BadRequest, …), never a
        GenerationError: those are for after the 200. Once given, later answers change nothing.
        """
        answer = self._answers.get(stream.id)
        if answer is not None and not answer.done():
            answer.set_result(refusal)
        if refusal is not None:
            stream.finish(error=refusal)

    def pending(self, stream: TokenStream) -> bool:
        """The engine has not yet said yes or no to `stream`'s request."""
        answer = self._answers.get(stream.id)
        return answer is not None and not answer.done()

    async def wait(self, request_id: str) -> None:
        """Return once the request was taken (or was never awaited); raise its refusal."""
        answer = self._answers.get(request_id)
        if answer is None:
            return
        refusal = await asyncio.shield(answer)
        if refusal is not None:
            raise refusal

    def forget(self, request_id: str) -> None:
        """The engine let the generation go."""
        self._answers.pop(request_id, None)
