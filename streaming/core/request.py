"""A generation request as every engine and API sees it: validated, plain data, no I/O."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]  # tool: only for an upstream

# A prompt's tokens as counted before any tokenizer: a word, a CJK or Hangul character, or a
# punctuation mark (a model's tokenizer splits finer; this is stable and grows with the prompt).
_CJK = "\u3000-\u9fff\uac00-\ud7af"
PROMPT_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")
# An image's tokens before its model counts them: OpenAI's for a 2,048×1,536 one in high detail
# (scaled to 1,024×768: four tiles of 170 and 85), about what a vision model's encoder takes.
IMAGE_TOKENS = 765


@dataclass(frozen=True, slots=True)
class Image:
    """An image of a message, for a model that sees them (`vision = true`): where it stands in
    the message's text, and the image itself, prepared for the model (files/images.py)."""

    at: int  # characters of the message's content before it
    url: str  # a `data:image/…;base64,` URL


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn."""

    role: Role
    content: str
    # JSON of the OpenAI fields besides role and content (`tool_calls`, `tool_call_id`, `name`),
    # kept only for an upstream that acts on them (the `openai` engine).
    extra: str = ""
    images: tuple[Image, ...] = ()  # only for a model with `vision = true` (docs/files.md)


@dataclass(frozen=True, slots=True)
class Fault:
    """The deterministic engine's test hook: what to do after `at` tokens."""

    at: int
    code: str | None = None  # send `event: error` with this code
    kind: Literal["error", "stall", "cut"] = "error"


@dataclass(frozen=True, slots=True)
class Continuation:
    """An answer taken over from a model worker that died or left: what was made before."""

    tokens: int  # tokens already made (and streamed): the next one is token `tokens`
    text: str  # their answer text, which a model prefills after the prompt
    # A run's step events so far, in order (runs/steps.py): it goes on from its last ended call.
    steps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Answered:
    """A run that an earlier answer ended asking the person (the Responses API's approvals): its
    step events, each call's last, in order (runs/steps.py), and the person's answers."""

    steps: tuple[str, ...]
    decisions: tuple[tuple[str, bool], ...]  # (call id, approved)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated request, the same for every engine and API."""

    id: str
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float | None = None  # None: the engine's default (Sampling, below)
    top_p: float | None = None
    seed: int | None = None
    fault: Fault | None = None
    stop: tuple[str, ...] = ()  # the answer ends where one of these first appears, without it
    # JSON of OpenAI parameters only an upstream acts on (`tools`, `tool_choice`, …): the
    # `openai` engine sends them as they came; the local engines never get any.
    upstream_options: str = ""
    continuation: Continuation | None = None  # set only for a handover (fleet/handover.py)
    # OpenAI's penalties and vLLM's `repetition_penalty` (core/fields.py); None: not applied.
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    # Whose turn it is in an engine's queue (engines/scheduler.py): the owner an answer gets, or
    # the asker's principal (`user:3`, `key:7`, `anon:…`, `ip:…`); "": nobody in particular.
    person: str = ""
    priority: int = 0  # higher first, before any person's turn
    # The model that makes it: its name in STREAMING_MODELS' file (engines/models.py's
    # `Model.key`), set at admission; "": the one model of a deployment without the file.
    model: str = ""
    # The MCP servers (their names in the file) it may call: a run (runs/loop.py); (): none.
    mcp_servers: tuple[str, ...] = ()
    # How a run asks the person for a call: `wait` for the decision (the page, the native API),
    # or `end` the answer with the request, which a new one answers (the Responses API's way).
    approval: Literal["wait", "end"] = "wait"
    # Calls the asker wants asked about too, beyond the file's (which it cannot loosen): a
    # server's name (all its tools) or `<server>.<tool>` (the Responses API's `require_approval`).
    ask_first: tuple[str, ...] = ()
    answered: Answered | None = None  # a run going on from one that ended asking

    @property
    def prompt_chars(self) -> int:
        """Characters across all messages (the log's prompt size)."""
        return sum(len(m.content) for m in self.messages)

    @property
    def prompt_tokens(self) -> int:
        """The prompt's tokens as PROMPT_TOKEN counts them, one per message's role and
        IMAGE_TOKENS per image: the deterministic engine's count, and the estimate a budget
        claims before any engine's."""
        return sum(
            len(PROMPT_TOKEN.findall(m.content)) + 1 + IMAGE_TOKENS * len(m.images)
            for m in self.messages
        )


@dataclass(frozen=True, slots=True)
class Sampling:
    """How an engine samples: temperature 0 is greedy, top_p 1 and top_k None cut nothing, and
    the penalties at 1, 0 and 0 change nothing."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    def for_request(self, request: GenerationRequest) -> Sampling:
        """The request's temperature, top_p and penalties where it sets them, these defaults
        elsewhere."""
        return Sampling(
            *(
                default if (asked := getattr(request, name, None)) is None else asked
                for name, default in zip(SAMPLING_FIELDS, dataclasses.astuple(self), strict=True)
            )
        )

    def without_penalties(self) -> Sampling:
        """These defaults with the penalties at the values that change nothing."""
        return dataclasses.replace(self, **NEUTRAL_PENALTIES)

    def penalties(self) -> dict[str, float]:
        """The three penalties by name, as a request to transformers' manager names them."""
        return {name: float(getattr(self, name)) for name in NEUTRAL_PENALTIES}

    def as_json(self) -> dict[str, float | int | None]:
        """As `GET /api/engine` and a worker's heartbeat show it."""
        return dataclasses.asdict(self)


SAMPLING_FIELDS = tuple(field.name for field in dataclasses.fields(Sampling))
# Each penalty at the value that changes nothing.
NEUTRAL_PENALTIES = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
