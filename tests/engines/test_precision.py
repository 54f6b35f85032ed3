"""The weights' precision: bf16 on a GPU and on a CPU that computes it natively, fp32 elsewhere,
a setting that names one taken as it is."""

from __future__ import annotations

import pytest

from streaming.engines import precision

FLAGS = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {extra}\nbogomips\t: 4800\n"


@pytest.mark.parametrize(
    ("extra", "found"),
    [
        ("avx512_vnni avx512_bf16", "avx512_bf16"),
        ("amx_tile amx_bf16", "amx_bf16"),
        ("avx512_vnni", None),
    ],
)
def test_the_cpus_native_bf16_is_read_from_its_flags(tmp_path, extra, found):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(FLAGS.format(extra=extra))
    assert precision.cpu_bf16_flag(cpuinfo) == found


def test_no_cpuinfo_means_fp32s_safe_side(tmp_path):
    assert precision.cpu_bf16_flag(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("setting", "device", "flag", "chosen"),
    [
        ("auto", "cuda:0", None, "bfloat16"),
        ("auto", "cpu", "avx512_bf16", "bfloat16"),
        ("auto", "cpu", None, "float32"),
        ("float32", "cuda", None, "float32"),
        ("bfloat16", "cpu", None, "bfloat16"),
    ],
)
def test_auto_takes_bf16_only_where_it_is_native(setting, device, flag, chosen):
    name, why = precision.choose(setting, device, cpu_flag=flag)
    assert name == chosen
    assert why  # the log line says why
