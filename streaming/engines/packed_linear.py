"""Linear layers with their weights laid out once for oneDNN, for decoding on a CPU.

`F.linear` on a CPU hands the weight to its matrix library as it lies in memory, and for the
few-row products of a decode step the library spends about as long bringing it into its own
blocked layout as multiplying; laid out in advance (`mkldnn._reorder_linear_weight`, what
PyTorch's compiler does when it freezes a model for CPU inference) the same product takes about
half the time (docs/model.md, "The CPU decode step"). Same products, rounded alike: the layout
changes, not the arithmetic.

Imports torch: the loader imports this module only when it loads a model.
"""

from __future__ import annotations

import torch
from torch import nn


def why_not(device: str, dtype: torch.dtype) -> str | None:
    """Why weights on `device` in `dtype` stay as they are, or None when they can be packed."""
    if not device.startswith("cpu"):
        return f"{device} has its own kernels"
    if not torch.backends.mkldnn.is_available():
        return "this PyTorch has no oneDNN"
    if dtype not in (torch.float32, torch.bfloat16):
        return f"oneDNN packs float32 and bfloat16, not {dtype}"
    try:  # oneDNN's bfloat16 needs AVX-512 (or AVX-NE-CONVERT): asked of the CPU by trying
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(1, 1, dtype=dtype))
    except RuntimeError as error:
        return f"this CPU has no oneDNN {dtype} ({str(error).splitlines()[0]})"
    return None


class PackedLinear(nn.Module):
    """`nn.Linear`'s product, its weight in oneDNN's layout (not a parameter: frozen)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # No batch-size hint: one layout serves the one-row decode step and the prefill alike.
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed"


def pack_linears(model: nn.Module) -> int:
    """Replace every `nn.Linear` in `model` by a PackedLinear; how many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:  # a subclass may compute something else
                setattr(parent, name, PackedLinear(child))
                replaced += 1
    return replaced
