"""The fields of a request in one table: each one's checks, the name under which each dialect
accepts it, and the capability an engine needs to honour it. The dialects' parsers
(http/validation.py, openai_api.py, responses_body.py), Engine.check_request and the fleet's
request message (fleet/request_codec.py) derive from it: adding a field is one entry here."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from streaming.core.exceptions import STREAM_ERROR_MESSAGES, BadRequest, UnsupportedParameter
from streaming.core.request import Fault

Dialect = Literal["native", "chat", "responses"]  # /api/…, /v1/chat/completions, /v1/responses
MAX_SEED = 2**63 - 1
FAULT_KINDS = ("stall", "cut")
MAX_STOP_STRINGS = 4  # OpenAI's limit
MAX_STOP_CHARS = 256  # characters in one stop string
NOT_HONOURED = "`{field}`: the {engine} engine does not honour it{note}."


@dataclass(frozen=True, slots=True)
class Field:
    """One field of GenerationRequest (`name`): unset is None, and each engine decides."""

    name: str
    kind: type[int] | type[float] | None = None  # a bounded number; None: `check` checks it
    low: float = 0.0
    high: float | None = None  # None: given at parse time (a setting, which http/ reads)
    open_low: bool = False  # `low` itself is out of range
    native: str | None = None  # its name in each dialect; None: that dialect refuses it
    chat: str | None = None
    responses: str | None = None
    capability: str | None = None  # the Capabilities flag an engine needs to honour it
    neutral: float | None = None  # the value that changes nothing: taken as unset
    # A field of another shape: (value, its name as asked) to the value checked, or BadRequest.
    check: Callable[[Any, str], Any] | None = None
    # An engine without `capability` refuses it with this message ({engine}: its name), a plain
    # BadRequest; None: UnsupportedParameter's, naming the field as OpenAI's `param`.
    refusal: str | None = None
    late: bool = False  # added after the fleet's message format was fixed: sent only when set

    def asked_as(self, dialect: Dialect) -> str | None:
        """Its name in `dialect`, or None where that dialect does not accept it."""
        return getattr(self, dialect)

    def parse(self, value: Any, asked_as: str | None = None, high: float | None = None) -> Any:
        """`value` checked (None stays None), or BadRequest naming it as the asker did; `high`:
        the upper bound where the table leaves it to parse time (ignored elsewhere)."""
        if value is None:
            return None
        name = asked_as or self.name
        if self.check is not None:
            return self.check(value, name)
        top = high if self.high is None else self.high
        if top is None:  # a caller's mistake, not the asker's
            raise TypeError(f"{self.name}: its upper bound is given at parse time")
        if self.kind is int:
            return integer(name, value, int(self.low), int(top))
        number = number_in(name, value, self.low, top, open_low=self.open_low)
        return None if number == self.neutral else number

    def refused(self, engine: str, note: str = "") -> BadRequest:
        """What an engine without `capability` answers a request that sets it."""
        if self.refusal is not None:
            return BadRequest(self.refusal.format(engine=engine))
        return UnsupportedParameter(
            self.name, NOT_HONOURED.format(field=self.name, engine=engine, note=note)
        )


def integer(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an integer in [low, high], or BadRequest."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"`{name}` must be an integer.")
    if not low <= value <= high:
        raise BadRequest(f"`{name}` must be between {low} and {high}; got {shown(value)}.")
    return value


def number_in(name: str, value: Any, low: float, high: float, *, open_low: bool = False) -> float:
    """`value` as a finite number in [low, high] (`open_low`: (low, high]), or BadRequest."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"`{name}` must be a number.")
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float: out of range, like any other
        number = math.inf
    too_low = number <= low if open_low else number < low
    if not math.isfinite(number) or too_low or number > high:
        bracket = "(" if open_low else "["
        upper = f"{high:g}]" if math.isfinite(high) else "∞)"
        raise BadRequest(f"`{name}` must be in {bracket}{low:g}, {upper}; got {shown(value)}.")
    return number


def shown(value: int | float) -> str:
    """A number as an error message quotes it: a huge one by its size, not its digits."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return str(value)


def parse_stop(raw: Any, name: str = "stop") -> tuple[str, ...]:
    """`stop`: a string or a list of non-empty strings; null or `[]` means none."""
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise BadRequest(
            f"`{name}` must be a string or a list of at most {MAX_STOP_STRINGS} strings."
        )
    if len(items) > MAX_STOP_STRINGS:
        raise BadRequest(f"`{name}` may hold at most {MAX_STOP_STRINGS} strings; got {len(items)}.")
    for position, item in enumerate(items):
        where = name if isinstance(raw, str) else f"{name}[{position}]"
        if not isinstance(item, str):
            raise BadRequest(f"`{where}` must be a string.")
        if not item:
            raise BadRequest(f"`{where}` must not be empty.")
        if len(item) > MAX_STOP_CHARS:
            raise BadRequest(f"`{where}` is {len(item)} characters; the limit is {MAX_STOP_CHARS}.")
    return tuple(items)


def parse_fault(raw: Any, name: str = "fault") -> Fault:
    """The deterministic engine's test hook (docs/api.md, "The deterministic engine")."""
    if not isinstance(raw, dict) or set(raw) - {"at", "code", "kind"}:
        raise BadRequest(f"`{name}` must be an object with `at` and `code` or `kind`.")
    at = integer(f"{name}.at", raw.get("at"), 0, 1_000_000)
    code, kind = raw.get("code"), raw.get("kind")
    if (code is None) == (kind is None):
        raise BadRequest(f"`{name}` needs exactly one of `code` or `kind`.")
    if code is not None:
        if code not in STREAM_ERROR_MESSAGES:
            codes = ", ".join(STREAM_ERROR_MESSAGES)
            raise BadRequest(f"`{name}.code` must be one of {codes}.")
        return Fault(at=at, code=code, kind="error")
    if kind not in FAULT_KINDS:
        raise BadRequest(f"`{name}.kind` must be one of {', '.join(FAULT_KINDS)}.")
    return Fault(at=at, kind=kind)


def _everywhere(name: str) -> dict[str, str]:
    return {"native": name, "chat": name, "responses": name}


def _not_responses(name: str) -> dict[str, str]:
    return {"native": name, "chat": name}


# In the order their errors come: a body wrong in two fields hears of the first. OpenAI's
# Responses API has no penalties nor `stop` (openai.types.responses.response_create_params), so
# /v1/responses refuses them as it refuses any field it does not know.
FIELDS: tuple[Field, ...] = (
    # Chat completions also takes the legacy `max_tokens` (openai_api.parse_chat_body).
    Field(
        "max_tokens",
        int,
        1,
        native="max_tokens",
        chat="max_completion_tokens",
        responses="max_output_tokens",
    ),
    Field("temperature", float, 0.0, 2.0, **_everywhere("temperature")),
    Field("top_p", float, 0.0, 1.0, open_low=True, **_everywhere("top_p")),
    Field("seed", int, 0, MAX_SEED, **_everywhere("seed")),
    Field(
        "frequency_penalty",
        float,
        -2.0,
        2.0,
        **_not_responses("frequency_penalty"),
        capability="penalties",
        neutral=0.0,
        late=True,
    ),
    Field(
        "presence_penalty",
        float,
        -2.0,
        2.0,
        **_not_responses("presence_penalty"),
        capability="penalties",
        neutral=0.0,
        late=True,
    ),
    # vLLM's extra parameter: > 0, 1 changes nothing. Bounded so that a score divided or
    # multiplied by it stays a number float32 holds (1e-38 made the packaged model's batch fail).
    Field(
        "repetition_penalty",
        float,
        0.01,
        100.0,
        **_not_responses("repetition_penalty"),
        capability="penalties",
        neutral=1.0,
        late=True,
    ),
    Field(
        "fault",
        check=parse_fault,
        **_everywhere("fault"),
        capability="faults",
        refusal="`fault` is a test hook of the deterministic engine, not of {engine}.",
    ),
    Field("stop", check=parse_stop, **_not_responses("stop")),
)
BY_NAME = {field.name: field for field in FIELDS}
# Per dialect, each accepted field's name there (by GenerationRequest's): computed once, read per
# request.
NAMES: dict[Dialect, dict[str, str]] = {
    dialect: {field.name: name for field in FIELDS if (name := field.asked_as(dialect))}
    for dialect in get_args(Dialect)
}
Naming = dict[str, tuple[Field, str]]  # by GenerationRequest's name: the field, its name asked


def naming(dialect: Dialect, **renamed: str) -> Naming:
    """Every field with the name its errors give it in `dialect` (its own where the dialect
    lacks one: a conversation's setting, say; `renamed`: where a body uses another name)."""
    return {
        field.name: (field, renamed.get(field.name) or field.asked_as(dialect) or field.name)
        for field in FIELDS
    }


NAMED: dict[Dialect, Naming] = {dialect: naming(dialect) for dialect in get_args(Dialect)}


def accepted(dialect: Dialect) -> set[str]:
    """The names under which `dialect` accepts the table's fields."""
    return set(NAMES[dialect].values())


def asked(data: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The table's fields as `data` (a body in `dialect`) sends them, by GenerationRequest's
    names, unchecked (`parse_asked` checks them)."""
    return {field: data[name] for field, name in NAMES[dialect].items() if name in data}


def parse_asked(
    values: dict[str, Any], dialect: Dialect | Naming, highs: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """`asked`'s fields checked, named in errors as `dialect` (or a `naming` of it, computed
    once) names them; `highs`: the upper bounds the table leaves to parse time, by field.
    Unset ones are left out (GenerationRequest's default: for a number None, which each engine
    reads as its own default)."""
    named = NAMED[dialect] if isinstance(dialect, str) else dialect
    checked, highs = {}, highs or {}
    for name, value in values.items():
        entry = named.get(name)
        if entry is None:  # a caller's mistake, not the asker's
            raise TypeError(f"build_request() got an unexpected field {name!r}")
        field, asked_as = entry
        checked_value = field.parse(value, asked_as, highs.get(name))
        if checked_value is not None:
            checked[name] = checked_value
    return checked
