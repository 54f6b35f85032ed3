"""What an upstream's router is told of each request (issue 55, docs/models.md): the
conversation's key, the person (an opaque id) and their priority, by the headers the router
reads. Only the chat front knows which conversation a request continues and whose it is; a
router of replicas (vLLM's, llm-d, Dynamo, SGLang's) keeps a conversation on the replica that
caches its prefix when it is told. Pure: no I/O, no Django.

`routing` in an `openai` model's table (or STREAMING_REMOTE_ROUTING): a preset's name, or a
table of header names for `session`, `user`, `priority` and `fairness`, on a `preset` if named,
and `body_priority` for vLLM's body `priority`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import string
from dataclasses import dataclass, field

from streaming.core.request import GenerationRequest


class RoutingError(ValueError):
    """A `routing` that is not one (the settings' reader makes it a ConfigError)."""


@dataclass(frozen=True)
class Routing:
    """The header each thing a router may read goes in ("": not sent)."""

    session: str = ""  # the conversation's key: its turns, and its forks, share it
    user: str = ""  # the person, opaque (also the body's `user` whenever routing is set)
    priority: str = ""  # their priority (higher first), where the router takes one
    fairness: str = ""  # whose share of the replicas a request counts in (the person)
    # vLLM's body `priority` (lower first): a vLLM started without `--scheduling-policy
    # priority` refuses any but 0, so only where asked.
    body_priority: bool = False
    secret: bytes = field(default=b"", repr=False)  # keys the person's opaque id

    def __bool__(self) -> bool:
        return any((self.session, self.user, self.priority, self.fairness, self.body_priority))


PRESETS = {
    # vllm-router's consistent_hash: X-Session-ID, then X-User-ID, then the body's `user`.
    "vllm-router": Routing(session="X-Session-ID", user="X-User-ID"),
    # llm-d's inference gateway: the session for its prefix-aware scorer, a fairness id.
    "llm-d": Routing(session="x-session-id", fairness="x-gateway-inference-fairness-id"),
    # NVIDIA Dynamo's frontend: its session, and its priority (higher more important).
    "dynamo": Routing(session="X-Dynamo-Session-ID", priority="x-dynamo-request-priority"),
    # SGLang's model gateway: one routing key.
    "sglang": Routing(session="X-SMG-Routing-Key"),
}
NO_ROUTING = Routing()
HEADER_NAME = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")  # RFC 9110
# What we send ourselves, never named for routing (a router's own must not be overwritten).
OURS = frozenset({"host", "authorization", "content-type", "content-length", "accept"})


def parse_routing(value: object, where: str, secret: bytes = b"") -> Routing:
    """`routing` as written: a preset's name, a table (or its JSON) of header names; "" none.
    RoutingError naming `where` for anything else. `secret` keys the person's opaque id."""
    return dataclasses.replace(_parsed(value, where), secret=secret)


def _parsed(value: object, where: str) -> Routing:
    if value in ("", None):
        return NO_ROUTING
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise RoutingError(f"{where}: not a preset's name nor a JSON table ({error})") from None
    if isinstance(value, str):
        if value not in PRESETS:
            raise RoutingError(f"{where}: {value!r} is not one of {', '.join(PRESETS)}")
        return PRESETS[value]
    if not isinstance(value, dict) or not value:
        raise RoutingError(f"{where}: must be a preset's name or a table of header names")
    table = dict(value)
    preset = table.pop("preset", None)
    if preset is not None and (not isinstance(preset, str) or preset not in PRESETS):
        raise RoutingError(f"{where}.preset: {preset!r} is not one of {', '.join(PRESETS)}")
    base = PRESETS.get(preset, NO_ROUTING)
    if not isinstance(table.pop("body_priority", False), bool):
        raise RoutingError(f"{where}.body_priority: must be true or false")
    headers = {"session", "user", "priority", "fairness"}
    for key, header in table.items():
        if key not in headers:
            known = ", ".join(sorted({*headers, "preset", "body_priority"}))
            raise RoutingError(f"{where}.{key}: not one of {known}")
        if not isinstance(header, str) or not header or not set(header) <= HEADER_NAME:
            raise RoutingError(f"{where}.{key}: must be an HTTP header's name")
        if header.lower() in OURS:
            raise RoutingError(f"{where}.{key}: {header} is a header this service sends itself")
    return dataclasses.replace(base, **table, body_priority=value.get("body_priority", False))


def conversation_key(request: GenerationRequest) -> bytes | None:
    """What every turn of one conversation begins with (its messages up to its first user
    message, hashed), the same for its branches from a later turn and its forks; None with no
    user message."""
    messages = request.messages
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is None:
        return None
    digest = hashlib.blake2b(digest_size=16)
    for message in messages[: first_user + 1]:
        digest.update(f"{message.role}\0{len(message.content)}\0".encode())
        digest.update(message.content.encode("utf-8", "surrogatepass"))
    return digest.digest()


def opaque_person(person: str, secret: bytes) -> str:
    """The person as an upstream sees them: the same id on every request, telling nothing of
    who (never a name, an e-mail or an address)."""
    return hashlib.blake2b(person.encode(), key=secret[:64], digest_size=12).hexdigest()


def routing_headers(routing: Routing, request: GenerationRequest) -> str:
    """The header lines (`Name: value\\r\\n`) for `request`: values of ours alone (hex and
    digits), so nothing a client sent reaches a router as one of these."""
    values = {}
    if routing.session and (key := conversation_key(request)) is not None:
        values[routing.session] = key.hex()
    if request.person:
        person = opaque_person(request.person, routing.secret)
        for header in (routing.user, routing.fairness):
            if header:
                values[header] = person
    if routing.priority:
        values[routing.priority] = str(int(request.priority))
    return "".join(f"{name}: {value}\r\n" for name, value in values.items())
