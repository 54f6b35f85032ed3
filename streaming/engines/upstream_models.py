"""An upstream's `GET /models`: which models it serves (to find its one model when none is
named, and to tell whether it is healthy), and whether a replica answers again. Over httpx, off
the streams' hot path (engines/upstream.py carries those)."""

from __future__ import annotations

import json
import logging

import httpx
from django.core.exceptions import ImproperlyConfigured

from streaming.core.exceptions import EngineUnavailable

logger = logging.getLogger(__name__)


class ModelList:
    """One upstream's model list, asked at `base_url`."""

    TIMEOUT_S = 5.0  # /models must answer within this for /readyz
    KEEPALIVE_EXPIRY_S = 2.0  # as the streams' pool: before the upstream's own runs out

    def __init__(self, base_url: str, headers: dict[str, str], connect_timeout_s: float) -> None:
        self.base_url = base_url
        self.headers = headers
        self.timeout = httpx.Timeout(self.TIMEOUT_S, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._unreachable = False  # its last ask failed to connect (logged then)

    @property
    def client(self) -> httpx.AsyncClient:
        """An httpx client (made on first use, on the serving loop)."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self.headers,
                timeout=self.timeout,
                limits=httpx.Limits(keepalive_expiry=self.KEEPALIVE_EXPIRY_S),
            )
        return self._client

    def served_now(self) -> list[str] | None:
        """The ids it lists, asked now (start-up, before any loop); None when it does not
        answer 200 yet (`served` asks again, and says why)."""
        try:
            response = httpx.get(
                f"{self.base_url}/models", headers=self.headers, timeout=self.timeout
            )
        except httpx.HTTPError as error:
            logger.warning(
                "the upstream %s does not answer (%s); its model is asked for again until it does",
                self.base_url,
                describe(error),
            )
            return None
        if response.status_code != 200:
            return None
        try:
            return _listed(response)
        except ValueError as error:
            raise ImproperlyConfigured(f"STREAMING_REMOTE_URL: {error}") from None

    async def served(self) -> list[str]:
        """The ids it lists; EngineUnavailable when it cannot say."""
        try:
            response = await self.client.get("/models")
        except httpx.HTTPError as error:
            # Clients are told what failed; the address and httpx's words (they name hosts
            # inside the deployment) stay in the log, once per outage (probes ask often).
            if not self._unreachable:
                reason = describe(error)
                logger.warning("the upstream %s is unreachable: %s", self.base_url, reason)
            self._unreachable = True
            raise EngineUnavailable("The upstream is unreachable.") from None
        self._unreachable = False
        if response.status_code != 200:
            raise EngineUnavailable(
                f"The upstream answered /models with "
                f"{response.status_code}: {message_of(response.content)}"
            )
        try:
            return _listed(response)
        except ValueError as error:
            raise EngineUnavailable(f"The upstream's model list: {error}.") from None

    async def answers(self, base_url: str) -> bool:
        """Whether the replica at `base_url` answers its `GET /models` (a probe)."""
        try:
            return (await self.client.get(f"{base_url}/models")).status_code == 200
        except httpx.HTTPError:
            return False

    def only_model(self, served: list[str]) -> str:
        """The model to ask for when none is named: the one it serves."""
        if len(served) == 1:
            return served[0]
        raise ImproperlyConfigured(
            f"STREAMING_REMOTE_MODEL is not set and the upstream {self.base_url} serves "
            + (
                f"{len(served)} models ({', '.join(served)}): set it to one of them"
                if served
                else "no model"
            )
        )


def message_of(body: bytes) -> str:
    """The message of an upstream error body: OpenAI's, TGI's (`"error": str`) or the text."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:500]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")
    if isinstance(error, str):
        return error
    return str(payload)[:500]


def describe(error: BaseException) -> str:
    """An exception as a log line names it."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _listed(response: httpx.Response) -> list[str]:
    """The model ids of a `GET /models` answer; ValueError when it is not OpenAI's list."""
    try:
        return [str(card["id"]) for card in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"GET {response.url} is not OpenAI's model list") from None
