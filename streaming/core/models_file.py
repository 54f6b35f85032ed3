"""A deployment's list of models (issue 40: `STREAMING_MODELS` names this file), read and checked
whole before anything serves: `[[models]]` tables, each a name clients send as `model`, the
engine that serves it and that engine's options.

```toml
[[models]]
name = "smollm2"
engine = "transformers"
model = "/models/SmolLM2-135M-Instruct"
default = true

[[models]]
name = "big"
engine = "openai"
url = "http://gpu-box:8000/v1"
upstream_model = "Qwen/Qwen3-32B"
key_env = "BIG_API_KEY"
groups = ["research"]
```

Every mistake is a `ConfigError` naming the file, the table (`models[1]`) and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.core.config import Config, ConfigError
from streaming.core.mcp_servers_file import McpServerSpec, check_variables, read_mcp_servers
from streaming.core.routing import RoutingError, parse_routing

NAME_MAX = 200  # characters of a model's name, as the log row keeps it
# Each engine's own options and their types; anything else in its table is a mistake.
ENGINE_OPTIONS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "deterministic": {"ttft_ms": (int, float), "tps": (int, float), "step_ms": (int, float)},
    "transformers": {"model": str, "dtype": str, "max_batch": int, "context_tokens": int},
    "openai": {
        "url": str,
        "urls": list,
        "upstream_model": str,
        "key_env": str,
        "routing": (str, dict),
    },
}
REQUIRED: dict[str, tuple[str, ...]] = {}  # (an upstream needs one of `url` and `urls`)
DTYPES = ("auto", "float32", "bfloat16")  # as STREAMING_DTYPE
COMMON = {"name", "engine", "groups", "default", "tools", "vision", "max_image_side"}
# The engines that can call the file's MCP servers (`tools = true`): an upstream by its function
# tools, the lab's by a scripted prompt; the packaged SmolLM2 is not trained to call tools.
TOOL_ENGINES = ("openai", "deterministic")
# The engines that can be shown images (`vision = true`): an upstream, as OpenAI's image parts.
VISION_ENGINES = ("openai",)
MAX_IMAGE_SIDE = 2048  # pixels: an image's longer side, by default (OpenAI's own largest)
IMAGE_SIDES = (64, 8192)  # the least and most `max_image_side` may be
KIND_NAMES = {
    (str,): "a string",
    (int,): "a whole number",
    (int, float): "a number",
    (list,): "a list",
    (bool,): "true or false",
    (str, dict): "a preset's name or a table",
}


@dataclass(frozen=True)
class ModelSpec:
    """One model of the list: what clients call it, what serves it, who may use it."""

    name: str
    engine: str  # a key of ENGINE_OPTIONS
    options: Mapping[str, Any]  # the engine's own, as written
    groups: tuple[str, ...] | None  # Django group names allowed; None: everyone
    default: bool
    tools: bool = False  # may call the file's MCP servers
    vision: bool = False  # may be shown images (docs/files.md)
    max_image_side: int = MAX_IMAGE_SIDE  # pixels: an image is downscaled to fit it


def check_models(config: Config) -> None:
    """At start-up: the file STREAMING_MODELS names is whole, and each model can be configured
    (its key's variable set); ConfigError naming the file, the table and the field if not."""
    names = config.fleet.worker_model_names
    if not config.engine.models_file:
        if names:
            raise ConfigError(
                "WORKER_MODELS names models of STREAMING_MODELS' file, and it is unset "
                "(docs/models.md)"
            )
        return
    specs = read_models(config.engine.models_file)
    for index, spec in enumerate(specs):
        where = f"STREAMING_MODELS file {config.engine.models_file}: models[{index}]"
        spec_config(config, spec, where=where)
    worker_specs(specs, names, config.engine.models_file)
    where = f"STREAMING_MODELS file {config.engine.models_file}"
    check_variables(where, mcp_servers(config.engine.models_file))


def worker_specs(
    specs: tuple[ModelSpec, ...], names: tuple[str, ...], path: str
) -> list[ModelSpec]:
    """The models a model worker serves: those WORKER_MODELS names (none: the default one);
    ConfigError for a name the file does not list, or one named twice."""
    if not names:
        return [default_model(specs)]
    by_name = {spec.name: spec for spec in specs}
    for name in names:
        if name not in by_name:
            known = ", ".join(sorted(by_name))
            raise ConfigError(
                f"WORKER_MODELS: {name!r} is not a model of STREAMING_MODELS file {path} "
                f"(it lists {known})"
            )
    if len(set(names)) < len(names):
        raise ConfigError(f"WORKER_MODELS: names a model twice ({', '.join(names)})")
    return [by_name[name] for name in names]


def spec_config(config: Config, spec: ModelSpec, *, where: str = "") -> Config:
    """The settings with `spec`'s engine and options in place of the process-wide ones: what
    its engine's `from_config` reads."""
    options = spec.options
    engine = dataclasses.replace(
        config.engine,
        name=spec.engine,
        **{
            key: options[key]
            for key in ("model", "dtype", "max_batch", "context_tokens")
            if key in options
        },
    )
    remote = config.remote
    if spec.engine == "openai":
        key_env = options.get("key_env")
        key = os.environ.get(key_env, "") if key_env else ""
        if key_env and not key:
            where = where or f"STREAMING_MODELS file {config.engine.models_file}: {spec.name}"
            raise ConfigError(f"{where}.key_env: the variable {key_env} is not set")
        routing = options.get("routing", "")
        urls = options.get("urls", [])
        remote = dataclasses.replace(
            remote,
            url=options.get("url") or urls[0],
            replicas=",".join(urls),
            model=options.get("upstream_model", ""),
            key=key,
            routing=routing if isinstance(routing, str) else json.dumps(routing),
        )
    pace = {"ttft_ms": "ttft_ms", "tps": "tokens_per_s", "step_ms": "step_ms"}
    deterministic = dataclasses.replace(
        config.deterministic, **{pace[key]: options[key] for key in pace if key in options}
    )
    return dataclasses.replace(config, engine=engine, remote=remote, deterministic=deterministic)


def default_model(specs: tuple[ModelSpec, ...]) -> ModelSpec:
    """The model a request that names none gets (read_models marks exactly one)."""
    return next(spec for spec in specs if spec.default)


def read_models(path: str | Path) -> tuple[ModelSpec, ...]:
    """The models `path` lists, the default first-marked or else the first; ConfigError if not."""
    where, data = _read(path)
    read_mcp_servers(where, data.get("mcp_servers"))  # a file is checked whole
    tables = data.get("models")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{where}: lists no model (add a [[models]] table)")
    specs = [_spec(f"{where}: models[{index}]", table) for index, table in enumerate(tables)]
    _check_together(where, specs)
    if not any(spec.default for spec in specs):
        specs[0] = ModelSpec(**{**specs[0].__dict__, "default": True})
    return tuple(specs)


def mcp_servers(path: str | Path) -> tuple[McpServerSpec, ...]:
    """The MCP servers `path` lists (core/mcp_servers_file.py); ConfigError if wrong."""
    where, data = _read(path)
    return read_mcp_servers(where, data.get("mcp_servers"))


def _read(path: str | Path) -> tuple[str, dict[str, Any]]:
    """The file's name for errors, and its tables."""
    where = f"STREAMING_MODELS file {path}"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{where}: cannot be read ({error.strerror or error})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{where}: is not valid TOML ({error})") from None
    extra = sorted(set(data) - {"models", "mcp_servers"})
    if extra:
        raise ConfigError(
            f"{where}: unknown top-level key {extra[0]!r} (only [[models]] and [[mcp_servers]])"
        )
    return where, data


def _spec(where: str, table: Any) -> ModelSpec:
    """One `[[models]]` table, checked field by field."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: is not a table")
    name = _field(where, table, "name", str, required=True)
    if not name.strip() or name != name.strip() or len(name) > NAME_MAX:
        raise ConfigError(
            f"{where}.name: must be 1 to {NAME_MAX} characters with no space at either end"
        )
    engine = _field(where, table, "engine", str, required=True)
    if engine not in ENGINE_OPTIONS:
        raise ConfigError(f"{where}.engine: {engine!r} is not one of {', '.join(ENGINE_OPTIONS)}")
    allowed = ENGINE_OPTIONS[engine]
    unknown = sorted(set(table) - COMMON - set(allowed))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: not an option of the {engine} engine")
    options = {
        key: _field(where, table, key, kind, required=key in REQUIRED.get(engine, ()))
        for key, kind in allowed.items()
        if key in table or key in REQUIRED.get(engine, ())
    }
    _check_options(where, engine, options)
    groups = _field(where, table, "groups", list)
    if groups is not None and not all(isinstance(g, str) and g.strip() for g in groups):
        raise ConfigError(f"{where}.groups: must be a list of Django group names")
    tools = bool(_field(where, table, "tools", bool))
    if tools and engine not in TOOL_ENGINES:
        raise ConfigError(
            f"{where}.tools: the {engine} engine does not call tools "
            f"(only {', '.join(TOOL_ENGINES)})"
        )
    vision = bool(_field(where, table, "vision", bool))
    if vision and engine not in VISION_ENGINES:
        raise ConfigError(
            f"{where}.vision: the {engine} engine is shown no images "
            f"(only {', '.join(VISION_ENGINES)})"
        )
    side = _field(where, table, "max_image_side", int)
    if side is not None and not IMAGE_SIDES[0] <= side <= IMAGE_SIDES[1]:
        raise ConfigError(
            f"{where}.max_image_side: must be {IMAGE_SIDES[0]} to {IMAGE_SIDES[1]} pixels"
        )
    return ModelSpec(
        name=name,
        engine=engine,
        options=options,
        groups=None if groups is None else tuple(groups),
        default=bool(_field(where, table, "default", bool)),
        tools=tools,
        vision=vision,
        max_image_side=side or MAX_IMAGE_SIDE,
    )


def _field(where: str, table: dict, key: str, kind: Any, *, required: bool = False) -> Any:
    """`table[key]` if it is a `kind` (a bool is no number here); ConfigError if not."""
    if key not in table:
        if required:
            raise ConfigError(f"{where}.{key}: is missing")
        return None
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ConfigError(f"{where}.{key}: must be {KIND_NAMES[kinds]}, not {value!r}")
    return value


def _check_options(where: str, engine: str, options: dict[str, Any]) -> None:
    """The values each engine's options may take."""
    for key, value in options.items():
        if isinstance(value, int | float) and value <= 0 and key != "ttft_ms":
            raise ConfigError(f"{where}.{key}: must be above 0")
        if key == "ttft_ms" and value < 0:
            raise ConfigError(f"{where}.{key}: must be 0 or more")
    if options.get("dtype", "auto") not in DTYPES:
        raise ConfigError(f"{where}.dtype: must be one of {', '.join(DTYPES)}")
    if engine == "openai":
        _check_urls(where, options)
    for key in ("model", "upstream_model", "key_env"):
        if key in options and not options[key].strip():
            raise ConfigError(f"{where}.{key}: must not be empty")
    if "routing" in options:
        try:
            parse_routing(options["routing"], f"{where}.routing")
        except RoutingError as error:
            raise ConfigError(str(error)) from None


def _check_urls(where: str, options: dict[str, Any]) -> None:
    """An upstream's one `url`, or its replicas' `urls`: http(s) URLs, each once."""
    if ("url" in options) == ("urls" in options):
        raise ConfigError(f"{where}: needs exactly one of url (an upstream) and urls (replicas)")
    key = "urls" if "urls" in options else "url"
    urls = options["urls"] if key == "urls" else [options["url"]]
    if not urls or len(set(map(str, urls))) < len(urls):
        raise ConfigError(f"{where}.urls: must list each replica's URL once")
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.{key}: must be an http:// or https:// URL")


def _check_together(where: str, specs: list[ModelSpec]) -> None:
    """Names are unique, and at most one model is the default."""
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        if spec.name in seen:
            raise ConfigError(
                f"{where}: models[{index}].name: {spec.name!r} is also models[{seen[spec.name]}]'s"
            )
        seen[spec.name] = index
    defaults = [index for index, spec in enumerate(specs) if spec.default]
    if len(defaults) > 1:
        raise ConfigError(
            f"{where}: models[{defaults[1]}].default: models[{defaults[0]}] is the default already"
        )
