"""A generation's Stop, shutdown and sharing, without a server: which abort goes where, and why."""

from __future__ import annotations

from streaming.core.abort import AbortReason
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.generations.registry import Generation
from streaming.generations.sharing import ALONE, Alone


class SpyEngine(Engine):
    """Records every abort and its reason."""

    def __init__(self) -> None:
        super().__init__()
        self.aborts: list[tuple[str, AbortReason]] = []

    def generate(self, request: GenerationRequest) -> TokenStream:
        raise AssertionError("not started in these tests")

    async def abort(self, request_id: str, reason: AbortReason) -> None:
        self.aborts.append((request_id, reason))

    async def _stop(self, stream: TokenStream) -> None:
        """Nothing runs."""


class SpySharing(Alone):
    """Shared, and records every Stop it is asked to send everywhere."""

    shared = True

    def __init__(self) -> None:
        self.stopped: list[str] = []

    async def abort_everywhere(self, generation_id: str) -> None:
        self.stopped.append(generation_id)


def streaming(engine: Engine, sharing=ALONE, *, runs_here: bool = True) -> Generation:
    request = GenerationRequest("g1", (Message("user", "x"),), 10)
    generation = Generation(request, engine, sharing, runs_here=runs_here)
    generation.stream = TokenStream(request, engine.counters)
    return generation


async def test_a_stop_here_is_the_engines_abort_as_cancelled():
    engine = SpyEngine()
    await streaming(engine).stop()
    assert engine.aborts == [("g1", AbortReason.CANCELLED)]


async def test_a_replicas_stop_reaches_its_worker_and_no_engine_here():
    engine, sharing = SpyEngine(), SpySharing()
    await streaming(engine, sharing, runs_here=False).stop()
    assert sharing.stopped == ["g1"] and engine.aborts == []


async def test_a_shutdown_is_never_a_stop():
    engine = SpyEngine()
    await streaming(engine).shut_down()
    assert engine.aborts == [("g1", AbortReason.SERVER_SHUTDOWN)]


def test_the_reasons_are_the_wire_codes():
    assert [str(reason) for reason in AbortReason] == [
        "cancelled",
        "client_disconnected",
        "server_shutdown",
        "handed_over",
    ]
