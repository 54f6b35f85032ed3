from django.urls import path

from . import metrics, openai_api, views

urlpatterns = [
    path("api/generations", views.create_generation, name="create-generation"),
    path("api/generations/<str:generation_id>", views.generation_state, name="generation-state"),
    path("api/generations/<str:generation_id>/stream", views.stream_generation, name="stream"),
    path("api/generations/<str:generation_id>/cancel", views.cancel_generation, name="cancel"),
    path("api/stream", views.stream_direct, name="stream-direct"),
    path("api/stats", views.stats, name="stats"),
    path("v1/chat/completions", openai_api.chat_completions, name="openai-chat-completions"),
    path("v1/models", openai_api.list_models, name="openai-models"),
    path("v1/models/<path:model>", openai_api.retrieve_model, name="openai-model"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
