"""`conversation` on `POST /v1/responses`: the input joins a conversation's branch shown, the
model sees that branch, and the answer is the branch's next item, linked to the response's
generation (docs/openai.md, "Conversations").

What the model sees is turns.request_for's, as for the chat page: the instructions and the
conversation's system prompt first, then the branch (its oldest turns left out when it does
not fit), then the input; the body's sampling fields win over the conversation's settings.
The items are written before the generation starts, the answer's `in_progress` and with the
response's output item id, so that whichever process ends it finishes the item with its text
(conversations/answers.py); a response refused before it started takes them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from streaming.conversations import branches, records
from streaming.conversations.branches import Turn
from streaming.core.request import GenerationRequest, Message
from streaming.engines.base import Engine
from streaming.generations.registry import Generation
from streaming.http import attachments, turns
from streaming.http.openai_dialect import owned
from streaming.http.openai_items import input_items
from streaming.http.responses_body import ResponseBody
from streaming.models import Conversation, ConversationItem, ItemStatus
from streaming.wire.responses_format import ResponseSpec, message_id


@dataclass
class Linked:
    """A response's conversation: what it is given to answer, and the items it wrote."""

    conversation: Conversation
    shown: list[Message]  # the branch shown as the model sees it, system prompt first
    after: ConversationItem | None  # the branch's last item: the input follows it
    added: list[Turn]  # the input, as items
    written: list[ConversationItem] = field(default_factory=list)

    def build(self, body: ResponseBody, engine: Engine) -> tuple[GenerationRequest, ResponseSpec]:
        """The request (instructions, the branch, the input; cut to fit) and its spec."""
        body.check_model(engine.model)
        instructions = body.data.get("instructions")
        asked = [
            *([Message("system", instructions)] if instructions else []),
            *self.shown,
            *(Message(turn.role, turn.content) for turn in self.added),
        ]
        request = turns.request_for(asked, engine, self.conversation, **body.sampling())
        return body.with_servers(request, "wait"), body.spec(request, engine.model)

    async def write(self, generation: Generation) -> None:
        """The input and the answer's item (`in_progress`), at the end of the branch shown; a
        limit refusing them discards the generation, which never started."""
        generation.in_conversation = True
        try:
            self.written = await sync_to_async(records.append)(
                self.conversation,
                [*self.added, ("assistant", "")],
                after=self.after,
                status=ItemStatus.IN_PROGRESS,
                generation_id=generation.id,
                last_id=message_id(generation.id),
            )
        except BaseException:
            turns.forget(generation)
            raise

    async def take_back(self) -> None:
        """The response was refused before it started: its items go (the branch shown ends
        where it did)."""
        if self.written:
            await sync_to_async(records.forget_item)(self.conversation, self.written[0])


async def link(request: HttpRequest, body: ResponseBody) -> Linked | None:
    """The body's conversation (404 when it is not the asker's), read before the generation
    is admitted; None without one."""
    if body.conversation_id is None:
        return None
    found = await owned(request, body.conversation_id, "conversation")
    added = input_items(body.data["input"], "input", limit=None)
    branch = await sync_to_async(branches.branch)(found)
    model = body.data.get("model")
    read = await attachments.read_in(
        request, found, branch.messages(), model if isinstance(model, str) else None, asking=False
    )
    return Linked(found, read.messages, branch.items[-1] if branch.items else None, added)
