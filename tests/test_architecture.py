"""The package's top-level parts import each other without cycles, and the core server knows
its optional parts only through `server/parts.py` (docs/architecture.md).

Every import counts: at module level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pynatsd

PACKAGE = Path(pynatsd.__file__).parent


def _part(module: str) -> str | None:
    """`pynatsd.server.client` -> `server`; None outside the package."""
    names = module.split(".")
    if names[0] != "pynatsd" or len(names) < 2:
        return None
    return names[1]


def _import_graph() -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the places (file:line) that import it."""
    parts = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        source = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                part = _part(target)
                if part in parts and part != source:
                    graph[source][part].append(f"{rel}:{node.lineno}")
    return graph


def _cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_between_top_level_parts() -> None:
    graph = _import_graph()
    cycles = _cycles(graph)
    where = {
        f"{a} -> {b}": graph[a][b][:3]
        for cycle in cycles
        for a in cycle
        for b in cycle
        if b in graph[a]
    }
    assert cycles == [], where


def test_the_core_server_imports_no_optional_part() -> None:
    graph = _import_graph()
    for part in ("jetstream", "monitor", "assembly", "cli", "runner", "reload", "spark"):
        assert part not in graph["server"], graph["server"][part]


def test_the_graph_sees_imports_inside_functions() -> None:
    # The check above is only worth something if the scan finds every kind of import: the
    # composition root imports JetStream and the monitor, the runner imports the root.
    graph = _import_graph()
    assert {"jetstream", "monitor", "server"} <= set(graph["assembly"])
    assert "assembly" in graph["runner"]


def _module_graph(package: str) -> dict[str, set[str]]:
    """File-level imports between the modules of `package` and the rest of pynatsd: module ->
    the pynatsd modules (files) it imports, every kind of import counted."""
    root = PACKAGE.parent

    def is_module(name: str) -> bool:
        file = root / name.replace(".", "/")
        return file.with_suffix(".py").exists() or (file / "__init__.py").exists()

    graph: dict[str, set[str]] = defaultdict(set)
    for path in (PACKAGE / package.replace(".", "/")).rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from package import module` imports the module (the package's __init__
                # runs first, as for any module of it, and is not counted).
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.append(sub if is_module(sub) else node.module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name].update(t for t in targets if t.startswith("pynatsd.") and is_module(t))
    return graph


def test_the_parts_of_a_consumer_never_import_their_owner() -> None:
    # Each part of jetstream/consumer/ gets what it uses of the consumer, the stream and the
    # account's JetStream as a protocol (ports.py, and one per part): none imports the
    # consumer, the stream or the manager, so the parts form no circle with them.
    package = "pynatsd.jetstream.consumer"
    face = {package, f"{package}.consumer"}
    owners = face | {"pynatsd.jetstream.stream", "pynatsd.jetstream.manager"}
    graph = _module_graph("jetstream.consumer")
    parts = {m for m in graph if m not in face}
    assert len(parts) >= 10, sorted(graph)
    for part in parts:
        assert not graph[part] & owners, (part, graph[part] & owners)
    # Nor do the parts reach their owner through another module.
    seen: set[str] = set()
    todo = [t for p in parts for t in graph[p] if not t.startswith(package + ".")]
    outside = _module_graph("jetstream")
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        assert module not in owners, module
        todo.extend(outside.get(module, ()))
