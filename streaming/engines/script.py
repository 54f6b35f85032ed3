"""The lab's seeded script: the deterministic engine's answer to a request, as pure data.

Same prompt, seed and settings give the same tokens in any process (seeded from a SHA-256 of the
request, not Python's randomized `hash`). The lab (streaming/programs/lab.py) computes what a
server must send with it; the engine (deterministic.py) paces it out.
"""

from __future__ import annotations

import hashlib
import json
import random
import re

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
# A question holding a code fence gets an answer in Markdown: prose in the question's script,
# fenced code blocks and formulas, inline and displayed, and dollar amounts that are not math
# (the chat page highlights and renders them: bench/page_bench.py --markdown measures it).
CODE_FENCE = "```"
CODE_BLOCKS = {
    "python": 'def total(prices: list[float]) -> float:\n    """The sum, rounded."""\n'
    "    return round(sum(p * 1.1 for p in prices), 2)  # with tax\n\n"
    'print(total([5, 10]), f"{len(PRICES)} items")\n',
    "javascript": "const stream = new EventSource('/api/stream');\n"
    "stream.addEventListener('message', (event) => {\n"
    "  if (event.data === '[DONE]') return stream.close();\n"
    "  document.body.append(JSON.parse(event.data).token); // as it arrives\n});\n",
    "bash": 'curl -N -X POST "$URL/api/stream" -d \'{"prompt": "hi"}\' | grep -c data\n',
    "sql": "SELECT model, avg(ttft_ms) AS ttft\nFROM generation_log\nWHERE status = 'done'\n"
    "GROUP BY model ORDER BY ttft DESC LIMIT 10;\n",
    "rust": 'fn main() {\n    let tokens: Vec<&str> = vec!["a", "b"];\n'
    '    println!("{} tokens", tokens.len());\n}\n',
}
INLINE_FORMULAS = [
    "$x^2 + y^2 = r^2$",
    "\\(\\alpha_i \\le \\beta\\)",
    "$O(n \\log n)$",
    "$e^{i\\pi} + 1 = 0$",
]
DISPLAY_FORMULAS = [
    "$$\n\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}\n$$",
    "\\[\n\\int_0^1 x^2 \\, dx = \\frac{1}{3}\n\\]",
    "$$\n\\text{TPS} = \\frac{\\text{tokens}}{t_{\\text{last}} - t_{\\text{first}}}\n$$",
]
PRICES = " $5 and $10,"
# A run's scripted tool call: `/call <server>.<tool>` and, on the same line, its JSON arguments.
CALL_LINE = re.compile(r"^/call ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)[ \t]*(\{.*\})?[ \t]*$", re.M)
MIN_NATURAL_TOKENS = 48  # so a test asking for <= 48 tokens always gets exactly that many
MAX_NATURAL_TOKENS = 400
# What unset temperature and top_p mean here: the 1.0 the seed was always drawn with, so the
# same request gives the same words whether it sends them or not.
SAMPLING = Sampling()


def _pieces(text: str) -> list[str]:
    """`text` as tokens: each word with the spaces before it, each line end on its own."""
    return re.findall(r"\n|[^\S\n]*[^\s]+|[^\S\n]+", text)


def _markdown(rng: random.Random, words: list[str], count: int) -> list[str]:
    """`count` tokens of a Markdown answer: paragraphs with inline formulas and prices, fenced
    code blocks, displayed formulas, drawn by `rng` (cut at `count`, as a model's is)."""
    tokens: list[str] = []

    def prose(length: int) -> list[str]:
        return [words[rng.randrange(len(words))].replace("\n", " ") for _ in range(length)]

    while len(tokens) < count:
        kind = rng.randrange(4)
        if kind == 0:  # a paragraph with a formula, sometimes prices
            tokens += prose(rng.randint(6, 20))
            tokens += _pieces(" " + INLINE_FORMULAS[rng.randrange(len(INLINE_FORMULAS))])
            tokens += _pieces(PRICES) if rng.random() < 0.5 else []
            tokens += [*prose(rng.randint(4, 12)), "\n\n"]
        elif kind == 1:  # a code block
            language = rng.choice(sorted(CODE_BLOCKS))
            tokens += [f"{CODE_FENCE}{language}", "\n", *_pieces(CODE_BLOCKS[language])]
            tokens += [CODE_FENCE, "\n\n"]
        elif kind == 2:  # a displayed formula
            tokens += [*_pieces(DISPLAY_FORMULAS[rng.randrange(len(DISPLAY_FORMULAS))]), "\n\n"]
        else:
            tokens += [*prose(rng.randint(10, 30)), "\n\n"]
    return tokens[:count]


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


def scripted_call(request: GenerationRequest) -> str | None:
    """The tool call a run's prompt scripts next, as the JSON of a `tool_calls` delta, or None.

    Where the request offers tools (a run's model call), each line `/call <server>.<tool> {json
    arguments}` of the last question is one call, made one model call after another: the n-th
    call once n-1 tool results follow the question (docs/tools.md, "Without a tool-calling
    model").
    """
    options = json.loads(request.upstream_options) if request.upstream_options else {}
    if not options.get("tools"):
        return None
    asked = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    if asked < 0:
        return None
    calls = CALL_LINE.findall(request.messages[asked].content)
    done = sum(1 for m in request.messages[asked + 1 :] if m.role == "tool")
    if done >= len(calls):
        return None
    server, tool, arguments = calls[done]
    function = {"name": f"{server}__{tool}", "arguments": arguments or "{}"}
    return json.dumps(
        [{"index": 0, "id": f"call_{done + 1}", "type": "function", "function": function}],
        ensure_ascii=False,
    )


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
    if CODE_FENCE in last_user:
        tokens = _markdown(rng, words, count)
    else:
        tokens = [words[rng.randrange(len(words))] for _ in range(count)]
    results = _tool_results(request)
    if results:  # a run's last call: it says what its tools gave, so a test sees it read them
        tokens = (_pieces(results) + tokens)[:count]
    return tokens, ("length" if count < natural else "stop")


def _tool_results(request: GenerationRequest) -> str:
    """The tool results after the last question, each cut at 200 characters, quoted line by
    line."""
    asked = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    said = [m.content[:200] for m in request.messages[asked + 1 :] if m.role == "tool"]
    lines = [line for text in said for line in text.splitlines() or [""]]
    return "".join(f"> {line}\n" for line in lines) + "\n" if said else ""
