from django.urls import path, register_converter

from streaming.http import (
    conversation_export,
    conversation_import,
    conversations_api,
    feedback_api,
    files_api,
    native_api,
    openai_api,
    openai_conversations,
    responses_api,
    shares_api,
    tools_api,
    usage_api,
)
from streaming.http.auth import scrapers_only
from streaming.ops import metrics


class GenerationIdConverter:
    """Ids are what `new_generation_id()` makes: 32 lowercase hex digits.

    Anything else is a 404 from the URL resolver, before any lookup: a NUL or a megabyte of
    text never reaches the database (PostgreSQL refuses NUL in text with an error).
    """

    regex = "[0-9a-f]{32}"

    def to_python(self, value: str) -> str:
        """As is."""
        return value

    def to_url(self, value: str) -> str:
        """As is."""
        return value


register_converter(GenerationIdConverter, "gid")


class ConversationIdConverter(GenerationIdConverter):
    """A conversation's id (`records.new_conversation_id`)."""

    regex = "conv_[0-9a-f]{32}"


class ItemIdConverter(GenerationIdConverter):
    """A conversation item's id (`records.new_item_id`)."""

    regex = "msg_[0-9a-f]{32}"


class ShareTokenConverter(GenerationIdConverter):
    """A shared link's token (`sharing.share`: 24 random bytes, URL-safe base64)."""

    regex = "[A-Za-z0-9_-]{32}"


register_converter(ShareTokenConverter, "share")
register_converter(ConversationIdConverter, "cid")
register_converter(ItemIdConverter, "iid")

urlpatterns = [
    path("api/generations", native_api.create_generation, name="create-generation"),
    path(
        "api/generations/<gid:generation_id>", native_api.generation_state, name="generation-state"
    ),
    path("api/generations/<gid:generation_id>/stream", native_api.stream_generation, name="stream"),
    path("api/generations/<gid:generation_id>/cancel", native_api.cancel_generation, name="cancel"),
    path("api/generations/<gid:generation_id>/approvals", tools_api.decide, name="approvals"),
    path("api/stream", native_api.stream_direct, name="stream-direct"),
    path("api/stats", native_api.stats, name="stats"),
    path("api/usage", usage_api.usage_view, name="usage"),
    path("api/conversations", conversations_api.conversations, name="conversations"),
    path("api/conversations/export", conversation_export.export_all, name="conversations-export"),
    path(
        "api/conversations/import",
        conversation_import.import_conversations,
        name="conversations-import",
    ),
    path(
        "api/conversations/<cid:conversation_id>/export",
        conversation_export.export_one,
        name="conversation-export",
    ),
    path(
        "api/conversations/<cid:conversation_id>/items/<iid:item_id>/feedback",
        feedback_api.answer_feedback,
        name="conversation-feedback",
    ),
    path(
        "api/conversations/<cid:conversation_id>",
        conversations_api.conversation,
        name="conversation",
    ),
    path(
        "api/conversations/<cid:conversation_id>/messages",
        conversations_api.send,
        name="conversation-send",
    ),
    path(
        "api/conversations/<cid:conversation_id>/items/<iid:item_id>/regenerate",
        conversations_api.regenerate,
        name="conversation-regenerate",
    ),
    path(
        "api/conversations/<cid:conversation_id>/items/<iid:item_id>/show",
        conversations_api.show,
        name="conversation-show",
    ),
    path(
        "api/conversations/<cid:conversation_id>/items/<iid:item_id>/fork",
        conversations_api.fork,
        name="conversation-fork",
    ),
    path(
        "api/conversations/<cid:conversation_id>/share",
        shares_api.share,
        name="conversation-share",
    ),
    path("api/shares", shares_api.shares, name="shares"),
    path("api/shares/<share:token>", shares_api.shared_link, name="shared-link"),
    path(
        "api/shares/<share:token>/continue",
        shares_api.continue_shared,
        name="shared-link-continue",
    ),
    path("api/engine", native_api.engine_defaults, name="engine"),
    path("api/mcp_servers", tools_api.list_servers, name="mcp-servers"),
    path("v1/chat/completions", openai_api.chat_completions, name="openai-chat-completions"),
    path("v1/responses", responses_api.create_response, name="openai-responses"),
    path("v1/responses/<str:response_id>", responses_api.response_detail, name="openai-response"),
    path(
        "v1/responses/<str:response_id>/cancel",
        responses_api.cancel_response,
        name="openai-response-cancel",
    ),
    path("v1/conversations", openai_conversations.create_conversation, name="openai-conversations"),
    path(
        "v1/conversations/<cid:conversation_id>",
        openai_conversations.conversation_detail,
        name="openai-conversation",
    ),
    path(
        "v1/conversations/<cid:conversation_id>/items",
        openai_conversations.conversation_items,
        name="openai-conversation-items",
    ),
    path(
        "v1/conversations/<cid:conversation_id>/items/<iid:item_id>",
        openai_conversations.conversation_item,
        name="openai-conversation-item",
    ),
    path("v1/files", files_api.files, name="openai-files"),
    path("v1/files/<str:file_id>", files_api.file_detail, name="openai-file"),
    path("v1/files/<str:file_id>/content", files_api.file_content, name="openai-file-content"),
    path("v1/models", openai_api.list_models, name="openai-models"),
    path("v1/models/<path:model>", openai_api.retrieve_model, name="openai-model"),
    path("healthz", native_api.healthz, name="healthz"),
    # vLLM's name for it: a router of replicas (vllm-router) probes /health before it routes.
    path("health", native_api.healthz, name="health"),
    path("readyz", native_api.readyz, name="readyz"),
    path("metrics", scrapers_only(metrics.metrics_view), name="metrics"),
]
