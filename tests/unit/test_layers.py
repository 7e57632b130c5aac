"""The layers of the house, held by a test (docs/architecture.md draws the picture):

- `korpus/core` (data model, settings, model store, typed errors) imports nothing of korpus above it;
- the stages (`tasks/`) import only the core and each other — never the applications (`korpus/apps`), the flows
  or the generated corpora; the index never imports the retriever that sits on it;
- the flows never import the applications; only the CLI imports the generated corpora (`korpus sample`);
- no import circle anywhere: an import inside a function or under `TYPE_CHECKING` counts as much as one at the
  top — a module never imports a module that imports it, directly or around a loop.

(File length is no rule: a file is split where a reader finds two responsibilities in it, never to meet a number.)

Each rule is a function over the import graph, and each is shown failing on an import planted in a copy of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("korpus", "tasks", "flows", "corpora")
Graph = dict[str, set[str]]


def _modules() -> dict[str, ast.Module]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


MODULES = _modules()


def _imported(tree: ast.Module, known: set[str]) -> set[str]:
    """Every korpus module a module imports, wherever the import stands (function, TYPE_CHECKING, try)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known}


GRAPH: Graph = {name: _imported(tree, set(MODULES)) - {name} for name, tree in MODULES.items()}


def layer(module: str) -> int:
    """0 the core, 1 the stages, 2 the flows and the applications; the generated corpora stand apart (3)."""
    if module.startswith("korpus.core") or module == "korpus":
        return 0
    if module.startswith("tasks"):
        return 1
    if module.startswith(("flows", "korpus.apps")):
        return 2
    return 3


def upward(graph: Graph) -> list[tuple[str, str]]:
    """Imports that reach to a higher floor, or into the generated corpora from anywhere but the CLI."""
    found = []
    for module, deps in graph.items():
        for dep in deps:
            if layer(dep) == 3 and layer(module) != 3 and not module.startswith("korpus.apps.cli"):
                found.append((module, dep))
            elif layer(dep) != 3 and layer(module) != 3 and layer(dep) > layer(module):
                found.append((module, dep))
            elif module.startswith("flows") and dep.startswith("korpus.apps"):
                found.append((module, dep))
            elif module.startswith("tasks.index") and dep.startswith("tasks.retrieval"):
                found.append((module, dep))
    return sorted(found)


def circles(graph: Graph) -> list[list[str]]:
    """Every group of modules that import one another around a loop (strongly connected components over 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _planted(src: str, dep: str) -> Graph:
    graph = {name: set(deps) for name, deps in GRAPH.items()}
    graph[src].add(dep)
    return graph


def test_the_walk_finds_the_floors() -> None:  # the rules below would pass vacuously on an empty walk
    assert {
        "korpus.core.settings",
        "tasks.index.sqlite",
        "tasks.retrieval.retriever",
        "flows.corpus_refresh",
        "korpus.apps.cli",
        "korpus.apps.api",
    } <= set(MODULES)
    assert "tasks.index.backend" in GRAPH["tasks.retrieval.retriever"]
    assert {layer(m) for m in MODULES} == {0, 1, 2, 3}


def test_no_import_runs_upward() -> None:
    assert upward(GRAPH) == []


def test_no_import_circle_anywhere() -> None:
    assert circles(GRAPH) == []


@pytest.mark.parametrize(
    ("src", "dep"),
    [
        ("korpus.core.settings", "tasks.parse"),  # the foundation reaching into a stage
        ("tasks.parse", "korpus.apps.status"),  # a stage reaching into an application
        ("tasks.receive", "flows.corpus_refresh"),  # a stage reaching into a flow
        ("flows.refresh_tasks", "korpus.apps.api"),  # a flow reaching into an application
        ("tasks.index.sqlite", "tasks.retrieval.retriever"),  # the index reaching into the retriever on it
        ("tasks.meta.publish", "corpora.sample_archive"),  # a stage reaching into the generated corpora
    ],
)
def test_an_upward_import_is_seen(src: str, dep: str) -> None:
    assert (src, dep) in upward(_planted(src, dep))


@pytest.mark.parametrize(
    ("src", "dep"),
    [
        ("tasks.index.sqlite_search", "tasks.index.sqlite"),  # the search side back into the catalog (as it was)
        ("tasks.ocr.engine", "tasks.ocr.tesseract_engine"),  # the interface importing its engines (as it was)
        ("tasks.readers.base", "tasks.readers.registry"),  # the interface loading the readers (as it was)
        ("tasks.pdf.searchable", "tasks.parse"),  # the writer reaching back for the cascade (as it was)
    ],
)
def test_a_circle_is_seen(src: str, dep: str) -> None:
    found = circles(_planted(src, dep))
    assert any({src, dep} <= set(group) for group in found), found
