"""A stream lets go of its request's sync thread once it starts: no OS thread per open stream.

Django runs each ASGI request in its own `ThreadSensitiveContext`: the first thread-sensitive
`sync_to_async` call of the request (Django's own `request_started` receivers, an ORM lookup of
an API key or a session) starts a thread for that request alone, and the thread lives until the
response is over. For a page that is a few milliseconds; for a stream it is the whole answer,
so 1,000 open streams held 1,000 idle threads (measured: a thread per stream, ~50 KB of memory
each). Nothing synchronous runs while a stream is sent, so the stream gives the thread back as
soon as the view and the middleware are done (at its first frame); Django's `response.close()`
at the very end starts a short-lived one again, as it would for any response.
"""

from __future__ import annotations

from asgiref.sync import SyncToAsync
from django.db import connections


def release_request_thread() -> None:
    """End the current request's sync thread, closing its database connections first.

    Call it from the request's task once no sync work of the request is in flight (the view
    has returned); a later thread-sensitive call of the request gets a fresh thread.
    """
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is None:
        return  # nothing synchronous ran in this request: no thread to give back
    # Connections are per thread: closed in their own thread, or left open until the garbage
    # collector finds them. Queued, then the thread ends; the event loop does not wait.
    executor.submit(connections.close_all)
    executor.shutdown(wait=False)
