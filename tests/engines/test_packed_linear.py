"""Linear layers packed for oneDNN compute what nn.Linear computes; the engine packs its model's
on a CPU unless told not to, and says which in its log; torch set-up runs on a passing thread."""

from __future__ import annotations

import logging
import threading

import pytest
from django.conf import settings

torch = pytest.importorskip("torch")

from streaming.engines import packed_linear  # noqa: E402
from streaming.engines.background import in_passing_thread  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 64), (8, 64), (2, 3, 64)])
@pytest.mark.parametrize("bias", [False, True])
def test_a_packed_linear_computes_what_the_linear_computes(dtype, shape, bias):
    if why := packed_linear.why_not("cpu", dtype):
        pytest.skip(why)  # bfloat16 on a CPU without AVX-512: the loader leaves it unpacked
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=bias).to(dtype)
    x = torch.randn(*shape, dtype=dtype)
    with torch.inference_mode():
        expected = linear(x)
        got = packed_linear.PackedLinear(linear)(x)
    assert got.shape == expected.shape and got.dtype == dtype
    # bf16 keeps 8 bits of mantissa: the two may round a product's last bit differently
    tolerance = (
        {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    )
    torch.testing.assert_close(got, expected, **tolerance)


class Scaled(torch.nn.Linear):
    """A Linear subclass computing something else: packing must leave it alone."""

    def forward(self, x):
        return super().forward(x) * 2


def test_packing_replaces_every_plain_linear_and_nothing_else():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False), Scaled(32, 8)),
    )
    x = torch.randn(4, 16)
    with torch.inference_mode():
        before = model(x)
        assert packed_linear.pack_linears(model) == 2
        after = model(x)
    kinds = [type(m).__name__ for m in model.modules()]
    assert kinds.count("PackedLinear") == 2 and "Scaled" in kinds and "Linear" not in kinds
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("device", "dtype", "reason"),
    [
        ("cpu", torch.float32, None),
        ("cuda:0", torch.bfloat16, "cuda:0 has its own kernels"),
        ("cpu", torch.float16, "oneDNN packs float32 and bfloat16, not torch.float16"),
    ],
)
def test_where_weights_are_packed(device, dtype, reason):
    assert packed_linear.why_not(device, dtype) == reason


def test_bfloat16_is_packed_where_the_cpu_computes_it():
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(4, 4, dtype=torch.bfloat16))
    except RuntimeError:
        assert "this CPU has no oneDNN torch.bfloat16" in packed_linear.why_not(
            "cpu", torch.bfloat16
        )
    else:
        assert packed_linear.why_not("cpu", torch.bfloat16) is None


def test_a_passing_thread_returns_the_result_and_ends():
    threads = []

    def work():
        threads.append(threading.current_thread())
        return 42

    assert in_passing_thread(work) == 42
    assert threads[0] is not threading.current_thread()
    assert not threads[0].is_alive()


def test_a_passing_thread_raises_what_the_work_raised():
    def fail():
        raise ValueError("no such model")

    with pytest.raises(ValueError, match="no such model"):
        in_passing_thread(fail)


@pytest.mark.model
@pytest.mark.parametrize(("setting", "packed"), [("auto", True), ("off", False)])
def test_the_engine_packs_its_model_on_a_cpu_unless_told_not_to(caplog, setting, packed):
    pytest.importorskip("transformers")
    from streaming.engines.transformers import TransformersEngine

    engine = TransformersEngine(
        cache_dir=settings.STREAMING_MODEL_CACHE, max_batch=2, device="cpu", packed_weights=setting
    )
    with caplog.at_level(logging.INFO, logger="streaming.engines.transformers"):
        engine.load()
    try:
        kinds = {type(m).__name__ for m in engine.loaded.model.modules()}
        assert ("PackedLinear" in kinds) is packed and ("Linear" in kinds) is not packed
        said = "Linear layers packed for oneDNN" if packed else "not packed): STREAMING_PACKED"
        assert said in caplog.text
    finally:
        engine.close()
