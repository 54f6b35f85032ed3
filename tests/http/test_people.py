"""Whose turn a request is in an engine's queue (http/people.py's `in_turn`)."""

from __future__ import annotations

from django.test import RequestFactory

from streaming.http.people import in_turn


def asking(address: str, key: str | None = None):
    request = RequestFactory().get("/", REMOTE_ADDR=address)
    if key is not None:
        request.stream_principal = key  # as authenticate() sets it for an API key
    return request


def test_anonymous_browsers_from_one_address_take_one_turn_whatever_their_cookies():
    # Eight fresh cookies from one address are one person, not eight, against everyone else.
    assert {in_turn(asking("203.0.113.7"), f"anon:cookie{n}") for n in range(8)} == {
        "ip:203.0.113.7"
    }
    # An IPv6 host holds its /64.
    assert in_turn(asking("2001:db8::1"), "anon:a") == "ip:2001:db8::/64"
    assert in_turn(asking("2001:db8::ffff"), "") == "ip:2001:db8::/64"


def test_a_signed_in_owner_or_a_key_is_its_own_person():
    assert in_turn(asking("203.0.113.7"), "user:3") == "user:3"
    assert in_turn(asking("203.0.113.7", key="key:7"), "") == "key:7"
