"""The table of request fields (streaming/core/fields.py): each dialect accepts each field by
the name the table gives it, and checks it as the table says."""

from __future__ import annotations

import json

import pytest

from streaming.core.exceptions import BadRequest, UnsupportedParameter
from streaming.core.fields import BY_NAME, FIELDS, NAMES, accepted, asked, parse_asked
from streaming.core.request import Fault
from streaming.engines.models import MODELS
from streaming.fleet import request_codec
from streaming.http import openai_api, responses_body, validation


@pytest.mark.parametrize(
    ("dialect", "keys"),
    [
        ("native", validation.BODY_KEYS),
        ("chat", openai_api.SUPPORTED),
        ("responses", responses_body.SUPPORTED),
    ],
)
def test_each_dialect_accepts_the_fields_the_table_gives_it(dialect, keys):
    assert accepted(dialect) <= keys
    assert not {field.name for field in FIELDS if field.asked_as(dialect) is None} & keys


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("temperature", 3, "`temperature` must be in [0, 2]; got 3."),
        ("top_p", 0, "`top_p` must be in (0, 1]; got 0."),
        ("top_p", "1", "`top_p` must be a number."),
        ("seed", -1, "`seed` must be between 0 and 9223372036854775807; got -1."),
        ("seed", 1.5, "`seed` must be an integer."),
        ("frequency_penalty", 3, "`frequency_penalty` must be in [-2, 2]; got 3."),
        ("presence_penalty", -2.5, "`presence_penalty` must be in [-2, 2]; got -2.5."),
        ("repetition_penalty", 0, "`repetition_penalty` must be in [0.01, 100]; got 0."),
        # Past what a float32 score survives: it failed the batch of every answer (issue 52).
        ("repetition_penalty", 1e-300, "`repetition_penalty` must be in [0.01, 100]; got 1e-300."),
        ("repetition_penalty", 1e300, "`repetition_penalty` must be in [0.01, 100]; got 1e+300."),
        ("max_tokens", 0, "`max_tokens` must be between 1 and 64; got 0."),
        ("max_tokens", 65, "`max_tokens` must be between 1 and 64; got 65."),
        ("max_tokens", 5.0, "`max_tokens` must be an integer."),
        ("stop", ["a"] * 5, "`stop` may hold at most 4 strings; got 5."),
        ("stop", "", "`stop` must not be empty."),
        ("stop", ["a", 1], "`stop[1]` must be a string."),
        ("stop", 7, "`stop` must be a string or a list of at most 4 strings."),
        ("fault", {"at": 1}, "`fault` needs exactly one of `code` or `kind`."),
        ("fault", {"at": -1, "kind": "cut"}, "`fault.at` must be between 0 and 1000000; got -1."),
        ("fault", {"at": 1, "kind": "slow"}, "`fault.kind` must be one of stall, cut."),
        ("fault", [1], "`fault` must be an object with `at` and `code` or `kind`."),
    ],
)
def test_a_field_out_of_its_bounds_is_refused_by_name(name, value, message):
    with pytest.raises(BadRequest) as refused:
        BY_NAME[name].parse(value, high=64)  # `high`: max_tokens' only (a setting)
    assert str(refused.value) == message


def test_a_bound_left_to_parse_time_must_be_given():
    with pytest.raises(TypeError):
        BY_NAME["max_tokens"].parse(5)
    assert BY_NAME["max_tokens"].parse(5, high=64) == 5


@pytest.mark.parametrize(
    ("dialect", "names"),
    [
        ("native", {"max_tokens": "max_tokens", "stop": "stop", "fault": "fault"}),
        ("chat", {"max_tokens": "max_completion_tokens", "stop": "stop", "fault": "fault"}),
        ("responses", {"max_tokens": "max_output_tokens", "fault": "fault"}),  # no `stop` there
    ],
)
def test_each_dialect_names_the_length_stop_and_fault_its_own_way(dialect, names):
    assert {field: NAMES[dialect].get(field) for field in names} == names
    assert "stop" in NAMES[dialect] or "stop" not in names


@pytest.mark.parametrize(
    ("dialect", "name"),
    [
        ("native", "max_tokens"),
        ("chat", "max_completion_tokens"),
        ("responses", "max_output_tokens"),
    ],
)
def test_the_length_is_named_in_its_error_as_the_dialect_names_it(dialect, name):
    with pytest.raises(BadRequest) as refused:
        parse_asked({"max_tokens": 0}, dialect, {"max_tokens": 64})
    assert str(refused.value) == f"`{name}` must be between 1 and 64; got 0."


def test_chat_completions_keeps_naming_the_length_max_tokens_in_its_errors():
    engine = MODELS.get().default.engine
    for sent in ("max_tokens", "max_completion_tokens"):
        body = json.dumps(
            {"model": engine.model, "messages": [{"role": "user", "content": "hi"}], sent: 0}
        ).encode()
        with pytest.raises(BadRequest, match=r"^`max_tokens` must be between 1 and "):
            openai_api.parse_chat_body(body, engine)


def test_stop_and_fault_are_checked_into_what_the_request_holds():
    assert BY_NAME["stop"].parse("\n") == ("\n",)
    assert BY_NAME["stop"].parse([]) == ()
    assert BY_NAME["fault"].parse({"at": 2, "kind": "cut"}) == Fault(at=2, kind="cut")
    assert BY_NAME["fault"].parse({"at": 0, "code": "timeout"}) == Fault(0, "timeout", "error")
    assert parse_asked({"stop": None, "fault": None}, "native") == {}


def test_an_engine_refuses_a_field_by_its_own_message_or_as_not_honoured():
    hook = BY_NAME["fault"].refused("transformers")
    assert type(hook) is BadRequest
    assert str(hook) == "`fault` is a test hook of the deterministic engine, not of transformers."
    penalty = BY_NAME["frequency_penalty"].refused("transformers", ": why")
    assert isinstance(penalty, UnsupportedParameter) and penalty.param == "frequency_penalty"
    assert str(penalty) == "`frequency_penalty`: the transformers engine does not honour it: why."


def test_only_the_fields_added_after_the_fleet_message_was_fixed_are_sent_only_when_set():
    assert request_codec.OPTIONAL == {"frequency_penalty", "presence_penalty", "repetition_penalty"}


def test_unset_stays_unset_and_only_what_the_dialect_names_is_asked():
    assert BY_NAME["temperature"].parse(None) is None
    assert asked({"temperature": 0.5, "top_k": 3}, "chat") == {"temperature": 0.5}


def test_a_penalty_at_the_value_that_changes_nothing_is_unset_and_needs_no_engine():
    assert BY_NAME["frequency_penalty"].parse(0) is None
    assert BY_NAME["repetition_penalty"].parse(1) is None
    assert BY_NAME["presence_penalty"].parse(1) == 1.0
    assert asked({"frequency_penalty": 0.5}, "responses") == {}  # OpenAI's Responses has none


def test_docs_api_md_gives_each_native_field_its_type_from_the_table():
    from tests.support.live import ROOT

    reference = (ROOT / "docs" / "api.md").read_text()
    body = reference[reference.index("### Request body") :]
    rows = [line for line in body[: body.index("\n### ", 1)].splitlines() if line.startswith("| `")]
    for field in FIELDS:
        if field.native is None:
            continue
        row = next((r for r in rows if f"`{field.native}`" in r.split("|")[1]), None)
        assert row is not None, f"docs/api.md's request body lacks `{field.native}`"
        if field.kind is not None:
            kind = {int: "integer", float: "number"}[field.kind]
            assert row.split("|")[2].strip() == kind, row
