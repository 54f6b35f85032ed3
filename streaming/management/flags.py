"""The client commands' flags (`lab`, `loadtest`): each fills one field of the command's config,
whose own default is the flag's, so that one table per command says what it takes."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """`--name`, filling the config's `field` with a `kind` (bool: a switch)."""

    name: str
    field: str
    kind: type = str
    help: str | None = None
    choices: tuple[str, ...] | None = None


def add_flags(
    parser: argparse.ArgumentParser | Any, flags: tuple[Flag, ...], defaults: Any
) -> None:
    """One argument per flag, its default the config's (`defaults`: a config as it is unset)."""
    for flag in flags:
        if flag.kind is bool:
            parser.add_argument(flag.name, dest=flag.field, action="store_true", help=flag.help)
            continue
        parser.add_argument(
            flag.name,
            dest=flag.field,
            type=flag.kind,
            default=getattr(defaults, flag.field),
            help=flag.help,
            choices=flag.choices,
        )


def fields(options: dict[str, Any], flags: tuple[Flag, ...]) -> dict[str, Any]:
    """The config's fields as the flags set them."""
    return {flag.field: options[flag.field] for flag in flags}
