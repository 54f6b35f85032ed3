"""The GPU benchmark, run on the CPU with a tiny random shape so that it cannot rot: every
figure it prints is there, an abort leaves within a step, and the served path answers."""

from __future__ import annotations

import json

import pytest

from bench import gpu_bench
from streaming.engines import model_source, random_model

pytestmark = pytest.mark.live


def test_the_benchmark_prints_and_writes_every_figure(tmp_path):
    out = tmp_path / "results"
    (result,) = gpu_bench.main(
        [
            "--device",
            "cpu",
            "--shapes",
            "tiny",
            "--streams",
            "1,2",
            "--tokens",
            "6",
            "--abort-streams",
            "2",
            "--served-streams",
            "2",
            "--out",
            str(out),
        ]
    )
    assert json.loads((out / "results.json").read_text()) == [result]
    assert [(r["streams"], r["arrival"]) for r in result["rows"]] == [
        (1, "together"),
        (1, "poisson 50/s"),
        (2, "together"),
        (2, "poisson 50/s"),
    ]
    for row in result["rows"]:
        assert row["tokens"] == row["streams"] * 6 and row["ttft_p99_ms"] > 0, row
    assert result["weight_bytes"] > 0 and result["bandwidth_bound_ms"] > 0
    assert result["one_generate_at_a_time"]["tokens_per_s"] > 0
    assert result["abort"]["within_one_step"], result["abort"]
    assert result["served"]["failed"] == 0 and result["served"]["tokens_per_s"] > 0
    assert "### tiny" in (out / "results.md").read_text()


def test_a_random_shape_is_named_in_the_model_setting():
    assert model_source.resolve("random:llama-8b").random_shape == "llama-8b"
    assert model_source.resolve("random:llama-8b").name == "random-llama-8b"
    with pytest.raises(ValueError, match="random:tiny"):
        random_model.shape_of("random:llama-70b")
    # Every shape keeps the packaged tokenizer's vocabulary, so that every id decodes.
    assert all("vocab_size" not in shape for shape in random_model.SHAPES.values())


def test_on_a_gpu_without_flash_attention_the_engine_asks_for_sdpa():
    # The CUDA branch of the attention choice, as far as a CPU can take it: flash-attention is
    # not installed here, so a GPU would get SDPA.
    assert model_source._attention("cuda") == "sdpa"
