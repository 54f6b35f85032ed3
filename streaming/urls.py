from django.urls import path, register_converter

from . import metrics, openai_api, views


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
    path("api/generations", views.create_generation, name="create-generation"),
    path("api/generations/<gid:generation_id>", views.generation_state, name="generation-state"),
    path("api/generations/<gid:generation_id>/stream", views.stream_generation, name="stream"),
    path("api/generations/<gid:generation_id>/cancel", views.cancel_generation, name="cancel"),
    path("api/stream", views.stream_direct, name="stream-direct"),
    path("api/stats", views.stats, name="stats"),
    path("v1/chat/completions", openai_api.chat_completions, name="openai-chat-completions"),
    path("v1/models", openai_api.list_models, name="openai-models"),
    path("v1/models/<path:model>", openai_api.retrieve_model, name="openai-model"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
