"""The table of request fields (streaming/core/fields.py): each dialect accepts each field by
the name the table gives it, and checks it as the table says."""

from __future__ import annotations

import pytest

from streaming.core.exceptions import BadRequest
from streaming.core.fields import BY_NAME, FIELDS, accepted, asked
from streaming.http import openai_api, responses_body, validation


@pytest.mark.parametrize(("dialect", "keys"), [
    ("native", validation.BODY_KEYS), ("chat", openai_api.SUPPORTED),
    ("responses", responses_body.SUPPORTED)])
def test_each_dialect_accepts_the_fields_the_table_gives_it(dialect, keys):
    assert accepted(dialect) <= keys
    assert not {field.name for field in FIELDS if field.asked_as(dialect) is None} & keys


@pytest.mark.parametrize(("name", "value", "message"), [
    ("temperature", 3, "`temperature` must be in [0, 2]; got 3."),
    ("top_p", 0, "`top_p` must be in (0, 1]; got 0."),
    ("top_p", "1", "`top_p` must be a number."),
    ("seed", -1, "`seed` must be between 0 and 9223372036854775807; got -1."),
    ("seed", 1.5, "`seed` must be an integer."),
    ("frequency_penalty", 3, "`frequency_penalty` must be in [-2, 2]; got 3."),
    ("presence_penalty", -2.5, "`presence_penalty` must be in [-2, 2]; got -2.5."),
    ("repetition_penalty", 0, "`repetition_penalty` must be in (0, ∞); got 0."),
])
def test_a_field_out_of_its_bounds_is_refused_by_name(name, value, message):
    with pytest.raises(BadRequest) as refused:
        BY_NAME[name].parse(value)
    assert str(refused.value) == message


def test_unset_stays_unset_and_only_what_the_dialect_names_is_asked():
    assert BY_NAME["temperature"].parse(None) is None
    assert asked({"temperature": 0.5, "top_k": 3}, "chat") == {"temperature": 0.5}


def test_a_penalty_at_the_value_that_changes_nothing_is_unset_and_needs_no_engine():
    assert BY_NAME["frequency_penalty"].parse(0) is None
    assert BY_NAME["repetition_penalty"].parse(1) is None
    assert BY_NAME["presence_penalty"].parse(1) == 1.0
    assert asked({"frequency_penalty": 0.5}, "responses") == {}  # OpenAI's Responses has none
