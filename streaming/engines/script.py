"""The lab's seeded script: the deterministic engine's answer to a request, as pure data.

Same prompt, seed and settings give the same tokens in any process (seeded from a SHA-256 of the
request, not Python's randomized `hash`). The lab (streaming/tools/lab.py) computes what a
server must send with it; the engine (deterministic.py) paces it out.
"""

from __future__ import annotations

import hashlib
import json
import random

from streaming.core.request import GenerationRequest, Sampling

# Words by the script of the prompt, so a Korean question gets a Korean-looking answer. Every
# list holds multi-byte text, so that no answer is pure ASCII.
VOCABULARY = {
    "ko": [
        "안녕",
        "하세요",
        " 스트리밍",
        "은",
        " 사용자",
        " 경험",
        "을",
        " 바꿉니다",
        ".",
        " 토큰",
        "이",
        " 바로",
        " 도착",
        "합니다",
        ",",
        " 그리고",
        " 모델",
        "은",
        " 멈춥니다",
    ],
    "ja": [
        "こんにちは",
        "。",
        "ストリーミング",
        "は",
        "体験",
        "を",
        "変え",
        "ます",
        "、",
        "トークン",
        "が",
        "すぐ",
        "に",
        "届き",
        "最初",
        "の",
        "一文字",
        "から",
        "読めます",
    ],
    "en": [
        " Streaming",
        " changes",
        " how",
        " an",
        " answer",
        " feels",
        ".",
        " The",
        " first",
        " token",
        " arrives",
        " early",
        ",",
        " and",
        " the",
        " reader",
        " starts",
        " now",
        " —",
        " naïve",
        " café",
        " 안녕",
        " こんにちは",
        " 🙂",
        "\n",
    ],
}
MIN_NATURAL_TOKENS = 48  # so a test asking for <= 48 tokens always gets exactly that many
MAX_NATURAL_TOKENS = 400
# What unset temperature and top_p mean here: the 1.0 the seed was always drawn with, so the
# same request gives the same words whether it sends them or not.
SAMPLING = Sampling()


def _script(text: str) -> str:
    for char in text:
        if "\uac00" <= char <= "\ud7a3":
            return "ko"
        if "\u3040" <= char <= "\u30ff" or "\u4e00" <= char <= "\u9fff":
            return "ja"
    return "en"


def _rng(request: GenerationRequest) -> random.Random:
    sampling = SAMPLING.for_request(request)
    key = json.dumps(
        [
            request.seed,
            sampling.temperature,
            sampling.top_p,
            [(m.role, m.content) for m in request.messages],
        ],
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
