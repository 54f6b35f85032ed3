"""The web↔worker protocol of the fleet (REDIS_URL): channel and group names, every message's
shape, and a request as a message. Web processes (fleet/engine.py, fleet/replica.py) and model
workers (fleet/worker.py) speak it.

Messages, all over the channel layer (Redis):

    web → worker (its own channel)  generate {request, reply_to, log(, carried)}
                                                    carried: a handover's chunks so far
                                                    (request.continuation says how far)
                                    abort {id, unread(, handed_over)}  (unread: wasted before
                                                    the abort; handed_over: it goes on
                                                    elsewhere, end it without an end)
                                    follow {id, channel, after}   a replica of it here: send
                                                    me its chunks from token `after`, then
                                                    the rest, then its end
    web → group "model-workers"     abort {id}          query {id, reply_to}
                                    attach {id, channel}           a reader of it here (again)
                                    detach {id, channel, unread, leaving}
                                                    no reader of it here; `unread` tokens came
                                                    since the last left; `leaving`: shutting
                                                    down, its readers may come back elsewhere
                                    web.heartbeat {channel}   (every WORKER_HEARTBEAT_S)
    worker → web (reply_to, and     chunks {worker, items: [[id, index, text, tokens(, kind)], ...],
      each follower)                        ends: [[id, finish_reason, error_code,
                                                    tokens_generated, tokens_after_abort,
                                                    streamed: the next chunk's id
                                                    (, the log's `e` entry)]],
                                            followed: [[id, live | logged | gone]]}
                                                    (followed: only in answer to `follow`,
                                                    after the chunks it hands over)
                                    state {id, tokens_generated, tokens_after_abort, finished,
                                           worker}
    worker → group "model-worker-heartbeats"   worker.heartbeat {worker, free, ready, ...,
                                                    description}  (its engine's defaults:
                                                    Engine.describe(), for GET /api/engine)

One `chunks` message carries every new token for one web process: the message rate follows
decode steps and web processes, not streams (a Redis round trip per token would cap a fleet at
about a thousand tokens per second).

`log` (None, or {grace_s, retention_s, max_bytes, background, meta}): the answer is read through
its stream URL, so the worker keeps it whole (up to `max_bytes`) for any web process that
follows it, and writes its log to Redis (fleet/answer_log.py): where it runs, then, at its end,
all of it, where any web process reads it for `retention_s`. A generation is aborted when no
web process reads it: the one that sent `generate` reads it from the start; each detaches when
its last reader has left (after its own grace period), or when it shuts down or falls silent
for WORKER_TIMEOUT_S (then after `grace_s`, for its readers to come back through another one).
"""

from __future__ import annotations

from typing import Any

from streaming.core.abort import AbortReason
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.request import Continuation, Fault, GenerationRequest, Message
from streaming.core.stream import FinishReason, TokenStream

WORKER_CHANNEL = "model-worker"  # `manage.py runworker model-worker`
WORKERS_GROUP = "model-workers"  # every worker's own channel joins it
HEARTBEATS_GROUP = "model-worker-heartbeats"  # every web process's reply channel joins it


def request_message(request: GenerationRequest) -> dict[str, Any]:
    """A request as a plain dict for the channel layer (msgpack) and Redis (JSON)."""
    fault = request.fault
    return {
        "id": request.id,
        "messages": [[m.role, m.content, m.extra] if m.extra else [m.role, m.content]
                     for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,  # None (and top_p's): the worker's engine decides
        "top_p": request.top_p,
        "seed": request.seed,
        "fault": None if fault is None else [fault.at, fault.code, fault.kind],
        "stop": list(request.stop),
        "upstream_options": request.upstream_options,
        "continuation": None if request.continuation is None
        else [request.continuation.tokens, request.continuation.text],
    }


# An `ends` item's code for an answer that goes on on another worker (the worker stopping, or
# taking no new work): never a reader's, the web process hands it over (fleet/handover.py).
HANDED_OVER = AbortReason.HANDED_OVER

# The codes an abort ends a stream with (client_disconnected: the worker's, nobody reading).
ABORT_CODES = tuple(reason for reason in AbortReason if reason is not HANDED_OVER)


def end_as_the_worker_did(stream: TokenStream, finish_reason: FinishReason | None,
                          error_code: str | None) -> None:
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


def request_from_message(data: dict[str, Any]) -> GenerationRequest:
    """The inverse of `request_message`."""
    fault, continuation = data.get("fault"), data.get("continuation")
    return GenerationRequest(
        id=data["id"],
        messages=tuple(Message(*turn) for turn in data["messages"]),
        max_tokens=data["max_tokens"],
        temperature=data["temperature"],
        top_p=data["top_p"],
        seed=data["seed"],
        fault=None if fault is None else Fault(at=fault[0], code=fault[1], kind=fault[2]),
        # A message from a web process of the release before `stop` (a rolling restart) has none.
        stop=tuple(data.get("stop") or ()),
        upstream_options=data.get("upstream_options") or "",
        continuation=None if continuation is None else Continuation(*continuation),
    )
