"""The smallest live check: a real server streams a real answer over a real socket."""

from __future__ import annotations

import pytest

from tests.live import RawStream, tokens_of

pytestmark = pytest.mark.live


def test_stream_direct_ends_with_done(asgi_server):
    stream = RawStream(asgi_server.port, "/api/stream", method="POST",
                       body=b'{"prompt": "hello", "max_tokens": 5}')
    events = stream.read_all()
    assert stream.status == 200
    assert len(tokens_of(events)) == 5
    assert events[-1].data == "[DONE]"
