"""What a process is made of (streaming/deployment.py): built once, in order, each part handed
what was chosen for it; one process alone, a web process of a fleet, and a model worker."""

from __future__ import annotations

import pytest

from streaming import deployment
from streaming.core import runtime
from streaming.core.runtime import NotBuilt
from streaming.engines.deterministic import DeterministicEngine
from streaming.engines.models import MODELS
from streaming.fleet import store
from streaming.fleet.engine import ChannelLayerEngine
from streaming.fleet.sharing import FleetSharing
from streaming.fleet.whereabouts import FleetWhereabouts
from streaming.generations.registry import REGISTRY
from streaming.generations.sharing import ALONE
from streaming.generations.whereabouts import HERE, WHEREABOUTS
from streaming.http.identity_provider import PROVIDER
from streaming.usage.counters import COUNTS, DatabaseCounts
from streaming.usage.limits import LIMITS, LocalLimits, RedisLimits
from streaming.usage.redis_counters import RedisCounts

TWO = """
[[models]]
name = "small"
engine = "deterministic"

[[models]]
name = "big"
engine = "deterministic"
default = true
"""


@pytest.fixture
def two_models(settings, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(TWO)
    settings.STREAMING_MODELS = str(path)
    return settings


def test_one_process_keeps_its_answers_and_counts_here():
    parts = deployment.build()
    assert parts.names() == [
        "settings",
        "redis outage",
        "mcp servers",
        "approvals",
        "models",
        "engine starts",
        "whereabouts",
        "budget counters",
        "budget settling",
        "limits",
        "registry",
        "metrics",
        "log writer",
        "linked answers",
        "admitting",
        "open streams",
        "requests in flight",
        "stalled-reader watch",
        "serving",
        "identity provider",
    ]
    assert parts.get(WHEREABOUTS) is HERE and HERE.sharing is ALONE
    assert parts.get(PROVIDER) is None  # no OIDC_ISSUER: sign-in by password only
    assert isinstance(parts.get(COUNTS), DatabaseCounts)
    assert isinstance(parts.get(LIMITS), LocalLimits)
    assert parts.built(store.CLIENT) is None  # nothing asks Redis
    (model,) = parts.get(MODELS)
    assert isinstance(model.engine, DeterministicEngine) and model.default and model.key == ""


def test_a_fleets_web_process_has_one_client_every_model_and_its_answers_go_through(
    two_models,
):
    two_models.REDIS_URL = "redis://127.0.0.1:1/0"  # never reached: a client connects when used
    parts = deployment.build()
    models = parts.get(MODELS)
    assert [(m.name, m.key, m.default) for m in models] == [
        ("small", "small", False),
        ("big", "big", True),
    ]
    engines = models.engines()
    assert all(isinstance(engine, ChannelLayerEngine) for engine in engines)
    client = engines[0].client
    assert engines[1].client is client  # one reply channel, one presence, for every model
    where = parts.get(WHEREABOUTS)
    assert isinstance(where, FleetWhereabouts) and where.client is client
    assert isinstance(where.sharing, FleetSharing) and where.sharing.client is client
    assert where.replicas.client is client and where.replicas.models is models
    assert isinstance(parts.get(COUNTS), RedisCounts)
    limits = parts.get(LIMITS)
    assert isinstance(limits, RedisLimits) and limits.counts.client is parts.get(store.CLIENT)


def test_a_model_worker_is_its_models_engines_here(two_models):
    two_models.REDIS_URL = "redis://127.0.0.1:1/0"
    two_models.WORKER_MODELS = "small"
    parts = deployment.build(worker=True)
    (model,) = parts.get(MODELS)
    assert isinstance(model.engine, DeterministicEngine) and model.engine.model == "small"
    with pytest.raises(NotBuilt, match="registry"):
        parts.get(REGISTRY)


def test_a_process_with_none_installed_builds_its_deployment_when_first_asked():
    previous = runtime.install(None)
    try:
        assert isinstance(MODELS.get().default.engine, DeterministicEngine)
        assert runtime.installed() is not None and runtime.installed() is not previous
    finally:
        runtime.install(previous)
