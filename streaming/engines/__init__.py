"""Model backends behind one protocol; `get_engine()` builds the configured one, once."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .base import COUNTERS, Chunk, Engine, GenerationRequest, Message, TokenStream

_engine: Engine | None = None


def build_engine(name: str | None = None, *, local: bool = False) -> Engine:
    """A new engine of the configured (or named) kind; imports heavy modules only when chosen.

    With REDIS_URL set, a web process gets the channel-layer engine, which hands generations
    to `runworker model-worker` processes; those build theirs with `local=True`.
    """
    if settings.REDIS_URL and not local and name is None:
        from .channel_layer import ChannelLayerEngine

        return ChannelLayerEngine()
    name = name or settings.STREAMING_ENGINE
    if name == "deterministic":
        from .deterministic import DeterministicEngine

        return DeterministicEngine(
            ttft_s=settings.DETERMINISTIC_TTFT_MS / 1000,
            tokens_per_s=settings.DETERMINISTIC_TPS,
            max_batch=settings.STREAMING_MAX_BATCH,
            max_queue=settings.STREAMING_MAX_QUEUE,
            answer_tokens=settings.DETERMINISTIC_ANSWER_TOKENS,
        )
    if name == "openai":
        from .remote import RemoteEngine

        try:
            return RemoteEngine(
                base_url=settings.STREAMING_REMOTE_URL,
                model=settings.STREAMING_REMOTE_MODEL,
                api_key=settings.STREAMING_REMOTE_KEY,
                connect_timeout_s=settings.STREAMING_REMOTE_CONNECT_TIMEOUT_S,
                read_timeout_s=settings.STREAMING_REMOTE_READ_TIMEOUT_S or None,
            )
        except ValueError as error:  # a URL that cannot be a base URL
            raise ImproperlyConfigured(f"STREAMING_REMOTE_URL: {error}") from None
    if name == "transformers":
        from .transformers import TransformersEngine

        return TransformersEngine(
            model=settings.STREAMING_MODEL,
            cache_dir=settings.STREAMING_MODEL_CACHE,
            max_batch=settings.STREAMING_MAX_BATCH,
            max_queue=settings.STREAMING_MAX_QUEUE,
            context_tokens=settings.STREAMING_CONTEXT_TOKENS,
        )
    raise ValueError(f"unknown STREAMING_ENGINE {name!r}")


def get_engine() -> Engine:
    """This process's engine (built on first use, never at import)."""
    global _engine
    if _engine is None:
        _engine = build_engine()
    return _engine


def set_engine(engine: Engine | None) -> None:
    """Replace this process's engine (tests and benchmarks)."""
    global _engine
    _engine = engine


__all__ = ["COUNTERS", "Chunk", "Engine", "GenerationRequest", "Message", "TokenStream",
           "build_engine", "get_engine", "set_engine"]
