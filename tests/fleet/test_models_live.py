"""Several models over real processes and Redis: a worker serves the models WORKER_MODELS names,
one channel each in one process; a web process routes each request to a worker of its model,
and a model no worker serves is a 503 naming it while the others serve (docs/models.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.live import running_fleet, start_worker, wait_until

pytestmark = pytest.mark.live

TWO_MODELS = Path(__file__).parent.parent / "support" / "two_models.toml"


def ask(web, model: str):
    return web.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
    )


def cards(web) -> dict[str, bool]:
    return {card["id"]: card["ready"] for card in web.get("/v1/models").json()["data"]}


def test_a_worker_serves_the_models_it_is_named_and_a_model_without_one_is_a_503(tmp_path):
    env = {"STREAMING_MODELS": str(TWO_MODELS), "WORKER_MODELS": "small"}
    with running_fleet(tmp_path, env, webs=1, workers=1) as fleet:
        (web,) = fleet.webs
        wait_until(lambda: cards(web) == {"small": True, "big": False}, 15)
        assert ask(web, "small").json()["model"] == "small"
        refused = ask(web, "big")
        assert refused.status_code == 503, refused.text
        assert "'big'" in refused.json()["error"]["message"]
        assert refused.headers["Retry-After"]

        # One process serving both: a channel and a heartbeat per model.
        both = start_worker(tmp_path, {**fleet.env, "WORKER_MODELS": "big,small"})
        fleet.workers.append(both)
        wait_until(lambda: cards(web) == {"small": True, "big": True}, 30)
        answer = ask(web, "big")
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "big"
        workers = web.stats()["models"]
        assert len(workers["big"]["workers"]) == 1 and len(workers["small"]["workers"]) == 2

        both.stop()  # SIGTERM stops both of its models' consumers, and the process
        assert both.process.returncode is not None
        wait_until(lambda: cards(web) == {"small": True, "big": False}, 15)
        assert "model worker stopping" in both.log()
