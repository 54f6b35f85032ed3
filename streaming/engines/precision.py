"""The transformers engine's weight precision: bf16 where the hardware computes it natively, fp32
elsewhere (`STREAMING_DTYPE`, docs/model.md).

A GPU always takes bf16 (half the memory, twice the speed). A CPU takes it only when it has
native BF16 instructions (AVX-512 BF16 or AMX): without them torch emulates bf16 matmuls and the
model runs slower than in fp32. Measured on this project's 2-core AVX-512 BF16 machine
(bench/cpu_decode_bench.py): about 2x fp32's tokens/s at 8 streams, with the same answers right
(bench/quality_bench.py --dtype).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Precision = Literal["auto", "float32", "bfloat16"]
CPUINFO = Path("/proc/cpuinfo")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # as Linux names them in /proc/cpuinfo


def cpu_bf16_flag(cpuinfo: Path = CPUINFO) -> str | None:
    """The CPU's native BF16 instruction set as /proc/cpuinfo names it, or None (none, or not
    Linux: fp32, the safe side)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")),
        [],
    )
    return next((flag for flag in NATIVE_BF16_FLAGS if flag in flags), None)


def choose(setting: Precision, device: str, *, cpu_flag: str | None = None) -> tuple[str, str]:
    """The dtype's name (`float32` or `bfloat16`) for `device`, and why, for the log line."""
    if setting != "auto":
        return setting, f"STREAMING_DTYPE={setting}"
    if device.startswith("cuda"):
        return "bfloat16", "a GPU"
    if cpu_flag:
        return "bfloat16", f"this CPU computes bf16 natively ({cpu_flag})"
    return "float32", "this CPU has no native bf16 (AVX-512 BF16 or AMX): fp32 is faster"
