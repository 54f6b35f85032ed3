"""The lab's deterministic token generator: a fixed pace, seeded output, and fault hooks.

Same prompt, seed and settings give the same tokens in any process (seeded from a SHA-256 of the
request, not Python's randomized `hash`). It runs as a real producer task, exactly like a model
would, so that its counters prove whether an abort really stopped the work.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from typing import Any

from ..exceptions import EngineBusy, GenerationError, StreamCut
from .base import GenerationRequest, TaskEngine, TokenStream

# Words by the script of the prompt, so a Korean question gets a Korean-looking answer. Every
# list holds multi-byte text, so that no answer is pure ASCII.
VOCABULARY = {
    "ko": ["안녕", "하세요", " 스트리밍", "은", " 사용자", " 경험", "을", " 바꿉니다", ".",
           " 토큰", "이", " 바로", " 도착", "합니다", ",", " 그리고", " 모델", "은", " 멈춥니다"],
    "ja": ["こんにちは", "。", "ストリーミング", "は", "体験", "を", "変え", "ます", "、",
           "トークン", "が", "すぐ", "に", "届き", "最初", "の", "一文字", "から", "読めます"],
    "en": [" Streaming", " changes", " how", " an", " answer", " feels", ".", " The", " first",
           " token", " arrives", " early", ",", " and", " the", " reader", " starts", " now",
           " —", " naïve", " café", " 안녕", " こんにちは", " 🙂", "\n"],
}
MIN_NATURAL_TOKENS = 48  # so a test asking for <= 48 tokens always gets exactly that many
MAX_NATURAL_TOKENS = 400


def _script(text: str) -> str:
    for char in text:
        if "\uac00" <= char <= "\ud7a3":
            return "ko"
        if "\u3040" <= char <= "\u30ff" or "\u4e00" <= char <= "\u9fff":
            return "ja"
    return "en"


def _rng(request: GenerationRequest) -> random.Random:
    key = json.dumps(
        [request.seed, request.temperature, request.top_p, [(m.role, m.content) for m in
                                                           request.messages]],
        ensure_ascii=False,
    )
    return random.Random(hashlib.sha256(key.encode()).digest())


def tokens_for(request: GenerationRequest, answer_tokens: int = 0) -> tuple[list[str], str]:
    """The whole answer for `request` and its finish reason (`stop` or `length`).

    `answer_tokens` fixes the natural length (benchmarks, load tests); 0 draws it from the seed.
    """
    rng = _rng(request)
    last_user = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    words = VOCABULARY[_script(last_user)]
    natural = rng.randint(MIN_NATURAL_TOKENS, MAX_NATURAL_TOKENS)  # drawn either way: same words
    natural = answer_tokens or natural
    # A fault fires after exactly `at` tokens, however long the natural answer would be.
    wanted = natural if request.fault is None else request.fault.at
    count = min(wanted, request.max_tokens)
    tokens = [words[rng.randrange(len(words))] for _ in range(count)]
    return tokens, ("length" if count < natural else "stop")


class DeterministicEngine(TaskEngine):
    """Seeded tokens at `tokens_per_s` after `ttft_s`; 0 tokens/s means as fast as possible."""

    name = "deterministic"
    supports_faults = True
    YIELD_EVERY = 32  # tokens between yields to the loop when unpaced, so others run too

    @classmethod
    def from_settings(cls, settings: Any) -> DeterministicEngine:
        """The lab's pace and lengths from DETERMINISTIC_*, the batch from STREAMING_MAX_*."""
        return cls(
            ttft_s=settings.DETERMINISTIC_TTFT_MS / 1000,
            tokens_per_s=settings.DETERMINISTIC_TPS,
            max_batch=settings.STREAMING_MAX_BATCH,
            max_queue=settings.STREAMING_MAX_QUEUE,
            answer_tokens=settings.DETERMINISTIC_ANSWER_TOKENS,
        )

    def __init__(
        self, *, ttft_s: float, tokens_per_s: float, max_batch: int = 0, max_queue: int = 0,
        answer_tokens: int = 0,
    ) -> None:
        super().__init__()
        self.answer_tokens = answer_tokens  # 0: each answer's length comes from its seed
        self.ttft_s = ttft_s
        self.interval_s = 1.0 / tokens_per_s if tokens_per_s > 0 else 0.0
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._slots = asyncio.Semaphore(max_batch) if max_batch else None
        self._waiting = 0

    @property
    def model(self) -> str:
        """Named after its pace, so the log tells runs apart."""
        return f"deterministic-{self.ttft_s * 1000:g}ms-{self.tokens_per_s:g}tps"

    @property
    def tokens_per_s(self) -> float:
        """The configured pace (0: unpaced)."""
        return 1.0 / self.interval_s if self.interval_s else 0.0

    @property
    def queue_depth(self) -> int:
        """Generations waiting for one of the `max_batch` slots."""
        return self._waiting

    @property
    def free_slots(self) -> int | None:
        """Batch plus queue room left; None when the batch is unbounded."""
        if self._slots is None:
            return None
        running = self.max_batch - self._slots._value
        return max(0, self.max_batch + self.max_queue - running - self._waiting)

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start the producer task; refuse when both the batch and its queue are full."""
        if self._slots is not None and self._slots.locked() and self._waiting >= self.max_queue:
            raise EngineBusy(f"{self.max_batch} generations running and {self._waiting} waiting.")
        stream = TokenStream(request)
        return self._start(stream, self._run(stream))

    async def _run(self, stream: TokenStream) -> None:
        if self._slots is None:
            await self._produce(stream)
            return
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            await self._produce(stream)
        finally:
            self._slots.release()

    async def _produce(self, stream: TokenStream) -> None:
        request = stream.request
        tokens, finish_reason = tokens_for(request, self.answer_tokens)
        loop = asyncio.get_running_loop()
        start = loop.time() + self.ttft_s
        for index, token in enumerate(tokens):
            if self.interval_s or self.ttft_s:
                delay = start + index * self.interval_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif index % self.YIELD_EVERY == self.YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if not stream.has_room:
                await stream.wait_for_room()
            stream.push(token)
        fault = request.fault
        if fault is None:
            stream.finish(finish_reason)  # type: ignore[arg-type]
        elif fault.kind == "cut":
            stream.finish(error=StreamCut())
        elif fault.kind == "stall":
            await asyncio.Event().wait()  # until aborted: the stream stays open and silent
        else:
            stream.finish(error=GenerationError(fault.code or "engine_error"))
