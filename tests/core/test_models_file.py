"""The list of models (core/models_file.py): read whole, every mistake named by file, table
and field."""

from __future__ import annotations

import pytest

from streaming.core.config import ConfigError
from streaming.core.models_file import read_models

TWO = """
[[models]]
name = "small"
engine = "deterministic"
tps = 200

[[models]]
name = "big"
engine = "openai"
url = "http://gpu-box:8000/v1"
upstream_model = "Qwen/Qwen3-32B"
key_env = "BIG_API_KEY"
groups = ["research"]
default = true
"""


def write(tmp_path, text: str):
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_list_is_read_with_each_engines_options_and_its_default(tmp_path):
    small, big = read_models(write(tmp_path, TWO))
    assert (small.name, small.engine, dict(small.options), small.groups) == (
        "small",
        "deterministic",
        {"tps": 200},
        None,
    )
    assert big.options["upstream_model"] == "Qwen/Qwen3-32B" and big.groups == ("research",)
    assert (small.default, big.default) == (False, True)


def test_without_a_default_the_first_is(tmp_path):
    models = read_models(write(tmp_path, TWO.replace("default = true\n", "")))
    assert [model.default for model in models] == [True, False]


TABLE = '[[models]]\nname = "m"\nengine = "transformers"\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "lists no model"),
        ("models = 3", "lists no model"),
        ("[server]\nport = 1\n", "unknown top-level key 'server'"),
        ("[[models]\nname=", "is not valid TOML"),
        ('[[models]]\nengine = "transformers"\n', "models[0].name: is missing"),
        ('[[models]]\nname = " m"\nengine = "openai"\n', "models[0].name: must be 1 to"),
        ('[[models]]\nname = "m"\n', "models[0].engine: is missing"),
        ('[[models]]\nname = "m"\nengine = "vllm"\n', "models[0].engine: 'vllm' is not one of"),
        (TABLE + "url = 'http://x'\n", "models[0].url: not an option of the transformers engine"),
        (TABLE + "max_batch = '8'\n", "models[0].max_batch: must be a whole number, not '8'"),
        (TABLE + "max_batch = true\n", "models[0].max_batch: must be a whole number, not True"),
        (TABLE + "max_batch = 0\n", "models[0].max_batch: must be above 0"),
        (TABLE + "dtype = 'float64'\n", "models[0].dtype: must be one of auto, float32"),
        (TABLE + "groups = 'staff'\n", "models[0].groups: must be a list, not 'staff'"),
        (TABLE + "groups = ['']\n", "models[0].groups: must be a list of Django group names"),
        (TABLE + "default = 'yes'\n", "models[0].default: must be true or false"),
        ('[[models]]\nname = "m"\nengine = "openai"\n', "needs exactly one of url (an upstream)"),
        (
            '[[models]]\nname = "m"\nengine = "openai"\nurl = "http://a"\nurls = ["http://b"]\n',
            "models[0]: needs exactly one of url",
        ),
        (
            '[[models]]\nname = "m"\nengine = "openai"\nurls = ["http://a", "http://a"]\n',
            "models[0].urls: must list each replica's URL once",
        ),
        (
            '[[models]]\nname = "m"\nengine = "openai"\nurls = ["http://a", "ftp://b"]\n',
            "models[0].urls: must be an http:// or https:// URL",
        ),
        (
            '[[models]]\nname = "m"\nengine = "openai"\nurl = "ftp://x"\n',
            "models[0].url: must be an http:// or https:// URL",
        ),
        (TABLE + TABLE, "models[1].name: 'm' is also models[0]'s"),
        (
            TABLE + "default = true\n" + TABLE.replace('"m"', '"n"') + "default = true\n",
            "models[1].default: models[0] is the default already",
        ),
    ],
)
def test_each_mistake_names_the_file_the_table_and_the_field(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        read_models(path)
    assert str(refused.value).startswith(f"STREAMING_MODELS file {path}: ")
    assert expected in str(refused.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"models\.toml: cannot be read"):
        read_models(tmp_path / "models.toml")
