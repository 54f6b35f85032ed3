"""Admission, the same for every API: who may call, the limits, and a new generation, once.

`admit` is the one sequence: the asker's request rate, the model chosen and its engine ready, the
body parsed (each API has its own dialect), the asker's budgets, the generation registered with
its model, its owner remembered. Its tokens are claimed and a stream slot taken only when the
engine starts (`start_admitted`). Usage (rates, slots, budgets) is usage/'s to count.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from streaming.core.exceptions import MethodNotAllowed, ShuttingDown, StreamingError
from streaming.core.request import GenerationRequest
from streaming.core.runtime import Part
from streaming.engines.base import Engine
from streaming.generations.registry import PENDING, REGISTRY, Generation
from streaming.generations.whereabouts import whereabouts
from streaming.http.auth import answer_owner, authenticate, client_address, principal
from streaming.http.errors import error_response, public_error
from streaming.http.model_choice import chosen_model
from streaming.http.people import in_turn, person_of, priority_of
from streaming.http.tool_choice import allowed_servers
from streaming.usage import budgets
from streaming.usage.limits import WRITES, limits

View = Callable[..., Awaitable[HttpResponse]]
Options = TypeVar("Options")  # what a body asks of the reply besides the generation


class Admitting:
    """Whether this process still admits requests: not once it drains."""

    def __init__(self) -> None:
        self.draining = False


ADMITTING: Part[Admitting] = Part("admitting")


def stop_admitting() -> None:
    """SIGTERM arrived (lifecycle.drain): from now on every API call gets 503 server_shutdown."""
    ADMITTING.get().draining = True


def draining() -> bool:
    """True once the process drains."""
    return ADMITTING.get().draining


def api_view(
    *methods: str,
    errors: Callable[[StreamingError], HttpResponse] = error_response,
    public: bool = False,
    writes: tuple[str, ...] = (),
) -> Callable[[View], View]:
    """An async JSON endpoint: method check, who may use it (unless `public`), limits' errors.

    `writes`: the methods that write to conversations and start no answer, counted against
    the asker's CONVERSATIONS_WRITES_PER_MIN (those that start one are `admit`'s to count).
    Every StreamingError becomes the reply `errors` writes, and so does a database failure
    that stands for one (errors.public_error: a write that waited too long for its turn).
    """

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                response = errors(MethodNotAllowed(f"Use {' or '.join(methods)} on this endpoint."))
                response["Allow"] = ", ".join(methods)
                return response
            try:
                if draining():
                    raise ShuttingDown()
                if not public:
                    await authenticate(request)
                if request.method in writes:
                    await limits().hit(principal(request), WRITES)
                return await view(request, *args, **kwargs)
            except StreamingError as error:
                return errors(error)
            except OperationalError as error:
                meant = public_error(error)
                if meant is None:
                    raise
                return errors(meant)

        # Bearer keys need no CSRF token; `authenticate` checks it for session users itself.
        return csrf_exempt(wrapper)

    return decorate


async def admit(
    request: HttpRequest,
    parse: Callable[[bytes, Engine], tuple[GenerationRequest, Options]],
    api: str = "native",
    conversation_owner: str | None = None,
    model: str | None = None,
    body: bytes | None = None,
) -> tuple[Generation, Options]:
    """A new generation for this request (not started), and what else its body asked for;
    `conversation_owner`: the owner of the conversation it answers in, if any; `model`: the
    model it names (model_choice.py; None: the default); `body`: the body to parse, where not
    the request's own (its file parts read in: file_parts.py)."""
    await limits().hit(principal(request))
    chosen = await chosen_model(request, model)
    engine = chosen.engine
    generation_request, options = parse(request.body if body is None else body, engine)
    engine.check_request(generation_request)
    await allowed_servers(request, chosen, generation_request.mcp_servers)
    asker = principal(request)
    owner = answer_owner(request, conversation_owner)
    payer = person_of(request)
    # 429 with too few tokens left for its prompt; its start claims them.
    await budgets.check(await budgets_of(request, payer), generation_request.prompt_tokens)
    # Its model, carried wherever it is claimed, resumed or handed over; whose turn it is in the
    # engine's queue, and their groups' rank.
    generation_request = dataclasses.replace(
        generation_request,
        model=chosen.key,
        person=in_turn(request, owner),
        priority=await priority_of(payer[0]),
    )
    where = whereabouts()
    generation = REGISTRY.get().add(
        Generation(
            generation_request,
            engine,
            where.sharing,
            api=api,
            client=client_address(request),
            owner=owner,
            payer=payer,
        ),
        asker=asker,
    )
    # Any web process that may be asked about it can tell who may see and cancel it.
    await where.remember_owner(generation)
    return generation, options


async def budgets_of(request: HttpRequest, payer: budgets.Payer) -> budgets.Found:
    """The payer's budgets, looked up once per HTTP request (one admitted and started at once
    asks twice)."""
    found = getattr(request, "stream_budgets", None)
    if found is None or found.payer != payer:
        found = request.stream_budgets = await budgets.look_up(payer)
    return found


async def publish(request: HttpRequest, generation: Generation) -> None:
    """A created generation, not started, made claimable wherever its reader's stream comes
    (in a fleet, Redis becomes its only home; in one process, the registry stays it)."""
    await whereabouts().publish(generation, principal(request))


async def start_new(request: HttpRequest, generation: Generation, *, durable: bool = False) -> None:
    """Start the engine on a generation that has only just been created (no reader yet)."""
    try:
        await start_admitted(request, generation, durable=durable)
    except StreamingError:
        REGISTRY.get().discard(generation)  # refused before it began: nothing to log
        raise


async def start_admitted(
    request: HttpRequest, generation: Generation, *, durable: bool = False
) -> None:
    """Claim the tokens on its creator's budgets and take a stream slot (429/503 when there are
    none), then start the engine.

    Both are the generation's until it ends: the registry's `finish` (or `discard`) gives them
    back.
    """
    if generation.status != PENDING:
        generation.start()  # raises AlreadyStreaming, before a slot is taken for nothing
    # Its tokens on its creator's budgets (429 when none are left), then its stream slot; both
    # go back through the registry's `finish` or `discard`, or here if the start fails.
    found = await budgets_of(request, generation.payer)
    generation.charge = await budgets.claim(found, generation.request)  # its prompt's too
    try:
        generation.lease = await limits().acquire(principal(request))
        generation.start(durable=durable)
    except BaseException:
        _give_back(generation)
        raise


def _give_back(generation: Generation) -> None:
    """What a generation that could not start held: its stream slot and its budgets' claim."""
    if generation.lease is not None:
        generation.lease.release()
        generation.lease = None
    if generation.charge is not None:
        generation.charge.settle(0)
        generation.charge = None
