"""How many prompt tokens each request took from transformers' prefix cache (`cached_tokens` in
`usage`): its continuous batching shares a cached prefix's blocks, and finds them in the KV cache's
`search_prefix_match`, but returns the count nowhere a caller sees. `install` records it per
request as the manager's scheduler asks; `taken` hands it to the engine once (docs/models.md)."""

from __future__ import annotations

from typing import Any

ATTRIBUTE = "streaming_prefix_hits"  # where a manager keeps its requests' counts


def install(manager: Any) -> None:
    """Record each request's match on `manager`'s cache (its batch processor exists once the
    manager has warmed up). A transformers without the method records nothing: unknown."""
    cache = getattr(getattr(manager, "batch_processor", None), "cache", None)
    search = getattr(cache, "search_prefix_match", None)
    if search is None:
        return
    hits: dict[str, int] = {}

    def recording(request_id: str, prompt_ids: list[int]) -> int:
        matched = search(request_id, prompt_ids)
        hits[request_id] = matched
        return matched

    cache.search_prefix_match = recording  # this cache only; its scheduler calls it per request
    setattr(manager, ATTRIBUTE, hits)


def taken(manager: Any, request_id: str) -> int | None:
    """The prompt tokens `request_id` took from the cache, once (0: none, or no prefix sharing
    here); None where nothing is recorded (the method was not found)."""
    hits = getattr(manager, ATTRIBUTE, None)
    return None if hits is None else hits.pop(request_id, 0)
