"""The MCP servers of a models file (core/mcp_servers_file.py): read whole, every mistake named
by file, table and field, no secret kept in a spec."""

from __future__ import annotations

import pytest

from streaming.core.config import ConfigError
from streaming.core.models_file import mcp_servers, read_models

MODEL = '[[models]]\nname = "m"\nengine = "deterministic"\ntools = true\n'
TIME = '[[mcp_servers]]\nname = "time"\ncommand = "mcp-server-time"\n'


def write(tmp_path, text: str):
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_servers_are_read_with_their_transport_groups_tools_and_approvals(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        MODEL
        + TIME
        + 'args = ["--local-timezone", "UTC"]\nenv = { LANG = "C" }\nrequire_approval = "never"\n'
        + '[[mcp_servers]]\nname = "tickets"\nurl = "https://mcp.example.com/mcp"\n'
        + 'headers_from = { Authorization = "TICKETS_AUTH" }\ngroups = ["support"]\n'
        + 'tools = ["search", "create"]\nrequire_approval = { create = "always" }\n'
        + "timeout_s = 2.5\nmax_result_chars = 100\n",
    )
    assert read_models(path)[0].tools is True
    time, tickets = mcp_servers(path)
    assert (time.transport, time.args, dict(time.env)) == (
        "stdio",
        ("--local-timezone", "UTC"),
        {"LANG": "C"},
    )
    assert not time.needs_approval("get_current_time") and time.offers("anything")
    assert tickets.transport == "http" and tickets.groups == ("support",)
    assert tickets.needs_approval("create") and not tickets.needs_approval("search")
    assert tickets.offers("search") and not tickets.offers("delete")
    assert (tickets.timeout_s, tickets.max_result_chars) == (2.5, 100)
    # The secret is read when the server starts, never kept in the spec.
    monkeypatch.setenv("TICKETS_AUTH", "Bearer s3cret")
    assert "s3cret" not in repr(tickets)
    assert tickets.secrets() == ({}, {"Authorization": "Bearer s3cret"})


def test_a_server_asks_approval_unless_the_file_says_never(tmp_path):
    (time,) = mcp_servers(write(tmp_path, MODEL + TIME))
    assert time.needs_approval("get_current_time")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TIME + "port = 1\n", "mcp_servers[0].port: not a field of an MCP server"),
        ('[[mcp_servers]]\nname = "a b"\ncommand = "x"\n', "mcp_servers[0].name: must be 1 to 64"),
        ('[[mcp_servers]]\nname = "t"\n', "needs exactly one of command (stdio) and url (HTTP)"),
        (TIME + 'url = "http://x"\n', "needs exactly one of command"),
        ('[[mcp_servers]]\nname = "t"\nurl = "file:///etc"\n', "mcp_servers[0].url: must be an"),
        (TIME + 'headers_from = { A = "B" }\n', "mcp_servers[0].headers_from: only for a server"),
        (TIME + 'require_approval = "sometimes"\n', "require_approval: must be never, always"),
        (TIME + 'require_approval = { t = "maybe" }\n', "require_approval.t: must be never"),
        (TIME + "timeout_s = 0\n", "timeout_s and max_result_chars must be above 0"),
        (TIME + "timeout_s = true\n", "mcp_servers[0].timeout_s: has the wrong type"),
        (TIME + "tools = ['']\n", "mcp_servers[0].tools: must be a list of non-empty strings"),
        (TIME + TIME, "mcp_servers[1].name: 'time' is also mcp_servers[0]'s"),
        ("mcp_servers = 3\n" + MODEL, "mcp_servers must be [[mcp_servers]] tables"),
        (
            '[[models]]\nname = "m"\nengine = "transformers"\ntools = true\n',
            "models[0].tools: the transformers engine does not call tools",
        ),
        (
            '[[models]]\nname = "m"\nengine = "deterministic"\nvision = true\n',
            "models[0].vision: the deterministic engine is shown no images (only openai)",
        ),
        (
            '[[models]]\nname = "m"\nengine = "openai"\nurl = "http://x"\nmax_image_side = 9\n',
            "models[0].max_image_side: must be 64 to 8192 pixels",
        ),
    ],
)
def test_each_mistake_names_the_file_the_table_and_the_field(tmp_path, text, expected):
    body = text if "[[models]]" in text else MODEL + text
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as refused:
        read_models(path)
    assert str(refused.value).startswith(f"STREAMING_MODELS file {path}: ")
    assert expected in str(refused.value)
