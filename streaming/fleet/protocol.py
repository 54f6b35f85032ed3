"""The web↔worker protocol of the fleet (REDIS_URL): channel and group names, every message's
shape, and a request as a message. Web processes (fleet/engine.py), model workers
(fleet/worker.py) and the relay between web processes (fleet/relay.py) all speak it.

Messages, all over the channel layer (Redis):

    web → worker (its own channel)  generate {request, reply_to}
                                    abort {id, unread}  (unread: wasted before the abort)
    web → group "model-workers"     abort {id}          query {id, reply_to}
                                    web.heartbeat {channel}   (every WORKER_HEARTBEAT_S)
    worker → web (reply_to)         chunks {items: [[id, index, text, tokens], ...],
                                            ends: [[id, finish_reason, error_code,
                                                    tokens_generated, tokens_after_abort]]}
                                    state {id, tokens_generated, tokens_after_abort, finished}
    worker → group "model-worker-heartbeats"   worker.heartbeat {worker, free, ready, ...}

One `chunks` message carries every new token for one web process: the message rate follows
decode steps and web processes, not streams (a Redis round trip per token would cap a fleet at
about a thousand tokens per second).

Messages between web processes' reply channels (delivered by ChannelLayerEngine.route);
`ticket` names one reader elsewhere (an answer may have many, from one process or several):

    reader → keeper   relay.resume  {id, ticket, last_event_id, reply_to}
    keeper → reader   relay.resumed {id, ticket, keeper, error: [code, message, status] | None}
                      relay.frames  {id, ticket, keeper, seq, data}
                      relay.end     {id, ticket, keeper, seq}
    reader → keeper   relay.detach  {id, ticket}   its reader left: one reader fewer
    both ways         relay.alive   {id, ticket}   every WORKER_HEARTBEAT_S while relaying;
                                                   silent for WORKER_TIMEOUT_S: the other
                                                   process is gone
"""

from __future__ import annotations

from typing import Any

from streaming.core.request import Fault, GenerationRequest, Message

WORKER_CHANNEL = "model-worker"  # `manage.py runworker model-worker`
WORKERS_GROUP = "model-workers"  # every worker's own channel joins it
HEARTBEATS_GROUP = "model-worker-heartbeats"  # every web process's reply channel joins it


def request_message(request: GenerationRequest) -> dict[str, Any]:
    """A request as a plain dict for the channel layer (msgpack) and Redis (JSON)."""
    fault = request.fault
    return {
        "id": request.id,
        "messages": [[m.role, m.content] for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "seed": request.seed,
        "fault": None if fault is None else [fault.at, fault.code, fault.kind],
    }


def request_from_message(data: dict[str, Any]) -> GenerationRequest:
    """The inverse of `request_message`."""
    fault = data.get("fault")
    return GenerationRequest(
        id=data["id"],
        messages=tuple(Message(role, content) for role, content in data["messages"]),
        max_tokens=data["max_tokens"],
        temperature=data["temperature"],
        top_p=data["top_p"],
        seed=data["seed"],
        fault=None if fault is None else Fault(at=fault[0], code=fault[1], kind=fault[2]),
    )
