"""The official `openai` client against the session's live server."""

from __future__ import annotations

import openai
import pytest


@pytest.fixture(scope="module")
def model(asgi_server) -> str:
    """The one model the server serves, as `/v1/models` lists it."""
    return openai.OpenAI(base_url=f"{asgi_server.url}/v1", api_key="x").models.list().data[0].id


@pytest.fixture
def openai_client(asgi_server) -> openai.OpenAI:
    """The official client, unchanged, without retries (a retry would hide a failure)."""
    return openai.OpenAI(base_url=f"{asgi_server.url}/v1", api_key="x", max_retries=0)
