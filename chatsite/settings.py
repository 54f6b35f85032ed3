"""Settings: every value comes from the environment (docs/api.md lists them), read here once.

The service's own are grouped by concept into typed objects (streaming/core/config.py), built
and checked together at the end of this module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from streaming.core.config import SCHEDULINGS, Config, ConfigError
from streaming.core.models_file import check_models

from .env import env_bool, env_float, env_int, env_json_object, env_list, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)
# The default key is only for the loopback default of `make run`; `check --deploy` flags it.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "insecure-dev-key-set-DJANGO_SECRET_KEY-in-production")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

INSTALLED_APPS = [
    # First: our `runserver` (daphne's, draining on Ctrl-C) and `runworker` (which starts the
    # model worker at once) win over daphne's, staticfiles' and channels' commands.
    "streaming",
    "daphne",  # before staticfiles, whose runserver would serve WSGI
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "frontend",
]

MIDDLEWARE = [
    # Outermost, so it sees the response exactly as the server will send it.
    "streaming.http.middleware.EventStreamGuardMiddleware",
    # Django's own middleware, with their hooks run on the event loop instead of a thread
    # each (chatsite/middleware.py says why).
    "chatsite.middleware.InlineSecurityMiddleware",
    # A NUL in the path or the query, refused before anything reads it (PostgreSQL cannot store
    # one; SQLite's search index fails on one).
    "streaming.http.middleware.RefuseNulMiddleware",
    # Compresses pages but never an event stream: gzip would hold tokens back in its buffer.
    "streaming.http.middleware.StreamSafeGZipMiddleware",
    "chatsite.middleware.InlineSessionMiddleware",
    "chatsite.middleware.InlineCommonMiddleware",
    "chatsite.middleware.InlineCsrfViewMiddleware",
    "chatsite.middleware.InlineAuthenticationMiddleware",
    "chatsite.middleware.InlineMessageMiddleware",
    "chatsite.middleware.InlineXFrameOptionsMiddleware",
]

ROOT_URLCONF = "chatsite.urls"
ASGI_APPLICATION = "chatsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

try:
    DATABASES = {
        "default": dj_database_url.parse(
            env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"), conn_max_age=0
        )
    }
except ValueError as error:  # an unknown scheme, or no URL at all
    raise ImproperlyConfigured(f"DATABASE_URL: {error}") from None
# SQLite (the default): a write takes the write lock as its transaction begins (IMMEDIATE), so a
# writer that finds it taken waits its turn, up to SQLITE_BUSY_TIMEOUT_S, then 503 database_busy;
# a deferred one that had read first could not wait ("database is locked" at once, a 500). WAL
# lets readers go on while a write is under way; synchronous=NORMAL is safe under WAL.
# https://docs.djangoproject.com/en/5.2/ref/databases/#database-is-locked-errors
SQLITE_BUSY_TIMEOUT_S = env_float("SQLITE_BUSY_TIMEOUT_S", 20.0, minimum=0.0, exclusive=True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": SQLITE_BUSY_TIMEOUT_S,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        # An exception's record, not the line Django writes for every 5xx (a 503 is an answer).
        "with_traceback": {
            "()": "django.utils.log.CallbackFilter",
            "callback": lambda record: bool(record.exc_info),
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "tracebacks": {"class": "logging.StreamHandler", "filters": ["with_traceback"]},
    },
    "loggers": {
        "streaming": {"handlers": ["console"], "level": "INFO"},
        # Every 500 with its traceback (Django's default sends it only to ADMINS by mail).
        "django.request": {"handlers": ["tracebacks"], "level": "ERROR", "propagate": False},
    },
}

# --- Channels ---------------------------------------------------------------------------
# Set: web processes hand generations to `runworker model-worker` processes over Redis.
# Unset: the engine runs inside the web process (the embedded default).
REDIS_URL = env_url("REDIS_URL", ("redis", "rediss", "unix"))
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Pub/sub, not lists: bench/channel_layers.py measured it about 10x faster for this
            # traffic. Every message goes to a process-specific channel (a worker's own, or a
            # web process's reply channel), so pub/sub's fan-out never duplicates work; what
            # lists would add (capacity, expiry) the worker does itself: one send in flight per
            # web process, the next message gathering the tokens made while it waits
            # (streaming/fleet/outbox.py, Outbox).
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# A worker announces itself this often; silent for WORKER_TIMEOUT_S, it is presumed dead and
# its answers go on on another worker (`worker_unavailable` when none is left). Web processes
# announce themselves to the workers as often: one silent for WORKER_TIMEOUT_S has its
# generations aborted. Keep the timeout well above 1 s: channels_redis' pub/sub reader pauses a
# second after any connection error.
WORKER_HEARTBEAT_S = env_float("WORKER_HEARTBEAT_S", 1.0, minimum=0.05)
WORKER_TIMEOUT_S = env_float("WORKER_TIMEOUT_S", 3.0, minimum=0.1)
# SIGTERM: a worker takes no new work, lets what it runs finish this long, then hands the rest
# over to other workers (a rolling restart loses nothing); Ctrl-C hands over at once.
WORKER_DRAIN_S = env_float("WORKER_DRAIN_S", 10.0)
# A model worker's models, by their names in STREAMING_MODELS' file (unset: the default one).
WORKER_MODELS = env_str("WORKER_MODELS", "")
# A conversation's turns go to the worker holding its prefix (off: the least loaded, always).
WORKER_AFFINITY = env_bool("WORKER_AFFINITY", True)

# --- Streaming (docs/api.md, "Settings") ------------------------------------------------
# The engines STREAMING_ENGINE may name, by dotted path (as Channels names a layer's backend).
STREAMING_ENGINES = {
    "deterministic": "streaming.engines.deterministic.DeterministicEngine",
    "transformers": "streaming.engines.transformers.TransformersEngine",
    "openai": "streaming.engines.remote.RemoteEngine",
}
STREAMING_ENGINE = env_str("STREAMING_ENGINE", "deterministic", choices=tuple(STREAMING_ENGINES))
STREAMING_MODEL = env_str("STREAMING_MODEL", "")  # "" = the packaged SmolLM2-135M-Instruct
# A TOML file listing several models by the name clients send as `model` (docs/models.md);
# "" = one model, the one the settings above configure.
STREAMING_MODELS = env_str("STREAMING_MODELS", "")
# The transformers engine's weights: `auto` = bf16 on a GPU and on a CPU with native BF16
# (AVX-512 BF16, AMX), fp32 elsewhere (streaming/engines/precision.py).
STREAMING_DTYPE = env_str("STREAMING_DTYPE", "auto", choices=("auto", "float32", "bfloat16"))
# On a CPU, the transformers engine's linear layers with their weights laid out once for oneDNN
# (twice as fast a decode step); `off` keeps them as loaded (streaming/engines/packed_linear.py).
STREAMING_PACKED_WEIGHTS = env_str("STREAMING_PACKED_WEIGHTS", "auto", choices=("auto", "off"))
# Where the transformers engine keeps the dequantized GGUF, so a second start skips the ~15 s
# conversion. Delete the folder to rebuild it.
STREAMING_MODEL_CACHE = env_str("STREAMING_MODEL_CACHE", str(BASE_DIR / ".cache" / "models"))
# Tokens of context (prompt + answer) per sequence; 0 = the engine's default (2048 on CPU, the
# model's own window on a GPU). It also sizes the KV cache, hence the memory the engine takes.
STREAMING_CONTEXT_TOKENS = env_int("STREAMING_CONTEXT_TOKENS", 0)
# The `openai` engine's upstream: its base URL (ending in /v1, as vLLM's and llama.cpp's do)
# and model. Without a model the upstream's own is taken at start-up, when it serves just one.
STREAMING_REMOTE_URL = env_url("STREAMING_REMOTE_URL", ("http", "https"))  # openai: required
STREAMING_REMOTE_MODEL = env_str("STREAMING_REMOTE_MODEL", "")
STREAMING_REMOTE_KEY = env_str("STREAMING_REMOTE_KEY", "")
# What a router in front of the upstream's replicas is told (the conversation's key, the person,
# their priority): a preset (vllm-router, llm-d, dynamo, sglang) or a JSON table of header names.
STREAMING_REMOTE_ROUTING = env_str("STREAMING_REMOTE_ROUTING", "")
# Several replicas of the upstream without a router: their base URLs, comma-separated (our own
# affinity picks one per conversation; STREAMING_REMOTE_URL then unset or the first of them).
STREAMING_REMOTE_URLS = env_str("STREAMING_REMOTE_URLS", "")
# Connecting to the upstream fails fast; a read waits this long for its next byte (0 = forever).
STREAMING_REMOTE_CONNECT_TIMEOUT_S = env_float(
    "STREAMING_REMOTE_CONNECT_TIMEOUT_S", 5.0, minimum=0.0, exclusive=True
)
STREAMING_REMOTE_READ_TIMEOUT_S = env_float("STREAMING_REMOTE_READ_TIMEOUT_S", 300.0)
DETERMINISTIC_TTFT_MS = env_float("DETERMINISTIC_TTFT_MS", 200.0)
DETERMINISTIC_TPS = env_float("DETERMINISTIC_TPS", 20.0)  # 0 = unpaced (benchmarks)
# > 0: a GPU batch's shape: every running answer advances one token per step of this many ms,
# all together (DETERMINISTIC_TPS is then unused).
DETERMINISTIC_STEP_MS = env_float("DETERMINISTIC_STEP_MS", 0.0)
# Length of every answer before max_tokens cuts it (0 = 48–400 tokens, drawn from the seed).
DETERMINISTIC_ANSWER_TOKENS = env_int("DETERMINISTIC_ANSWER_TOKENS", 0)
STREAM_HEARTBEAT_S = env_float("STREAM_HEARTBEAT_S", 15.0, minimum=0.0, exclusive=True)
# The read timeout of the proxy in front (nginx's proxy_read_timeout, 60 s by default): an idle
# stream needs a ping before it, and `check --deploy` compares the two (docs/proxies.md).
STREAM_PROXY_READ_TIMEOUT_S = env_float(
    "STREAM_PROXY_READ_TIMEOUT_S", 60.0, minimum=0.0, exclusive=True
)
# Sequences batched together (0 = the engine's own default) and how many more may wait.
STREAMING_MAX_BATCH = env_int("STREAMING_MAX_BATCH", 0)
STREAMING_MAX_QUEUE = env_int("STREAMING_MAX_QUEUE", 64)
# Who waits for a batch slot goes next: arrival order (fifo), the person with the fewest tokens
# in flight (fair), or that and pausing a sequence where the engine can (preempt).
STREAMING_SCHEDULING = env_str("STREAMING_SCHEDULING", "preempt", choices=SCHEDULINGS)
# Seconds an answer outlives its last reader, for a reader to come back (0: abort at once).
STREAM_RESUME_GRACE_S = env_float("STREAM_RESUME_GRACE_S", 0.0)
# Memory an answer's log may hold (its text plus 8 bytes per event); past it, it can no longer
# be rejoined or read again, and its last reader leaving aborts it at once (docs/resume.md).
STREAM_RESUME_MAX_BYTES = env_int("STREAM_RESUME_MAX_BYTES", 256 * 1024, minimum=1024)
# Seconds a finished answer stays readable from its log (0: freed at its end), and at most how
# many finished answers this process keeps, oldest freed first.
STREAM_RETENTION_S = env_float("STREAM_RETENTION_S", 300.0)
STREAM_RETAINED_MAX = env_int("STREAM_RETAINED_MAX", 1000, minimum=1)
# The Responses API's `background` generations run with nobody reading: at most this many at
# once in all (fleet-wide with REDIS_URL), and per client (key, user or address).
RESPONSES_BACKGROUND_MAX = env_int("RESPONSES_BACKGROUND_MAX", 32, minimum=0)
RESPONSES_BACKGROUND_PER_CLIENT = env_int("RESPONSES_BACKGROUND_PER_CLIENT", 4, minimum=0)

# Input limits, refused before any stream starts.
STREAM_MAX_BODY_BYTES = env_int("STREAM_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
STREAM_MAX_PROMPT_CHARS = env_int("STREAM_MAX_PROMPT_CHARS", 32_000, minimum=1)
STREAM_MAX_MESSAGES = env_int("STREAM_MAX_MESSAGES", 256, minimum=1)
STREAM_DEFAULT_MAX_TOKENS = env_int("STREAM_DEFAULT_MAX_TOKENS", 256, minimum=1)
STREAM_MAX_TOKENS_LIMIT = env_int("STREAM_MAX_TOKENS_LIMIT", 4096, minimum=1)  # >= the default
# A generation created by POST /api/generations but never streamed is forgotten after this.
STREAM_UNCLAIMED_TTL_S = env_float("STREAM_UNCLAIMED_TTL_S", 300.0, minimum=1.0)
STREAM_MAX_PENDING = env_int("STREAM_MAX_PENDING", 10_000, minimum=1)
# A client's share of them while created and not streamed yet (429 past it; 0: none): one client
# creating answers it never reads cannot fill the process for everyone.
STREAM_MAX_PENDING_PER_CLIENT = env_int("STREAM_MAX_PENDING_PER_CLIENT", 64, minimum=0)

# --- Conversations (docs/conversations.md) ------------------------------------------------
# Per owner: conversations kept, items in one (every branch counted), characters in one item.
CONVERSATIONS_MAX_PER_OWNER = env_int("CONVERSATIONS_MAX_PER_OWNER", 10_000, minimum=1)
CONVERSATIONS_MAX_ITEMS = env_int("CONVERSATIONS_MAX_ITEMS", 5_000, minimum=2)
CONVERSATIONS_MAX_ITEM_CHARS = env_int("CONVERSATIONS_MAX_ITEM_CHARS", 32_000, minimum=1)
# Characters one conversation holds (every branch, answers once ended) and all of one owner's
# do: what one person may store, whatever the number of writes (docs/security.md).
CONVERSATIONS_MAX_CHARS = env_int("CONVERSATIONS_MAX_CHARS", 2_000_000, minimum=1)
CONVERSATIONS_MAX_CHARS_PER_OWNER = env_int(
    "CONVERSATIONS_MAX_CHARS_PER_OWNER", 50_000_000, minimum=1
)
# Writes that start no answer (a new conversation, items added, a title, a deletion…) per
# client and minute (429 past it; 0: none); those that start one count in STREAM_RATE_PER_MIN.
CONVERSATIONS_WRITES_PER_MIN = env_int("CONVERSATIONS_WRITES_PER_MIN", 120, minimum=0)
# A running answer's text is written to its item this often, so a crash keeps what was made.
CONVERSATIONS_CHECKPOINT_S = env_float("CONVERSATIONS_CHECKPOINT_S", 2.0, minimum=0.1)

# --- Files (docs/files.md) ----------------------------------------------------------------
# One upload's bytes at most (413 past it), and all of one owner's files' together (409).
FILES_MAX_BYTES = env_int("FILES_MAX_BYTES", 32 * 1024 * 1024, minimum=1024)
FILES_MAX_BYTES_PER_OWNER = env_int("FILES_MAX_BYTES_PER_OWNER", 512 * 1024 * 1024, minimum=1024)
# Where their bytes are kept: a Django storage backend (the file system in FILES_ROOT, or, say,
# django-storages' "storages.backends.s3.S3Storage" with its options as JSON), no code needed.
FILES_STORAGE = env_str("FILES_STORAGE", "django.core.files.storage.FileSystemStorage")
FILES_STORAGE_OPTIONS = env_json_object("FILES_STORAGE_OPTIONS")
FILES_ROOT = env_str("FILES_ROOT", str(BASE_DIR / "files"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "files": {
        "BACKEND": FILES_STORAGE,
        "OPTIONS": FILES_STORAGE_OPTIONS
        or (
            {"location": FILES_ROOT}
            if FILES_STORAGE == "django.core.files.storage.FileSystemStorage"
            else {}
        ),
    },
}

# --- Metrics (docs/metrics.md) -----------------------------------------------------------
# Several server processes: a shared, emptied-at-start directory where each process writes its
# values and /metrics sums them. prometheus-client reads the variable itself; this is for us.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
# Where sign-in is required (STREAM_REQUIRE_AUTH), /metrics answers these networks (a scraper
# on this host), or a request with an API key; it names every model, restricted ones too.
METRICS_ALLOWED_ADDRESSES = env_str("METRICS_ALLOWED_ADDRESSES", "127.0.0.0/8,::1")

DATA_UPLOAD_MAX_MEMORY_SIZE = STREAM_MAX_BODY_BYTES

# --- Hardening (docs/security.md) ---------------------------------------------------------
# Refused before any stream starts (0 = no limit): requests a minute and open streams per
# client (429 with Retry-After), streams in flight on the whole service (503). A client is an
# API key, a logged-in user, or the peer address when anonymous. Shared through Redis when
# REDIS_URL is set.
STREAM_RATE_PER_MIN = env_int("STREAM_RATE_PER_MIN", 600)
STREAM_MAX_STREAMS_PER_CLIENT = env_int("STREAM_MAX_STREAMS_PER_CLIENT", 16)
STREAM_MAX_IN_FLIGHT = env_int("STREAM_MAX_IN_FLIGHT", 512)
# With Redis, a stream's slot lapses this long after its process stopped renewing it (killed).
STREAM_LEASE_TTL_S = env_float("STREAM_LEASE_TTL_S", 30.0, minimum=0.3)
# A reader that has taken no bytes for this long while some wait for it (a suspended laptop, a
# frozen tab) is treated as disconnected and its generation aborted
# (streaming/http/stalled_readers.py).
STREAM_SEND_TIMEOUT_S = env_float("STREAM_SEND_TIMEOUT_S", 30.0, minimum=0.0, exclusive=True)
# How long a request may take to arrive (0 = no bound): a connection that owes its request's
# head this long (sent nothing, or a byte at a time) is closed, and a body still arriving this
# long after its head is refused with 408 (streaming/http/arrivals.py, streaming/asgi.py).
STREAM_REQUEST_TIMEOUT_S = env_float("STREAM_REQUEST_TIMEOUT_S", 20.0)
# On SIGTERM: open streams end with `server_shutdown`, then this long at most for their last
# frames and log rows before the server closes its connections.
STREAM_SHUTDOWN_GRACE_S = env_float("STREAM_SHUTDOWN_GRACE_S", 5.0)
# Who may use it: `auto` = open only in the loopback default (loopback hosts and peers, no
# proxy); otherwise API keys or a login (streaming/http/auth.py).
STREAM_REQUIRE_AUTH = env_str("STREAM_REQUIRE_AUTH", "auto", choices=("auto", "true", "false"))
# The chat page's own sign-in (frontend/views.py); the admin keeps its own at /admin/login/.
LOGIN_URL = "/login/"
# Failed sign-ins (both pages) counted per fixed window: past SIGN_IN_MAX_FAILURES for one
# account from one address, or SIGN_IN_MAX_FAILURES_PER_ADDRESS from one address whatever the
# account, the next attempts are refused (429) without checking the password until the window
# ends (0: no limit). Counted in the database, so every web process shares them.
SIGN_IN_MAX_FAILURES = env_int("SIGN_IN_MAX_FAILURES", 5)
SIGN_IN_MAX_FAILURES_PER_ADDRESS = env_int("SIGN_IN_MAX_FAILURES_PER_ADDRESS", 50)
SIGN_IN_WINDOW_S = env_int("SIGN_IN_WINDOW_S", 900, minimum=1)
# What the audit log keeps (streaming/http/audit.py), in days: older rows go at `prune_audit`.
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 365, minimum=1)

# --- Sign-in with the team's identity provider (docs/sso.md) ------------------------------
# OpenID Connect beside the password form, on when OIDC_ISSUER is set; its discovery document
# is read when a web process starts (streaming/http/identity_provider.py).
OIDC_ISSUER = env_url("OIDC_ISSUER", ("https", "http"))
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your organization")  # "Sign in with …"
# A first sign-in's account: `active`, or `pending` until an administrator lets them in.
OIDC_NEW_USERS = env_str("OIDC_NEW_USERS", "active", choices=("active", "pending"))
# The claim listing the person's groups ("": groups kept by hand), set at every sign-in; a
# group's name here where it differs from the provider's ({"provider's": "ours"}); staff and
# superusers from these groups only when named.
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "")
OIDC_GROUP_NAMES = env_json_object("OIDC_GROUP_NAMES")
OIDC_STAFF_GROUPS = env_list("OIDC_STAFF_GROUPS", [])
OIDC_SUPERUSER_GROUPS = env_list("OIDC_SUPERUSER_GROUPS", [])
# How far the provider's clock may be from ours when an ID token's times are checked.
OIDC_CLOCK_SKEW_S = env_int("OIDC_CLOCK_SKEW_S", 60)
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",  # the password form and the admin's
    "streaming.http.identity.ProviderBackend",  # the provider's callback only
]

# What the log keeps of a prompt: `none`, `truncated` (its first PROMPT_LOG_CHARS characters) or
# `full` (bounded anyway by STREAM_MAX_PROMPT_CHARS).
PROMPT_LOGGING = env_str("PROMPT_LOGGING", "truncated", choices=("none", "truncated", "full"))
PROMPT_LOG_CHARS = env_int("PROMPT_LOG_CHARS", 200)

# --- Checked together -----------------------------------------------------------------------
# Here, on import, so that every command and server (runserver's autoreloader too) stops before
# it starts; the code reads them as the typed objects this builds (streaming/core/config.py).
try:
    check_models(Config.from_settings(sys.modules[__name__]))  # STREAMING_MODELS' file too
except ConfigError as error:
    raise ImproperlyConfigured(str(error)) from None
