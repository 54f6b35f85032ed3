"""The MCP servers a deployment's models may call (issue 53), as `[[mcp_servers]]` tables of the
file STREAMING_MODELS names, read and checked whole before anything serves.

```toml
[[mcp_servers]]
name = "time"                    # what clients and the page call it (a Responses server_label)
command = "mcp-server-time"      # stdio: a program, its arguments and environment
args = ["--local-timezone", "UTC"]
env = { LANG = "C.UTF-8" }       # written here: no secret
require_approval = "never"

[[mcp_servers]]
name = "tickets"
url = "https://mcp.example.com/mcp"               # streamable HTTP
headers_from = { Authorization = "TICKETS_AUTH" } # each header's value from that variable
groups = ["support"]                              # who may use it (unset: everyone)
tools = ["search", "create"]                      # which of its tools are offered (unset: all)
require_approval = { create = "always" }          # per tool; the others: never
timeout_s = 20
max_result_chars = 32768
```

A secret reaches a server only from a named variable (`env_from`, `headers_from`), so the file
can be shown and exported: the values are read when the server is started, never kept in a spec.
Every mistake is a `ConfigError` naming the file, the table (`mcp_servers[1]`) and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.core.config import ConfigError

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's server_label and tool names allow these
APPROVALS = ("never", "always")
DEFAULT_APPROVAL = "always"  # as OpenAI's: a tool with side effects asks first unless told not to
TIMEOUT_S = 30.0  # a call's default limit
MAX_RESULT_CHARS = 65_536  # a result's default cap: what goes back to the model and the page
FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "command": str,
    "args": list,
    "env": dict,
    "env_from": dict,
    "url": str,
    "headers_from": dict,
    "groups": list,
    "tools": list,
    "require_approval": (str, dict),
    "timeout_s": (int, float),
    "max_result_chars": int,
}


@dataclass(frozen=True)
class McpServerSpec:
    """One MCP server of the file: how to reach it, who may use it, and its limits."""

    name: str
    command: str = ""  # stdio: the program (one of command and url)
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # written in the file: no secret
    env_from: Mapping[str, str] = field(default_factory=dict)  # server's variable → ours
    url: str = ""  # streamable HTTP
    headers_from: Mapping[str, str] = field(default_factory=dict)  # header → our variable
    groups: tuple[str, ...] | None = None  # Django group names allowed; None: everyone
    tools: tuple[str, ...] | None = None  # offered; None: all it lists
    approval: str = DEFAULT_APPROVAL  # for a tool `approvals` does not name
    approvals: Mapping[str, str] = field(default_factory=dict)  # tool → never/always
    timeout_s: float = TIMEOUT_S
    max_result_chars: int = MAX_RESULT_CHARS

    @property
    def transport(self) -> str:
        """`stdio` or `http`."""
        return "stdio" if self.command else "http"

    def needs_approval(self, tool: str) -> bool:
        """Whether a call of `tool` waits for the person's yes."""
        return self.approvals.get(tool, self.approval) == "always"

    def offers(self, tool: str) -> bool:
        """Whether `tool` may be offered to a model (the server must list it too)."""
        return self.tools is None or tool in self.tools

    def secrets(self) -> tuple[dict[str, str], dict[str, str]]:
        """The environment and headers taken from our variables, read now (never logged)."""
        env = {name: os.environ.get(ours, "") for name, ours in self.env_from.items()}
        headers = {name: os.environ.get(ours, "") for name, ours in self.headers_from.items()}
        return env, headers


def read_mcp_servers(where: str, tables: Any) -> tuple[McpServerSpec, ...]:
    """The `[[mcp_servers]]` tables of a models file (`where` names it); ConfigError if wrong."""
    if tables is None:
        return ()
    if not isinstance(tables, list):
        raise ConfigError(f"{where}: mcp_servers must be [[mcp_servers]] tables")
    specs = [_spec(f"{where}: mcp_servers[{n}]", table) for n, table in enumerate(tables)]
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        if spec.name in seen:
            raise ConfigError(
                f"{where}: mcp_servers[{index}].name: {spec.name!r} is also "
                f"mcp_servers[{seen[spec.name]}]'s"
            )
        seen[spec.name] = index
    return tuple(specs)


def check_variables(where: str, specs: tuple[McpServerSpec, ...]) -> None:
    """At start-up: every variable a server takes a secret from is set."""
    for index, spec in enumerate(specs):
        for key, taken in (("env_from", spec.env_from), ("headers_from", spec.headers_from)):
            for name, ours in taken.items():
                if not os.environ.get(ours):
                    raise ConfigError(
                        f"{where}: mcp_servers[{index}].{key}.{name}: "
                        f"the variable {ours} is not set"
                    )


def _spec(where: str, table: Any) -> McpServerSpec:
    """One `[[mcp_servers]]` table, checked field by field."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: is not a table")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: not a field of an MCP server")
    for key, kinds in FIELDS.items():
        value = table.get(key)
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if value is not None and (
            not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
        ):
            raise ConfigError(f"{where}.{key}: has the wrong type ({type(value).__name__})")
    name = table.get("name")
    if name is None or not NAME.fullmatch(name):
        raise ConfigError(f"{where}.name: must be 1 to 64 letters, digits, '_' or '-'")
    command, url = table.get("command", ""), table.get("url", "")
    if bool(command.strip()) == bool(url.strip()):
        raise ConfigError(f"{where}: needs exactly one of command (stdio) and url (HTTP)")
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url: must be an http:// or https:// URL")
    stdio_only, http_only = ("args", "env", "env_from"), ("headers_from",)
    for key in stdio_only if url else http_only:
        if key in table:
            raise ConfigError(
                f"{where}.{key}: only for a server reached by {'command' if url else 'url'}"
            )
    approval, approvals = _approvals(where, table.get("require_approval", DEFAULT_APPROVAL))
    timeout_s, cap = (
        table.get("timeout_s", TIMEOUT_S),
        table.get("max_result_chars", MAX_RESULT_CHARS),
    )
    if timeout_s <= 0 or cap <= 0:
        raise ConfigError(f"{where}: timeout_s and max_result_chars must be above 0")
    return McpServerSpec(
        name=name,
        command=command,
        args=_strings(where, table, "args") or (),
        env=_names_to_strings(where, table, "env"),
        env_from=_names_to_strings(where, table, "env_from"),
        url=url,
        headers_from=_names_to_strings(where, table, "headers_from"),
        groups=_strings(where, table, "groups"),
        tools=_strings(where, table, "tools"),
        approval=approval,
        approvals=approvals,
        timeout_s=float(timeout_s),
        max_result_chars=cap,
    )


def _approvals(where: str, value: str | dict) -> tuple[str, dict[str, str]]:
    """`require_approval`: one word for every tool, or a word per tool (the rest: never)."""
    if isinstance(value, str):
        if value not in APPROVALS:
            raise ConfigError(f"{where}.require_approval: must be never, always or a table")
        return value, {}
    for tool, word in value.items():
        if word not in APPROVALS:
            raise ConfigError(f"{where}.require_approval.{tool}: must be never or always")
    return "never", dict(value)


def _strings(where: str, table: dict, key: str) -> tuple[str, ...] | None:
    """A list of non-empty strings, or None where the field is absent."""
    value = table.get(key)
    if value is None:
        return None
    if not all(isinstance(item, str) and item.strip() for item in value):
        raise ConfigError(f"{where}.{key}: must be a list of non-empty strings")
    return tuple(value)


def _names_to_strings(where: str, table: dict, key: str) -> dict[str, str]:
    """A table of names to strings (variables, headers)."""
    value = table.get(key) or {}
    for name, item in value.items():
        if not isinstance(item, str) or not name.strip():
            raise ConfigError(f"{where}.{key}.{name}: must be a string")
    return dict(value)
