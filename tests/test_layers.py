"""streaming/ in layers a newcomer can read (README, "How a token travels"): what may import what.

core ← wire ← engines ← generations ← {fleet, ops, usage, runs, conversations, files} ← http ←
the app root (asgi, lifecycle, deployment, urls, admin). Every import counts, inside functions
and under TYPE_CHECKING too: a hidden import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.live import ROOT

PACKAGE = ROOT / "streaming"
RANK = {
    "core": 0,
    "wire": 1,
    "engines": 2,
    "generations": 3,
    "fleet": 4,
    "ops": 4,
    "usage": 4,
    "conversations": 4,
    "runs": 4,
    "files": 4,
    "http": 5,
}
ROOT_RANK = 6  # asgi, lifecycle, deployment, urls, admin, apps, management: they tie the layers
MODELS = "streaming.models"  # Django's schema: every layer may read it; it imports none of ours
MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Every module of streaming/ (migrations aside) by dotted name."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, *, ours: bool = True) -> set[str]:
    """The streaming modules `name` imports, wherever the import statement stands (`ours`
    False: every module it imports, by its full name)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    if not ours:
        return found
    known = modules()
    return {module for module in found if module in known and module != name}


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in {*RANK, "programs"} else "root"


def rank(name: str) -> int:
    return RANK.get(layer(name), ROOT_RANK)


GRAPH = {name: imports(name, path) for name, path in modules().items()}


def test_no_module_imports_a_higher_layer():
    upward = sorted(
        f"{name} → {target}"
        for name, targets in GRAPH.items()
        if layer(name) not in ("programs", "root")
        for target in targets
        if target != MODELS and layer(target) != "programs" and rank(target) > rank(name)
    )
    assert upward == []


@pytest.mark.parametrize("pair", [{"fleet", "ops"}, {"fleet", "usage"}], ids=["ops", "usage"])
def test_the_fleet_and_its_siblings_never_import_each_other(pair):
    """ops/ observes generations wherever they ran; usage/ knows Redis on its own (the
    deployment hands it and the fleet the one client)."""
    across = sorted(
        f"{name} → {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if {layer(name), layer(target)} == pair
    )
    assert across == []


def test_only_the_app_root_reaches_the_fleet():
    """The views ask generations' `Whereabouts` and the models' engines; whether those are the
    fleet's is decided once, by the deployment (streaming/deployment.py)."""
    reaching = sorted(
        f"{name} → {target}"
        for name, targets in GRAPH.items()
        if layer(name) not in ("fleet", "root")
        for target in targets
        if layer(target) == "fleet"
    )
    assert reaching == []


def test_only_fleet_and_usage_know_redis():
    knowing = sorted(
        name
        for name, path in modules().items()
        if layer(name) not in ("fleet", "usage")
        and any(
            module.split(".")[0] in ("redis", "channels_redis")
            for module in imports(name, path, ours=False)
        )
    )
    assert knowing == []


def test_the_server_never_imports_the_programs_and_the_programs_only_core_wire_and_the_script():
    allowed = {"core", "wire", "programs"}
    wrong = sorted(
        f"{name} → {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if (
            layer(target) == "programs"
            and layer(name) != "programs"
            and not name.startswith("streaming.management")
        )
        or (
            layer(name) == "programs"
            and layer(target) not in allowed
            and target not in ("streaming.engines.script", "streaming.engines")
        )
    )
    assert wrong == []


def test_models_import_nothing_of_ours():
    """Django's tables, a module per concept (streaming/models/): they may import each other,
    nothing else of ours."""
    tables = {name for name in GRAPH if name == MODELS or name.startswith(MODELS + ".")}
    assert {target for name in tables for target in GRAPH[name]} <= tables


def test_no_import_cycle():
    # Depth-first search for a path back to where it started.
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if target.startswith(name + "."):
                continue  # a package importing its own module is not a cycle
            if state.get(target) == 1:
                cycles.append(" → ".join([*path[path.index(target) :], target]))
            elif state.get(target) is None:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_outgrows_a_sitting(name):
    lines = len(modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines: split it by concept"


def test_a_process_keeps_its_state_in_its_runtime():
    """Long-lived state is a runtime part (core/runtime.py), not a module global with a
    setter."""
    found = [
        name
        for name, path in modules().items()
        if not name.startswith("streaming.programs")
        for line in path.read_text().splitlines()
        if line.strip().startswith("global ")
    ]
    assert found == [], found


MAX_FUNCTION_LINES = 60


def test_no_function_outgrows_a_screen():
    """A function longer than a screen does several things: split it (the programs aside)."""
    long = [
        f"{name}.{node.name}"
        for name, path in modules().items()
        if not name.startswith(("streaming.programs", "streaming.migrations"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], long
