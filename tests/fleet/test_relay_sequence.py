"""The relay's reader side without Redis: a lost message ends the response, never a hole.

Pub/sub loses a message only while a subscription reconnects, which no test here can cause on
demand; the reader's bookkeeping is driven directly instead, through its message handlers.
"""

from __future__ import annotations

from typing import Any

from streaming.fleet.relay import Relay, _Reading


class Engine:
    """What Relay uses of ChannelLayerEngine: a reply channel, handlers, and send()."""

    reply_channel = "web.reader"

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def route(self, handlers: dict[str, Any]) -> None:
        self.handlers.update(handlers)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.sent.append((channel, message))


def frames(seq: int, data: bytes) -> dict[str, Any]:
    return {"type": "relay.frames", "id": "g", "ticket": "t", "keeper": "web.keeper",
            "seq": seq, "data": data}


async def reading(engine: Engine) -> tuple[Relay, Any]:
    relay = Relay(engine, serve=None)  # type: ignore[arg-type]
    state = relay.reading["t"] = _Reading("g", "web.keeper")
    state.answer.set_result(None)  # the keeper accepted
    return relay, relay._frames("t", state)


async def test_frames_in_sequence_pass_through_and_the_end_ends_it():
    engine = Engine()
    _, stream = await reading(engine)
    engine.handlers["relay.frames"](frames(0, b"a"))
    engine.handlers["relay.frames"](frames(1, b"b"))
    engine.handlers["relay.end"]({"type": "relay.end", "id": "g", "ticket": "t",
                                  "keeper": "web.keeper", "seq": 2})
    assert [data async for data in stream] == [b"ab"]
    assert engine.sent == []  # the keeper ended it: nothing to hand back


async def test_a_lost_message_ends_the_response_and_hands_the_stream_back():
    engine = Engine()
    _, stream = await reading(engine)
    engine.handlers["relay.frames"](frames(0, b"a"))
    engine.handlers["relay.frames"](frames(2, b"c"))  # 1 never came
    engine.handlers["relay.frames"](frames(3, b"d"))
    assert [data async for data in stream] == [b"a"]  # ends like a dropped connection
    assert engine.sent == [("web.keeper", {"type": "relay.detach", "id": "g", "ticket": "t"})]
