"""The sampling fields of a request in one table: each one's checks, the name under which each
dialect accepts it, and the capability an engine needs to honour it. The dialects' parsers
(http/validation.py, openai_api.py, responses_body.py) and Engine.check_request derive from it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from streaming.core.exceptions import BadRequest

Dialect = Literal["native", "chat", "responses"]  # /api/…, /v1/chat/completions, /v1/responses
MAX_SEED = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Field:
    """One field of GenerationRequest (`name`): unset is None, and each engine decides."""

    name: str
    kind: type[int] | type[float]
    low: float
    high: float
    open_low: bool = False  # `low` itself is out of range
    native: str | None = None  # its name in each dialect; None: that dialect refuses it
    chat: str | None = None
    responses: str | None = None
    capability: str | None = None  # the Capabilities flag an engine needs to honour it
    neutral: float | None = None  # the value that changes nothing: taken as unset

    def asked_as(self, dialect: Dialect) -> str | None:
        """Its name in `dialect`, or None where that dialect does not accept it."""
        return getattr(self, dialect)

    def parse(self, value: Any, asked_as: str | None = None) -> int | float | None:
        """`value` checked (None stays None), or BadRequest naming it as the asker did."""
        if value is None:
            return None
        name = asked_as or self.name
        if self.kind is int:
            return integer(name, value, int(self.low), int(self.high))
        number = number_in(name, value, self.low, self.high, open_low=self.open_low)
        return None if number == self.neutral else number


def _everywhere(name: str) -> dict[str, str]:
    return {"native": name, "chat": name, "responses": name}


# OpenAI's Responses API has no penalties (openai.types.responses.response_create_params), so
# /v1/responses refuses them as it refuses any field it does not know.
FIELDS: tuple[Field, ...] = (
    Field("temperature", float, 0.0, 2.0, **_everywhere("temperature")),
    Field("top_p", float, 0.0, 1.0, open_low=True, **_everywhere("top_p")),
    Field("seed", int, 0, MAX_SEED, **_everywhere("seed")),
    Field("frequency_penalty", float, -2.0, 2.0, native="frequency_penalty",
          chat="frequency_penalty", capability="penalties", neutral=0.0),
    Field("presence_penalty", float, -2.0, 2.0, native="presence_penalty",
          chat="presence_penalty", capability="penalties", neutral=0.0),
    # vLLM's extra parameter: > 0, 1 changes nothing.
    Field("repetition_penalty", float, 0.0, math.inf, open_low=True, native="repetition_penalty",
          chat="repetition_penalty", capability="penalties", neutral=1.0),
)
BY_NAME = {field.name: field for field in FIELDS}
# Per dialect, each accepted field's name there (by GenerationRequest's): computed once, read per
# request.
NAMES: dict[Dialect, dict[str, str]] = {
    dialect: {field.name: name for field in FIELDS if (name := field.asked_as(dialect))}
    for dialect in get_args(Dialect)
}


def accepted(dialect: Dialect) -> set[str]:
    """The names under which `dialect` accepts the table's fields."""
    return set(NAMES[dialect].values())


def asked(data: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The table's fields as `data` (a body in `dialect`) sends them, by GenerationRequest's
    names, unchecked (`parse_asked` checks them)."""
    return {field: data[name] for field, name in NAMES[dialect].items() if name in data}


def parse_asked(sampling: dict[str, Any], dialect: Dialect) -> dict[str, int | float]:
    """`asked`'s fields checked, named in errors as `dialect` names them; unset ones left out
    (GenerationRequest's default, None, is what each engine reads as its own default)."""
    names, checked = NAMES[dialect], {}
    for name, value in sampling.items():
        field = BY_NAME.get(name)
        if field is None:  # a caller's mistake, not the asker's
            raise TypeError(f"build_request() got an unexpected field {name!r}")
        checked_value = field.parse(value, names.get(name))
        if checked_value is not None:
            checked[name] = checked_value
    return checked


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
