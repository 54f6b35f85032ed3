"""The remote engine in-process: how each upstream answer maps onto our errors, against canned
answers from a socket server of the test's own, since a real upstream cannot be made to send every
kind of failure (our server in front of a real one: test_remote_live.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import ssl

import pytest
import trustme

from streaming.core.exceptions import BadRequest, EngineBusy, EngineUnavailable, GenerationError
from streaming.core.request import GenerationRequest, Message
from streaming.engines.remote import RemoteEngine
from tests.support.live import free_port

REQUEST = GenerationRequest(id="g1", messages=(Message("user", "hi"),), max_tokens=9, seed=1)


def chunk(content: str | None = None, finish: str | None = None, **extra) -> str:
    """One upstream `chat.completion.chunk` frame."""
    delta = {} if content is None else {"content": content}
    payload = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(payload)}\n\n"


# A canned answer: (status, JSON or event-stream text), or None to close without answering.
Answer = tuple[int, object] | None


async def canned_upstream(
    handler, sent: list[dict], tls: ssl.SSLContext | None = None
) -> asyncio.Server:
    """A real socket speaking just enough HTTP/1.1 to play `handler`'s answers back."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = json.loads(await reader.readexactly(length))
                sent.append(request)
                answer = handler(request)
                if answer is None:
                    return  # the pooled connection the upstream had already closed
                status, content = answer
                kind = "text/event-stream" if isinstance(content, str) else "application/json"
                body = (content if isinstance(content, str) else json.dumps(content)).encode()
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)


def run(
    handler,
    *,
    base_url: str | None = None,
    max_buffered: int = 256,
    tls: ssl.SSLContext | None = None,
    request: GenerationRequest | None = None,
) -> tuple[list[dict], TokenStreamResult]:
    """Drive one generation against canned answers; the bodies sent, what the reader saw."""
    sent: list[dict] = []

    async def drive() -> TokenStreamResult:
        server = await canned_upstream(handler, sent, tls)
        port = server.sockets[0].getsockname()[1]
        scheme = "https" if tls else "http"
        engine = RemoteEngine(base_url=base_url or f"{scheme}://127.0.0.1:{port}/v1", model="m")
        stream = engine.generate(request or REQUEST)
        stream.max_buffered = max_buffered  # before any token: its task has not run yet
        texts: list[str] = []
        try:
            await engine.accepted(stream.id)
            async with asyncio.timeout(30):
                async for batch in stream.batches():
                    texts += [c.text for c in batch]
                    await asyncio.sleep(0)  # a reader slower than the upstream
        except Exception as error:
            return TokenStreamResult(texts, stream, error)
        finally:
            engine.close()
            server.close()
        return TokenStreamResult(texts, stream, None)

    result = asyncio.run(drive())
    return sent, result


class TokenStreamResult:
    """What a reader saw."""

    def __init__(self, texts, stream, error) -> None:
        self.texts, self.stream, self.error = texts, stream, error


def sse_reply(*frames: str) -> Answer:
    """A 200 event stream with these frames."""
    return 200, "".join(frames)


def test_chunks_finish_reason_and_usage_are_relayed():
    usage = {
        "prompt_tokens": 7,
        "completion_tokens": 4,
        "total_tokens": 11,
        "prompt_tokens_details": {"cached_tokens": 5},
    }
    sent, result = run(
        lambda request: sse_reply(
            chunk("안"),
            chunk("녕"),
            chunk(""),
            chunk("!"),
            chunk(finish="length"),
            'data: {"choices": [], "usage": ' + json.dumps(usage) + "}\n\n",
            "data: [DONE]\n\n",
        )
    )
    assert result.error is None and result.texts == ["안", "녕", "!"]
    assert result.stream.finish_reason == "length"
    # Three chunks with text, but the upstream counted four tokens: its count wins.
    assert (result.stream.stats.tokens_generated, result.stream.stats.prompt_tokens) == (4, 7)
    assert result.stream.stats.cached_tokens == 5  # the upstream's prompt cache, passed on
    # No temperature or top_p: the request set none, and the upstream has its own defaults.
    assert sent == [
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 9,
            "stream": True,
            "stream_options": {"include_usage": True},
            "seed": 1,
        }
    ]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"message": "too long", "code": "context_length_exceeded"}, "context_length"),
        ({"message": "CUDA error", "type": "server_error", "code": None}, "engine_error"),
        ("plain text error", "engine_error"),
    ],
)
def test_an_error_frame_mid_stream_is_a_generation_error(error, code):
    frame = f"data: {json.dumps({'error': error})}\n\n"
    _, result = run(lambda request: sse_reply(chunk("a"), frame))
    assert result.texts == ["a"]
    assert isinstance(result.error, GenerationError) and result.error.code == code


def test_a_stream_ending_without_done_is_worker_unavailable():
    _, result = run(lambda request: sse_reply(chunk("a"), chunk("b")))
    assert result.texts == ["a", "b"]
    assert isinstance(result.error, GenerationError)
    assert result.error.code == "worker_unavailable"


@pytest.mark.parametrize(
    ("status", "body", "refusal", "message"),
    [
        (
            400,
            {"error": {"message": "bad top_p", "type": "invalid_request_error"}},
            BadRequest,
            "bad top_p",
        ),
        (
            422,
            {"error": "Input validation error", "error_type": "validation"},
            BadRequest,
            "Input validation error",
        ),  # TGI's shape
        (429, {"error": {"message": "slow down"}}, EngineBusy, "slow down"),
        (500, {"error": {"message": "boom"}}, EngineUnavailable, "boom"),
        (404, {"error": {"message": "no model m"}}, EngineUnavailable, "no model m"),
    ],
)
def test_a_refusal_before_the_stream_is_an_http_error(status, body, refusal, message):
    _, result = run(lambda request: (status, body))
    assert type(result.error) is refusal and message in result.error.message
    assert result.stream.finished and result.texts == []


def test_stop_strings_go_to_the_upstream_only_when_there_are_some():
    engine = RemoteEngine(base_url="http://127.0.0.1:9/v1", model="m")
    with_stop = dataclasses.replace(REQUEST, stop=("\n", "終わり"))
    assert engine.body_of(with_stop)["stop"] == ["\n", "終わり"]
    assert "stop" not in engine.body_of(REQUEST)


def test_penalties_reach_the_upstream_by_openai_names_only_when_set():
    penalised = dataclasses.replace(
        REQUEST, frequency_penalty=0.5, presence_penalty=-1.0, repetition_penalty=1.1
    )
    RemoteEngine(base_url="http://127.0.0.1:9/v1", model="m").check_request(penalised)
    sent, result = run(
        lambda request: sse_reply(chunk("a"), chunk(finish="stop"), "data: [DONE]\n\n"),
        request=penalised,
    )
    assert result.error is None
    assert (
        sent[0]["frequency_penalty"],
        sent[0]["presence_penalty"],
        sent[0]["repetition_penalty"],
    ) == (0.5, -1.0, 1.1)
    unset = RemoteEngine(base_url="http://127.0.0.1:9/v1", model="m").body_of(REQUEST)
    assert not {"frequency_penalty", "presence_penalty", "repetition_penalty"} & set(unset)


def test_a_slow_reader_pauses_the_upstream_and_loses_nothing():
    words = [f"w{i} " for i in range(2000)]
    _, result = run(
        lambda request: sse_reply(*map(chunk, words), chunk(finish="stop"), "data: [DONE]\n\n"),
        max_buffered=4,
    )
    assert result.error is None
    assert "".join(result.texts) == "".join(words)
    assert result.stream.stats.tokens_generated == 2000


@pytest.fixture
def upstream_tls(tmp_path, monkeypatch) -> ssl.SSLContext:
    """A certificate for 127.0.0.1 from a throwaway CA, which this process is told to trust."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))  # OpenSSL's default trust
    return context


def test_an_https_upstream_streams_and_one_we_cannot_trust_is_refused(
    upstream_tls, monkeypatch, caplog
):
    answer = sse_reply(chunk("a"), chunk("b", finish="stop"), "data: [DONE]\n\n")
    _, result = run(lambda request: answer, tls=upstream_tls)
    assert result.error is None and result.texts == ["a", "b"]

    monkeypatch.delenv("SSL_CERT_FILE")  # the system's CAs only: ours is unknown there
    _, result = run(lambda request: answer, tls=upstream_tls)
    assert isinstance(result.error, EngineUnavailable)
    # The client hears that the upstream failed; why, and where, is the operator's (the log).
    assert result.error.message == "The upstream is unavailable."
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text


def test_an_unreachable_upstream_is_engine_unavailable():
    _, result = run(lambda request: None, base_url=f"http://127.0.0.1:{free_port()}/v1")
    assert isinstance(result.error, EngineUnavailable)
    assert result.error.http_status == 503


def test_a_connection_closed_before_any_answer_is_sent_once_more():
    def flaky(request: dict) -> Answer:
        if flaky.calls == 0:  # the upstream closed the pooled connection as we reused it
            flaky.calls += 1
            return None
        return sse_reply(chunk("a"), chunk(finish="stop"), "data: [DONE]\n\n")

    flaky.calls = 0
    sent, result = run(flaky)
    assert len(sent) == 2
    assert result.error is None and result.texts == ["a"]
    assert result.stream.finish_reason == "stop"
