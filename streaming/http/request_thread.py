"""The sync thread Django gives each ASGI request: not started for nothing, not kept by streams.

Django runs each ASGI request in its own `ThreadSensitiveContext`: the first thread-sensitive
`sync_to_async` call of the request (Django's own `request_started` receivers, an ORM lookup of
an API key or a session) starts a thread for that request alone, and the thread lives until the
response is over. For a page that is a few milliseconds; for a stream it is the whole answer,
so every open stream held an idle thread (docs/bench.md). Nothing synchronous runs while a
stream is sent, so the stream gives the thread back as
soon as the view and the middleware are done (at its first frame); Django's `response.close()`
at the very end starts a short-lived one again, as it would for any response.

Django's own `request_started` receivers are the reason most requests start that thread at all,
and under ASGI they have nothing to do there (`skip_idle_request_started_receivers`).
"""

from __future__ import annotations

from asgiref.sync import SyncToAsync
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_started
from django.db import close_old_connections, connections, reset_queries


def skip_idle_request_started_receivers() -> None:
    """Keep `reset_queries` and `close_old_connections` on `request_started` for WSGI only.

    Under ASGI, Django sends `request_started` from the request's brand-new thread-sensitive
    context: the two receivers run in a thread started for this request alone, which holds no
    connection to close and no query log to reset. Run there, they cost a thread and two hops
    per request and do nothing (`bench/request_thread_bench.py` measures what they cost).
    `request_finished` keeps `close_old_connections`: by then the request's
    thread may hold connections its view opened.
    """
    for receiver in (reset_queries, close_old_connections):
        request_started.disconnect(receiver)
        request_started.connect(receiver, sender=WSGIHandler)


def release_request_thread() -> None:
    """End the current request's sync thread, closing its database connections first.

    Call it from the request's task once no sync work of the request is in flight (the view
    has returned); a later thread-sensitive call of the request gets a fresh thread.
    """
    # asgiref's bookkeeping, not its documented API: should a release rename it, streams keep
    # working and only hold their thread again (tests/http/test_request_thread.py says so).
    current = getattr(SyncToAsync, "thread_sensitive_context", None)
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    context = current.get(None) if current is not None else None
    if context is None or executors is None:
        return
    executor = executors.pop(context, None)
    if executor is None:
        return  # nothing synchronous ran in this request: no thread to give back
    # Connections are per thread: closed in their own thread, or left open until the garbage
    # collector finds them. Queued, then the thread ends; the event loop does not wait.
    executor.submit(connections.close_all)
    executor.shutdown(wait=False)
