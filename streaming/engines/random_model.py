"""Models with random weights built from a shape: `STREAMING_MODEL=random:<shape>`.

Speed does not depend on the weights, and a GPU machine without network cannot get them (the
packaged GGUF alone is ~98 MB), so the GPU benchmark builds the model from a config, on the
device: the SmolLM2-135M shape, a ~1B and an 8B Llama shape, and a tiny one for the CPU tests.
The vocabulary stays the packaged tokenizer's 49,152, so every generated id decodes; the
tokenizer is read from `<STREAMING_MODEL_CACHE>/tokenizer` (which `make gpu-carry` writes), or
else from the packaged GGUF, and saved there for next time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger("streaming.engines.transformers")

PREFIX = "random:"
VOCABULARY = 49_152  # SmolLM2's tokenizer
# Llama-architecture shapes: hidden size, MLP size, layers, attention heads, KV heads, window,
# and whether the output layer shares the embedding's weights.
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    ),
    "smollm2-135m": dict(
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "llama-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    ),
}


def shape_of(model: str) -> str | None:
    """The shape a `STREAMING_MODEL` value names (`random:<shape>`), or None for a real model.

    Raises ValueError for an unknown shape, naming the known ones.
    """
    if not model.startswith(PREFIX):
        return None
    shape = model.removeprefix(PREFIX)
    if shape not in SHAPES:
        raise ValueError(
            f"STREAMING_MODEL={model!r}: the shapes are "
            f"{', '.join(PREFIX + name for name in SHAPES)}."
        )
    return shape


def load(
    shape: str,
    *,
    cache_root: Path | None,
    device: str,
    dtype: Any,
    attention: str,
    packaged: Callable[[], Path],
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model of `shape` with random weights, made on `device`, and the tokenizer
    (`packaged`: where the packaged GGUF is, when the cache has no tokenizer yet)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    tokenizer = tokenizer_of(cache_root, packaged)
    config = LlamaConfig(
        vocab_size=VOCABULARY,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **SHAPES[shape],
    )
    started = time.perf_counter()
    with torch.device(device):  # made where it runs: no host copy of an 8B model
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attention)
    model.eval()
    logger.info(
        "Random %s weights (%.2f B parameters) made in %.1f s on %s",
        shape,
        sum(p.numel() for p in model.parameters()) / 1e9,
        time.perf_counter() - started,
        device,
    )
    return model, tokenizer


def tokenizer_of(cache_root: Path | None, packaged: Callable[[], Path]) -> PreTrainedTokenizerBase:
    """The tokenizer in `<cache_root>/tokenizer`, or else the packaged GGUF's, saved there."""
    from transformers import AutoTokenizer

    folder = cache_root / "tokenizer" if cache_root else None
    if folder is not None and (folder / "tokenizer_config.json").exists():
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    gguf = packaged()
    tokenizer = AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, local_files_only=True
    )
    if folder is not None:
        tokenizer.save_pretrained(str(folder))  # a few MB: what a GPU machine gets carried
    return tokenizer
