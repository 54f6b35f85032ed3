"""The service's tables, one module per concept: the generation log and stored responses
(log.py), conversations (conversations.py), who may ask and who they are at the identity
provider (people.py), usage and budgets (usage.py), the files people upload (files.py), and the
audit log (audit.py). Every layer imports them from here; they import nothing else of ours."""

from streaming.models.audit import AppendOnly, AuditEntry
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
from streaming.models.people import KEY_PREFIX, ApiKey, Identity, SignInFailures, digest_of
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
    "AppendOnly",
    "AuditEntry",
    "Budget",
    "BudgetPeriod",
    "Conversation",
    "ConversationItem",
    "Feedback",
    "GenerationLog",
    "GenerationStatus",
    "GroupPriority",
    "Identity",
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
