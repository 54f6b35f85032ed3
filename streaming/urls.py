from django.urls import path, register_converter

from streaming.http import native_api, openai_api, responses_api
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

urlpatterns = [
    path("api/generations", native_api.create_generation, name="create-generation"),
    path("api/generations/<gid:generation_id>", native_api.generation_state,
         name="generation-state"),
    path("api/generations/<gid:generation_id>/stream", native_api.stream_generation, name="stream"),
    path("api/generations/<gid:generation_id>/cancel", native_api.cancel_generation, name="cancel"),
    path("api/stream", native_api.stream_direct, name="stream-direct"),
    path("api/stats", native_api.stats, name="stats"),
    path("api/engine", native_api.engine_defaults, name="engine"),
    path("v1/chat/completions", openai_api.chat_completions, name="openai-chat-completions"),
    path("v1/responses", responses_api.create_response, name="openai-responses"),
    path("v1/responses/<str:response_id>", responses_api.response_detail,
         name="openai-response"),
    path("v1/responses/<str:response_id>/cancel", responses_api.cancel_response,
         name="openai-response-cancel"),
    path("v1/models", openai_api.list_models, name="openai-models"),
    path("v1/models/<path:model>", openai_api.retrieve_model, name="openai-model"),
    path("healthz", native_api.healthz, name="healthz"),
    path("readyz", native_api.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
