"""One deployment: what a process is made of, built once at start-up, in order.

`build` reads as the list. The settings; with REDIS_URL, the one Redis client and the notice of
its outages. The MCP servers its models may call. The models, name → engine, the default one an
entry like the others: engines in this process, or, for a web process of a fleet, engines over
one client of the model workers.
Where answers live: this process alone (`HERE`), or the fleet (`FleetWhereabouts`, over that
client). Where shared counts live: the database, or Redis; and usage's parts that count on them
(budget counters and their settling, the limits). Then what a server process keeps while it
runs. Nothing asks "fleet or not?" later: each part is handed what was chosen here.

A model worker (`runworker model-worker`, `worker=True`) is made of less: the engines of the
models WORKER_MODELS names, in this process, and Redis. A test builds a deployment the same
way, smaller (`engines`: its own, in this process) and installs it (core/runtime.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from streaming.conversations.answers import LINKED, LinkedAnswers
from streaming.core import config
from streaming.core.config import CONFIG, Config
from streaming.core.models_file import ModelSpec, mcp_servers
from streaming.core.runtime import Runtime
from streaming.engines import build_engine
from streaming.engines.base import Engine
from streaming.engines.models import MODELS, Model, Models, models_of
from streaming.engines.startup import STARTS, EngineStarts
from streaming.fleet import store
from streaming.fleet.answer_log import RedisLog
from streaming.fleet.approvals import RedisApprovals
from streaming.fleet.client import FleetClient
from streaming.fleet.engine import ChannelLayerEngine
from streaming.fleet.outage import OUTAGE, RedisOutage
from streaming.fleet.whereabouts import FleetWhereabouts
from streaming.generations.registry import REGISTRY, Registry
from streaming.generations.whereabouts import HERE, WHEREABOUTS
from streaming.http.admission import ADMITTING, Admitting
from streaming.http.arrivals import IN_FLIGHT
from streaming.http.event_stream import OPEN_STREAMS, OpenStreams
from streaming.http.identity_provider import PROVIDER, discover
from streaming.http.stalled_readers import WATCHING, Watching
from streaming.lifecycle import SERVING, Serving
from streaming.ops.log_writer import WRITER, LogWriter
from streaming.ops.metrics import METRICS, Metrics
from streaming.runs.approvals import APPROVALS, Approvals, LocalApprovals
from streaming.runs.loop import RunEngine
from streaming.runs.servers import MCP_SERVERS, McpServers
from streaming.usage.counters import COUNTS, SETTLING, DatabaseCounts, Settling
from streaming.usage.limits import LIMITS, LocalLimits, RedisLimits
from streaming.usage.redis_counters import RedisCounts
from streaming.usage.redis_scripts import RedisScripts


def build(
    settings: Config | None = None, *, worker: bool = False, engines: Sequence[Engine] = ()
) -> Runtime:
    """A process's parts, each built once, in the order each needs those before it: a web
    process's, or with `worker` a model worker's; `engines`: a test's own, served in this
    process in place of the settings' models."""
    settings = settings or config.from_django()
    parts = Runtime()
    parts.put(CONFIG, settings)

    # Redis, where REDIS_URL names one: one client, its outages said once.
    url = settings.fleet.redis_url
    redis = parts.put(store.CLIENT, store.connect(url)) if url else None
    outage = parts.put(OUTAGE, RedisOutage())

    # The MCP servers of the models file, which its models with `tools = true` may call, and
    # where a person's decisions on their calls meet the runs: here, or through Redis.
    path = settings.engine.models_file
    servers = parts.put(MCP_SERVERS, McpServers(mcp_servers(path) if path else ()))
    approvals = parts.put(APPROVALS, LocalApprovals() if redis is None else RedisApprovals(redis))

    # The models: each with its engine, in this process or, for a web process of a fleet,
    # over this process's one client of the model workers (whose engines run the tools).
    in_fleet = redis is not None and not worker and not engines
    fleet = FleetClient.from_config(settings) if in_fleet else None
    models = parts.put(
        MODELS,
        _models(settings, worker=worker, fleet=fleet, engines=engines, tools=(servers, approvals)),
    )
    parts.put(STARTS, EngineStarts())
    if worker:
        return parts

    # Where answers live: here alone, or anywhere in the fleet (their logs in Redis).
    answers = HERE if fleet is None else FleetWhereabouts(fleet, models, RedisLog(lambda: redis))
    parts.put(WHEREABOUTS, answers)

    # Where the counts every web process shares live, and the usage counted on them.
    scripts = RedisScripts(redis, outage) if redis is not None else None
    counts = parts.put(COUNTS, DatabaseCounts() if scripts is None else RedisCounts(scripts))
    parts.put(SETTLING, Settling(counts))
    parts.put(LIMITS, LocalLimits() if scripts is None else RedisLimits(scripts))

    # What a server process keeps while it runs.
    parts.put(REGISTRY, Registry())
    parts.put(METRICS, Metrics())
    parts.put(WRITER, LogWriter())
    parts.put(LINKED, LinkedAnswers())
    parts.put(ADMITTING, Admitting())
    parts.put(OPEN_STREAMS, OpenStreams())
    parts.put(IN_FLIGHT, {})
    parts.put(WATCHING, Watching())
    parts.put(SERVING, Serving())

    # The identity provider people sign in with, where OIDC_ISSUER names one: read now.
    parts.put(PROVIDER, discover(settings.identity) if settings.identity.enabled else None)
    return parts


def _models(
    settings: Config,
    *,
    worker: bool,
    fleet: FleetClient | None,
    engines: Sequence[Engine],
    tools: tuple[McpServers, Approvals],
) -> Models:
    """The settings' models (a worker's: those WORKER_MODELS names), or a test's engines; a
    model in this process with `tools = true` runs its tools here."""
    if engines:
        return Models(
            [
                Model(engine, engine.served_as or "", default=index == 0)
                for index, engine in enumerate(engines)
            ]
        )
    if fleet is not None:
        return models_of(
            settings, lambda spec: ChannelLayerEngine(fleet, spec.name if spec else None)
        )
    names = settings.fleet.worker_model_names if worker else None

    def engine_for(spec: ModelSpec | None) -> Engine:
        engine = build_engine(settings, spec)
        return RunEngine(engine, *tools) if spec is not None and spec.tools else engine

    return models_of(settings, engine_for, names)
