"""The web↔worker protocol of the fleet (REDIS_URL): channel and group names, one type per message
(a request in it as fleet/request_codec.py has it). Web processes (fleet/engine.py,
fleet/replica.py) and model workers (fleet/worker.py) speak it over the channel layer (Redis,
msgpack): each message is `encode()`d in one place and `decode()`d by its `type`, then handed to the
handler of that name.

One `chunks` message carries every new token for one web process: the message rate follows
decode steps and web processes, not streams (a Redis round trip per token would cap a fleet at
about a thousand tokens per second). So its `items` stay compact lists, one per chunk, never a
record each.

`log` (None, or {grace_s, retention_s, max_bytes, background, meta}): the answer is read through
its stream URL, so the worker keeps it whole (up to `max_bytes`) for any web process that
follows it, and writes its log (fleet/answer_log.py): where it runs, then, at its end, all of
it, where any web process reads it for `retention_s`. A generation is aborted when no web
process reads it: the one that sent `generate` reads it from the start; each detaches when its
last reader has left (after its own grace period), or when it shuts down or falls silent for
WORKER_TIMEOUT_S (then after `grace_s`, for its readers to come back through another one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from streaming.core.abort import AbortReason
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.request import GenerationRequest
from streaming.core.stream import FinishReason, TokenStream
from streaming.core.stream_stats import StreamStats
from streaming.fleet.request_codec import request_from_message, request_message

WORKER_CHANNEL = "model-worker"  # `manage.py runworker model-worker`
WORKERS_GROUP = "model-workers"  # every worker's own channel joins it
HEARTBEATS_GROUP = "model-worker-heartbeats"  # every web process's reply channel joins it

# Carried in every message as `v`. A message without it comes from a release before it (a
# rolling restart): version 1. A receiver drops a newer one rather than misread it.
VERSION = 1


class ProtocolError(Exception):
    """A message this process cannot read: its receiver logs and drops it."""


class UnknownMessage(ProtocolError):
    """A message of a type this release does not know."""


class NewerMessage(ProtocolError):
    """A message of a newer version of the protocol than this release speaks."""


class MalformedMessage(ProtocolError):
    """A message of a known type without the fields it needs."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """What every message is: a `type`, encoded as a flat dict with the protocol's version."""

    type: ClassVar[str]

    def encode(self) -> dict[str, Any]:
        """The message as the channel layer carries it (plain dicts, lists and scalars)."""
        return {
            "type": self.type,
            "v": VERSION,
            **{name: getattr(self, name) for name in self.__slots__},
        }

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Self:
        """The inverse of `encode` (a field missing from an older message takes its default)."""
        return cls(**{name: message[name] for name in cls.__slots__ if name in message})


# --- web → a worker's own channel ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Generate(Envelope):
    """Make this answer (or go on with one handed over), its tokens to `reply_to`."""

    type: ClassVar[str] = "generate"
    request: GenerationRequest
    reply_to: str
    log: dict[str, Any] | None = None  # Sharing.keep's options (above); None: no durable log
    # A handover's chunks so far (chunk_log.as_list; request.continuation says how far).
    carried: list[list[Any]] = field(default_factory=list)

    def encode(self) -> dict[str, Any]:
        """The request as `request_message` has it."""
        message = {
            "type": self.type,
            "v": VERSION,
            "request": request_message(self.request),
            "reply_to": self.reply_to,
            "log": self.log,
        }
        if self.carried:
            message["carried"] = self.carried
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Self:
        """The request as `request_from_message` reads it."""
        return cls(
            request_from_message(message["request"]),
            message["reply_to"],
            message.get("log"),
            message.get("carried") or [],
        )


@dataclass(frozen=True, slots=True)
class Follow(Envelope):
    """A replica of it here: send me its chunks from token `after`, then the rest, its end."""

    type: ClassVar[str] = "follow"
    id: str
    channel: str
    after: int = 0


# --- web → a worker's own channel, or every worker (group "model-workers") ----------------


@dataclass(frozen=True, slots=True)
class Abort(Envelope):
    """Stop it, if it is yours; `unread`: made before the abort, never read (wasted);
    `handed_over`: it goes on elsewhere, end it without an end for anyone."""

    type: ClassVar[str] = "abort"
    id: str
    unread: int = 0
    handed_over: bool = False


@dataclass(frozen=True, slots=True)
class Query(Envelope):
    """Its counters, to `reply_to`, if it is yours (answered with `state`)."""

    type: ClassVar[str] = "query"
    id: str
    reply_to: str


@dataclass(frozen=True, slots=True)
class Attach(Envelope):
    """A reader of it here (again)."""

    type: ClassVar[str] = "attach"
    id: str
    channel: str


@dataclass(frozen=True, slots=True)
class Detach(Envelope):
    """No reader of it here; `unread` tokens came since the last left; `leaving`: shutting
    down, its readers may come back elsewhere."""

    type: ClassVar[str] = "detach"
    id: str
    channel: str
    unread: int = 0
    leaving: bool = False


@dataclass(frozen=True, slots=True)
class WebHeartbeat(Envelope):
    """This web process lives (every WORKER_HEARTBEAT_S)."""

    type: ClassVar[str] = "web.heartbeat"
    channel: str


# --- a process to itself: proof that its channel receives ---------------------------------


@dataclass(frozen=True, slots=True)
class WebPing(Envelope):
    """A web process's ping of its own reply channel (fleet/presence.py)."""

    type: ClassVar[str] = "web.ping"
    seq: int


@dataclass(frozen=True, slots=True)
class WorkerPing(Envelope):
    """A worker's ping of its own channel: it says it is ready only while these come back."""

    type: ClassVar[str] = "worker.ping"
    seq: int


# --- worker → web ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class End:
    """An answer's end in a `chunks` message; on the wire a list, in the order of the fields."""

    id: str
    finish_reason: FinishReason | None
    error_code: str | None
    tokens_generated: int
    tokens_after_abort: int
    streamed: int  # the id of the next chunk its worker would have sent: a lost tail shows
    logged: dict[str, Any] | None = None  # its log's last (`e`) entry, for a replica
    # [prompt_tokens, cached_tokens] where its engine knows them (None: it knows neither)
    prompt: list[int | None] | None = None

    def encode(self) -> list[Any]:
        """[id, finish_reason, error_code, tokens_generated, tokens_after_abort, streamed
        (, logged (, prompt))]."""
        item = [
            self.id,
            self.finish_reason,
            self.error_code,
            self.tokens_generated,
            self.tokens_after_abort,
            self.streamed,
        ]
        if self.logged is not None or self.prompt is not None:
            item.append(self.logged)
        if self.prompt is not None:
            item.append(self.prompt)
        return item

    @classmethod
    def decode(cls, item: list[Any]) -> Self:
        """The inverse of `encode`."""
        return cls(*item)


@dataclass(frozen=True, slots=True)
class Chunks(Envelope):
    """Every new token of every answer `worker` makes for one web process, then their ends."""

    type: ClassVar[str] = "chunks"
    worker: str
    items: list[list[Any]]  # [id, index, text, tokens(, kind)] per chunk, a kind only if not TEXT
    ends: list[End] = field(default_factory=list)
    # [id, live | logged | gone]: answers to `follow`, after the chunks they hand over.
    followed: list[list[str]] = field(default_factory=list)

    def encode(self) -> dict[str, Any]:
        """Items as they are; ends as lists; `followed` only when there is one."""
        message = {
            "type": self.type,
            "v": VERSION,
            "worker": self.worker,
            "items": self.items,
            "ends": [end.encode() for end in self.ends],
        }
        if self.followed:
            message["followed"] = self.followed
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Self:
        """Items left as lists: this runs for every batch of tokens."""
        return cls(
            message.get("worker", ""),
            message["items"],
            [End.decode(end) for end in message["ends"]],
            message.get("followed") or [],
        )


@dataclass(frozen=True, slots=True)
class State(Envelope):
    """A running answer's counters, in answer to `query`."""

    type: ClassVar[str] = "state"
    id: str
    tokens_generated: int
    tokens_after_abort: int
    finished: bool
    worker: str


# --- worker → every web process (group "model-worker-heartbeats") --------------------------


@dataclass(frozen=True, slots=True)
class WorkerHeartbeat(Envelope):
    """A worker lives: its room, whether it takes work, its counters, the ids it knows, its
    engine's defaults (Engine.describe(), for GET /api/engine) and capabilities (as_json; {}
    from a worker of a release before them)."""

    type: ClassVar[str] = "worker.heartbeat"
    worker: str
    free: int | None
    ready: bool
    engine: str
    model: str
    totals: dict[str, Any]
    ids: list[str] = field(default_factory=list)
    description: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, bool] = field(default_factory=dict)


MESSAGES: dict[str, type[Envelope]] = {
    kind.type: kind
    for kind in (
        Generate,
        Follow,
        Abort,
        Query,
        Attach,
        Detach,
        WebHeartbeat,
        WebPing,
        WorkerPing,
        Chunks,
        State,
        WorkerHeartbeat,
    )
}


def decode(message: dict[str, Any]) -> Envelope:
    """The typed message, by its `type`; a ProtocolError when this release cannot read it."""
    kind = MESSAGES.get(message.get("type"))  # type: ignore[arg-type]
    if kind is None:
        raise UnknownMessage(f"a message of unknown type {message.get('type')!r}")
    if message.get("v", 1) > VERSION:
        raise NewerMessage(
            f"a {kind.type} message of version {message['v']} (this release speaks {VERSION})"
        )
    try:
        return kind.decode(message)
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedMessage(f"a {kind.type} message without what it needs: {error!r}") from None


def prompt_figures(stats: StreamStats) -> list[int | None] | None:
    """An `End`'s `prompt`: what the worker's engine knows of the prompt (None: nothing)."""
    if stats.prompt_tokens is None and stats.cached_tokens is None:
        return None
    return [stats.prompt_tokens, stats.cached_tokens]


# An `ends` item's code for an answer that goes on on another worker (the worker stopping, or
# taking no new work): never a reader's, the web process hands it over (fleet/handover.py).
HANDED_OVER = AbortReason.HANDED_OVER

# The codes an abort ends a stream with (client_disconnected: the worker's, nobody reading).
ABORT_CODES = tuple(reason for reason in AbortReason if reason is not HANDED_OVER)


def end_as_the_worker_did(
    stream: TokenStream, finish_reason: FinishReason | None, error_code: str | None
) -> None:
    """End a web process's copy of a stream the way its worker said (an `ends` item, or an
    answer log's last entry)."""
    if error_code in ABORT_CODES:
        # Aborted at the worker (a Stop that reached another process, or nobody reading):
        # aborted all the same, for whoever reads it here.
        stream.mark_aborted()
    if error_code == "cut":
        stream.finish(error=StreamCut())
    elif error_code:
        stream.finish(error=GenerationError(error_code))
    else:
        stream.finish(finish_reason)
