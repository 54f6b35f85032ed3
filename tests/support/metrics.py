"""Reading a live server's `/metrics`."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.live import LiveServer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: LiveServer) -> Samples:
    """Every sample of one scrape, keyed by name and labels."""
    response = server.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)
