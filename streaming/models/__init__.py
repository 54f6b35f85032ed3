"""The service's tables, one module per concept: the generation log and stored responses
(log.py), conversations (conversations.py), who may ask (people.py), usage and budgets
(usage.py), and the files people upload (files.py). Every layer imports them from here; they
import nothing else of ours."""

from streaming.models.conversations import (
    ANSWER_SETTINGS,
    Conversation,
    ConversationItem,
    Feedback,
    ItemStatus,
    SharedLink,
)
from streaming.models.files import StoredFile
from streaming.models.log import GenerationLog, GenerationStatus, StoredResponse
from streaming.models.people import KEY_PREFIX, ApiKey, SignInFailures, digest_of
from streaming.models.usage import (
    Budget,
    BudgetPeriod,
    GroupPriority,
    UsageCount,
    UsageDay,
    UsageHour,
)

__all__ = [
    "ANSWER_SETTINGS",
    "KEY_PREFIX",
    "ApiKey",
    "Budget",
    "BudgetPeriod",
    "Conversation",
    "ConversationItem",
    "Feedback",
    "GenerationLog",
    "GenerationStatus",
    "GroupPriority",
    "ItemStatus",
    "SharedLink",
    "SignInFailures",
    "StoredFile",
    "StoredResponse",
    "UsageCount",
    "UsageDay",
    "UsageHour",
    "digest_of",
]
