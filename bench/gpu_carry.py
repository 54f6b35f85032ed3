"""What a GPU machine without network needs to run `bench/gpu_run.sh`, in one git-ignored folder.

`gpu-carry/wheels/`: cp312 manylinux wheels of this project's dependencies and of transformers
at the version the engine needs, less what that machine's image already has (listed in
ALREADY_THERE: its torch 2.11, numpy, huggingface-hub, tokenizers, …). `gpu-carry/models/
tokenizer/`: the packaged model's tokenizer (a few MB), which the random-weight models use; the
weights themselves never travel (random_model.py).

    .venv/bin/python bench/gpu_carry.py        # or: make gpu-carry

It prints the folder's size: what travels with the working tree must stay under 64 MiB.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CARRY = ROOT / "gpu-carry"
# What the run needs beyond the image: the project's own dependencies (pyproject.toml, so that a
# new one travels too), and transformers at the version this checkout runs (the image's 5.17
# lacks the continuous-batching API used here).
EXTRA = ["psycopg-binary", "redis", "transformers", "regex"]


def needed() -> list[str]:
    """The distributions to carry, by name."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    return [re.split(r"[<>=!~\[;\s]", one, maxsplit=1)[0] for one in dependencies] + EXTRA


# In the GPU image already (its package list): not carried, so that the run uses its builds.
ALREADY_THERE = {
    "numpy",
    "huggingface-hub",
    "tokenizers",
    "safetensors",
    "pyyaml",
    "tqdm",
    "packaging",
    "typer",
    "click",
    "rich",
    "shellingham",
    "markdown-it-py",
    "mdurl",
    "pygments",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "idna",
    "certifi",
    "msgpack",
    "prometheus-client",
    "uvloop",
    "filelock",
    "fsspec",
    "hf-xet",
    "typing-extensions",
    "annotated-doc",
    "requests",
    "urllib3",
    "charset-normalizer",
    "attrs",
    "sniffio",
    "torch",
}
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]


def download(wheels: Path) -> None:
    """The wheels of what is `needed` at this checkout's versions, with their dependencies."""
    pins = [f"{name}=={version(name)}" for name in needed()]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "-d",
        str(wheels),
    ]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run(command + pins, check=True)
    for wheel in wheels.glob("*.whl"):
        name = wheel.name.split("-")[0].lower().replace("_", "-")
        if name in ALREADY_THERE:
            wheel.unlink()


def save_tokenizer(folder: Path) -> None:
    """The packaged model's tokenizer, as random_model.py reads it."""
    from streaming.engines.model_source import packaged_gguf
    from streaming.engines.random_model import tokenizer_of

    tokenizer_of(folder, packaged_gguf)


def main() -> None:
    shutil.rmtree(CARRY, ignore_errors=True)
    download(CARRY / "wheels")
    save_tokenizer(CARRY / "models")
    size = sum(path.stat().st_size for path in CARRY.rglob("*") if path.is_file())
    print(
        f"{CARRY}: {size / 2**20:.1f} MiB "
        f"({len(list((CARRY / 'wheels').glob('*.whl')))} wheels and the tokenizer)"
    )


if __name__ == "__main__":
    main()
