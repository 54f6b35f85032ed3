"""The service's settings as a few typed, frozen objects, one per concept, checked once.

chatsite/settings.py reads each environment variable once, with its bounds (docs/api.md,
"Settings"); here those flat values are grouped by what they govern, so that code asks for
`limits.max_prompt_chars`, not for a name and a prefix. Every field names the setting it comes
from, which is also its environment variable: the names users set never change.

Built from Django's settings on first use and rebuilt when a setting changes (tests override
them), read lazily so that core imports without Django configured, as Channels reads its own.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_type_hints

from streaming.core import runtime
from streaming.core.runtime import Part


class ConfigError(ValueError):
    """Settings that are each valid but cannot go together (Django reports it at start-up)."""


def setting(name: str, **options: Any) -> Any:
    """A field read from the Django setting (and environment variable) `name`."""
    return field(metadata={"setting": name}, **options)


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """What one request may ask: refused before any stream starts."""

    max_body_bytes: int = setting("STREAM_MAX_BODY_BYTES")
    max_prompt_chars: int = setting("STREAM_MAX_PROMPT_CHARS")
    max_messages: int = setting("STREAM_MAX_MESSAGES")
    default_max_tokens: int = setting("STREAM_DEFAULT_MAX_TOKENS")
    max_tokens_limit: int = setting("STREAM_MAX_TOKENS_LIMIT")

    def __post_init__(self) -> None:
        if self.default_max_tokens > self.max_tokens_limit:  # every request without it refused
            raise ConfigError(
                f"STREAM_DEFAULT_MAX_TOKENS ({self.default_max_tokens}) must not "
                f"exceed STREAM_MAX_TOKENS_LIMIT ({self.max_tokens_limit})"
            )


@dataclass(frozen=True, slots=True)
class AdmissionSettings:
    """Who may come in and how much each client may hold (0: no limit)."""

    require_auth: Literal["auto", "true", "false"] = setting("STREAM_REQUIRE_AUTH")
    rate_per_min: int = setting("STREAM_RATE_PER_MIN")
    max_streams_per_client: int = setting("STREAM_MAX_STREAMS_PER_CLIENT")
    max_in_flight: int = setting("STREAM_MAX_IN_FLIGHT")
    lease_ttl_s: float = setting("STREAM_LEASE_TTL_S")  # a killed process's slots lapse
    max_pending: int = setting("STREAM_MAX_PENDING")  # created, not streamed yet
    max_pending_per_client: int = setting("STREAM_MAX_PENDING_PER_CLIENT")
    unclaimed_ttl_s: float = setting("STREAM_UNCLAIMED_TTL_S")  # created, never streamed
    background_max: int = setting("RESPONSES_BACKGROUND_MAX")
    background_per_client: int = setting("RESPONSES_BACKGROUND_PER_CLIENT")


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """How long an answer stays readable, for readers that leave and come back."""

    resume_grace_s: float = setting("STREAM_RESUME_GRACE_S")  # past its last reader
    resume_max_bytes: int = setting("STREAM_RESUME_MAX_BYTES")  # its log's memory
    retention_s: float = setting("STREAM_RETENTION_S")  # past its end
    retained_max: int = setting("STREAM_RETAINED_MAX")  # finished answers kept


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How a connection is kept alive, bounded and closed."""

    heartbeat_s: float = setting("STREAM_HEARTBEAT_S")
    proxy_read_timeout_s: float = setting("STREAM_PROXY_READ_TIMEOUT_S")
    send_timeout_s: float = setting("STREAM_SEND_TIMEOUT_S")  # a reader taking no bytes
    request_timeout_s: float = setting("STREAM_REQUEST_TIMEOUT_S")  # 0: no bound
    shutdown_grace_s: float = setting("STREAM_SHUTDOWN_GRACE_S")


# The order of what waits for an engine's batch (engines/scheduler.py): arrival; fair turns
# per person; fair turns and, where the engine can pause a sequence, preemption.
Scheduling = Literal["fifo", "fair", "preempt"]
SCHEDULINGS: tuple[Scheduling, ...] = get_args(Scheduling)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Which engine runs, on which model, with how many sequences at once."""

    name: str = setting("STREAMING_ENGINE")
    paths: Mapping[str, str] = setting("STREAMING_ENGINES")  # name: dotted path of its class
    model: str = setting("STREAMING_MODEL")
    models_file: str = setting("STREAMING_MODELS")  # "": one model, the settings' (above)
    dtype: Literal["auto", "float32", "bfloat16"] = setting("STREAMING_DTYPE")  # transformers'
    packed_weights: Literal["auto", "off"] = setting("STREAMING_PACKED_WEIGHTS")  # on a CPU
    model_cache: str = setting("STREAMING_MODEL_CACHE")
    context_tokens: int = setting("STREAMING_CONTEXT_TOKENS")  # 0: the engine's default
    max_batch: int = setting("STREAMING_MAX_BATCH")  # 0: the engine's default
    max_queue: int = setting("STREAMING_MAX_QUEUE")
    scheduling: Literal["fifo", "fair", "preempt"] = setting("STREAMING_SCHEDULING")  # Scheduling

    def __post_init__(self) -> None:
        if self.scheduling not in SCHEDULINGS:  # a Django setting set in code skips env_str's
            raise ConfigError(
                f"STREAMING_SCHEDULING must be one of {', '.join(SCHEDULINGS)}; "
                f"got {self.scheduling!r}"
            )


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """The `openai` engine's upstream."""

    url: str = setting("STREAMING_REMOTE_URL")
    model: str = setting("STREAMING_REMOTE_MODEL")
    key: str = setting("STREAMING_REMOTE_KEY", repr=False)  # never in a log line
    connect_timeout_s: float = setting("STREAMING_REMOTE_CONNECT_TIMEOUT_S")
    read_timeout_s: float = setting("STREAMING_REMOTE_READ_TIMEOUT_S")  # 0: forever
    routing: str = setting("STREAMING_REMOTE_ROUTING")  # core/routing.py: a preset, or JSON
    replicas: str = setting("STREAMING_REMOTE_URLS")  # comma-separated base URLs, or ""

    @property
    def urls(self) -> tuple[str, ...]:
        """The replicas' base URLs (none: the one `url`)."""
        return tuple(url.strip() for url in self.replicas.split(",") if url.strip())

    def __post_init__(self) -> None:
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"STREAMING_REMOTE_URLS: {url!r} is not an http(s) URL")
        from streaming.core.routing import RoutingError, parse_routing  # it needs the request

        try:
            parse_routing(self.routing, "STREAMING_REMOTE_ROUTING")
        except RoutingError as error:
            raise ConfigError(str(error)) from None


@dataclass(frozen=True, slots=True)
class DeterministicSettings:
    """The deterministic engine's pace and answers."""

    ttft_ms: float = setting("DETERMINISTIC_TTFT_MS")
    tokens_per_s: float = setting("DETERMINISTIC_TPS")  # 0: unpaced
    step_ms: float = setting("DETERMINISTIC_STEP_MS")  # > 0: a GPU batch's steps
    answer_tokens: int = setting("DETERMINISTIC_ANSWER_TOKENS")  # 0: drawn from the seed


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """Web processes and model workers over Redis (`redis_url` empty: no fleet)."""

    redis_url: str = setting("REDIS_URL")
    heartbeat_s: float = setting("WORKER_HEARTBEAT_S")
    timeout_s: float = setting("WORKER_TIMEOUT_S")  # silent this long: presumed dead
    drain_s: float = setting("WORKER_DRAIN_S")
    worker_models: str = setting("WORKER_MODELS")  # comma-separated names; "": the default
    affinity: bool = setting("WORKER_AFFINITY")  # a conversation's turns on one worker

    @property
    def worker_model_names(self) -> tuple[str, ...]:
        """The names WORKER_MODELS lists, in its order (none: the default model)."""
        return tuple(name.strip() for name in self.worker_models.split(",") if name.strip())

    def __post_init__(self) -> None:
        if self.timeout_s <= self.heartbeat_s:  # every process would die between heartbeats
            raise ConfigError(
                f"WORKER_TIMEOUT_S ({self.timeout_s}) must exceed "
                f"WORKER_HEARTBEAT_S ({self.heartbeat_s})"
            )


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    """Conversations kept on the server, per owner."""

    max_per_owner: int = setting("CONVERSATIONS_MAX_PER_OWNER")
    max_items: int = setting("CONVERSATIONS_MAX_ITEMS")  # every branch counted
    max_item_chars: int = setting("CONVERSATIONS_MAX_ITEM_CHARS")
    max_chars: int = setting("CONVERSATIONS_MAX_CHARS")  # in one, every branch counted
    max_chars_per_owner: int = setting("CONVERSATIONS_MAX_CHARS_PER_OWNER")
    writes_per_min: int = setting("CONVERSATIONS_WRITES_PER_MIN")  # per client; 0: no limit
    checkpoint_s: float = setting("CONVERSATIONS_CHECKPOINT_S")  # a running answer's text saved


@dataclass(frozen=True, slots=True)
class FileSettings:
    """Files people upload (docs/files.md), per upload and per owner."""

    max_bytes: int = setting("FILES_MAX_BYTES")
    max_bytes_per_owner: int = setting("FILES_MAX_BYTES_PER_OWNER")


@dataclass(frozen=True, slots=True)
class SignInSettings:
    """Failed sign-ins counted per window before the next attempts are refused (0: no limit)."""

    max_failures: int = setting("SIGN_IN_MAX_FAILURES")  # one account from one address
    max_failures_per_address: int = setting("SIGN_IN_MAX_FAILURES_PER_ADDRESS")  # any account
    window_s: int = setting("SIGN_IN_WINDOW_S")


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """Sign-in with the team's OpenID Connect provider (docs/sso.md; off without an issuer),
    and how long the audit log keeps what people did."""

    issuer: str = setting("OIDC_ISSUER")
    client_id: str = setting("OIDC_CLIENT_ID")
    client_secret: str = setting("OIDC_CLIENT_SECRET", repr=False)
    scopes: str = setting("OIDC_SCOPES")
    provider_name: str = setting("OIDC_PROVIDER_NAME")
    new_users: Literal["active", "pending"] = setting("OIDC_NEW_USERS")
    groups_claim: str = setting("OIDC_GROUPS_CLAIM")  # "": groups kept by hand
    group_names: Mapping[str, str] = setting("OIDC_GROUP_NAMES")  # the provider's: ours
    staff_groups: tuple[str, ...] = setting("OIDC_STAFF_GROUPS")  # (): is_staff by hand
    superuser_groups: tuple[str, ...] = setting("OIDC_SUPERUSER_GROUPS")
    clock_skew_s: int = setting("OIDC_CLOCK_SKEW_S")
    audit_retention_days: int = setting("AUDIT_RETENTION_DAYS")

    def __post_init__(self) -> None:
        if self.issuer and not (self.client_id and self.client_secret):
            raise ConfigError("OIDC_ISSUER needs OIDC_CLIENT_ID and OIDC_CLIENT_SECRET")
        if self.issuer and "openid" not in self.scopes.split():
            raise ConfigError("OIDC_SCOPES must include openid")
        if not all(isinstance(v, str) and v for v in self.group_names.values()):
            raise ConfigError("OIDC_GROUP_NAMES: each value must be a group's name")
        # Lists from the environment: a tuple, so the settings stay frozen and hashable.
        object.__setattr__(self, "staff_groups", tuple(self.staff_groups))
        object.__setattr__(self, "superuser_groups", tuple(self.superuser_groups))

    @property
    def enabled(self) -> bool:
        """Whether people may sign in with the provider."""
        return bool(self.issuer)


@dataclass(frozen=True, slots=True)
class ObservabilitySettings:
    """What the log rows keep of a prompt, and where metrics of several processes meet."""

    prompt_logging: Literal["none", "truncated", "full"] = setting("PROMPT_LOGGING")
    prompt_log_chars: int = setting("PROMPT_LOG_CHARS")
    prometheus_multiproc_dir: str = setting("PROMETHEUS_MULTIPROC_DIR")
    metrics_allowed_addresses: str = setting("METRICS_ALLOWED_ADDRESSES")

    @property
    def metrics_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """METRICS_ALLOWED_ADDRESSES as networks (an address alone: itself)."""
        return tuple(
            ipaddress.ip_network(part.strip(), strict=False)
            for part in self.metrics_allowed_addresses.split(",")
            if part.strip()
        )

    def __post_init__(self) -> None:
        try:
            _ = self.metrics_networks  # each part a network or an address: refused at start
        except ValueError as error:
            raise ConfigError(f"METRICS_ALLOWED_ADDRESSES: {error}") from None


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting of the service, by concept."""

    limits: LimitSettings
    admission: AdmissionSettings
    retention: RetentionSettings
    connections: ConnectionSettings
    engine: EngineSettings
    remote: RemoteSettings
    deterministic: DeterministicSettings
    fleet: FleetSettings
    conversations: ConversationSettings
    files: FileSettings
    sign_in: SignInSettings
    identity: IdentitySettings
    observability: ObservabilitySettings

    def __post_init__(self) -> None:
        if self.engine.name == "openai" and not self.remote.url:
            raise ConfigError(
                "STREAMING_REMOTE_URL must be set with STREAMING_ENGINE=openai: "
                "the upstream's base URL, such as http://127.0.0.1:8001/v1"
            )

    @classmethod
    def from_settings(cls, source: Any) -> Config:
        """Each object's fields read from `source`'s attributes of their settings' names."""
        parts = {}
        for part in dataclasses.fields(cls):
            kind = GROUPS[part.name]
            parts[part.name] = kind(
                **{
                    each.name: getattr(source, each.metadata["setting"])
                    for each in dataclasses.fields(kind)
                }
            )
        return cls(**parts)


GROUPS: dict[str, Any] = get_type_hints(Config)  # each part's name: its class


def setting_names() -> dict[str, str]:
    """Every setting read here, by name: the `group.field` it fills."""
    return {
        each.metadata["setting"]: f"{group}.{each.name}"
        for group, kind in GROUPS.items()
        for each in dataclasses.fields(kind)
    }


def from_django() -> Config:
    """The settings as Django's are now, checked."""
    from django.conf import settings  # lazily, so core imports without Django configured

    return Config.from_settings(settings)


# Not composed like the other parts: read from Django's when first asked, and again after one
# changes (tests), so a deployment built earlier sees the change.
CONFIG: Part[Config] = Part("settings")


def current() -> Config:
    """This process's settings, read from Django's on first use."""
    parts = runtime.current()
    return parts.built(CONFIG) or parts.put(CONFIG, from_django())


def reset(**_: Any) -> None:
    """Forget them: read again on next use (a receiver of Django's `setting_changed`)."""
    parts = runtime.installed()
    if parts is not None:
        parts.set(CONFIG, None)
