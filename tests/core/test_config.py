"""The settings as typed objects: every setting of the service in exactly one, checked together,
rebuilt when a setting changes."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from django.conf import settings as django_settings

from streaming.core import config
from streaming.core.config import Config, ConfigError
from tests.support.live import ROOT
from tests.test_docs import SETTING

# Read by chatsite/settings.py for Django itself or the servers, not for the service.
NOT_OURS = {
    "DJANGO_DEBUG",
    "DJANGO_SECRET_KEY",
    "DJANGO_ALLOWED_HOSTS",
    "DATABASE_URL",
    "SQLITE_BUSY_TIMEOUT_S",  # DATABASES' OPTIONS
    "FILES_STORAGE",  # STORAGES["files"], Django's to read
    "FILES_STORAGE_OPTIONS",
    "FILES_ROOT",
}


def flat(**changes) -> SimpleNamespace:
    """This process's Django settings as plain attributes, some changed."""
    return SimpleNamespace(
        **{**{name: getattr(django_settings, name) for name in config.setting_names()}, **changes}
    )


def test_every_setting_of_the_service_lands_in_exactly_one_object():
    read = set(SETTING.findall((ROOT / "chatsite" / "settings.py").read_text())) - NOT_OURS
    fields = [
        each.metadata["setting"]
        for kind in config.GROUPS.values()
        for each in dataclasses.fields(kind)
    ]
    assert len(fields) == len(set(fields))  # one field per setting, never two
    assert sorted(read - set(fields)) == []  # the environment's, each with its field
    assert set(config.setting_names()) - read == {"STREAMING_ENGINES"}


def test_the_objects_hold_the_settings_values_by_concept():
    built = Config.from_settings(
        flat(STREAM_MAX_PROMPT_CHARS=7, WORKER_TIMEOUT_S=9.5, DETERMINISTIC_TPS=3.0)
    )
    assert (
        built.limits.max_prompt_chars,
        built.fleet.timeout_s,
        built.deterministic.tokens_per_s,
    ) == (7, 9.5, 3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.limits.max_prompt_chars = 8  # type: ignore[misc]


def test_the_upstreams_key_never_shows_in_a_repr():
    built = Config.from_settings(flat(STREAMING_REMOTE_KEY="sk-secret"))
    assert built.remote.key == "sk-secret"
    assert "sk-secret" not in repr(built)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"STREAM_DEFAULT_MAX_TOKENS": 300, "STREAM_MAX_TOKENS_LIMIT": 200},
            "STREAM_DEFAULT_MAX_TOKENS (300) must not exceed STREAM_MAX_TOKENS_LIMIT (200)",
        ),
        (
            {"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": ""},
            "STREAMING_REMOTE_URL must be set with STREAMING_ENGINE=openai",
        ),
        (
            {"WORKER_HEARTBEAT_S": 2.0, "WORKER_TIMEOUT_S": 2.0},
            "WORKER_TIMEOUT_S (2.0) must exceed WORKER_HEARTBEAT_S (2.0)",
        ),
    ],
)
def test_settings_that_cannot_go_together_are_refused_with_both_names(changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Config.from_settings(flat(**changes))


def test_metrics_allowed_addresses_are_networks():
    built = Config.from_settings(flat(METRICS_ALLOWED_ADDRESSES="10.0.0.0/8, 192.0.2.7,::1"))
    assert [str(n) for n in built.observability.metrics_networks] == [
        "10.0.0.0/8",
        "192.0.2.7/32",
        "::1/128",
    ]
    with pytest.raises(ConfigError, match="METRICS_ALLOWED_ADDRESSES: "):
        Config.from_settings(flat(METRICS_ALLOWED_ADDRESSES="10.0.0.0/8,prometheus"))


def test_a_changed_setting_is_seen_by_the_next_reader(settings):
    before = config.current()
    assert config.current() is before  # built once, not per read
    settings.STREAM_MAX_MESSAGES = 3
    assert config.current().limits.max_messages == 3
    assert config.current().retention == before.retention


def test_the_glossary_lists_each_objects_settings_as_the_code_groups_them():
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    for group, kind in config.GROUPS.items():
        row = next(
            line
            for line in glossary.splitlines()
            if line.startswith(f"| `{group}`, `{kind.__name__}` |")
        )
        listed = row.rsplit("|", 2)[1].replace("`", "").replace(" ", "").split(",")
        assert listed == [each.metadata["setting"] for each in dataclasses.fields(kind)]
