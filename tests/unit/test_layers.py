"""The layers of the house, held by a test: bottom (datamodel, settings) imports nothing of korpus; the stages
(`tasks/`) never reach up to flows, the CLI, the API or the generated corpora; the index never imports the
retriever that sits on it; and no module-level import circle anywhere (docs/architecture.md draws the picture)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("korpus", "tasks", "flows", "corpora")
BOTTOM = ("korpus.datamodel", "korpus.settings")
TOP = ("flows", "korpus.cli", "korpus.api", "korpus.review_web", "korpus.status", "corpora")


def _modules() -> dict[str, ast.Module]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


MODULES = _modules()


def _imported(nodes: list[ast.AST]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in MODULES}


def _anywhere(tree: ast.Module) -> set[str]:
    return _imported(list(ast.walk(tree)))


def _at_import_time(tree: ast.Module) -> set[str]:
    """Imports run when the module loads: top-level statements (and inside top-level try/if), not those under
    `if TYPE_CHECKING:` nor inside functions."""
    nodes: list[ast.AST] = []
    for statement in tree.body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        if isinstance(statement, ast.If | ast.Try):
            nodes += [n for n in ast.walk(statement) if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        else:
            nodes.append(statement)
    return _imported(nodes)


def _violations(rule: callable) -> list[tuple[str, str]]:
    return sorted((name, dep) for name, tree in MODULES.items() for dep in _anywhere(tree) if rule(name, dep))


def test_the_walk_finds_the_packages() -> None:  # the rules below would pass vacuously on an empty walk
    assert {"korpus.settings", "tasks.index.sqlite", "tasks.retrieval.retriever", "flows.corpus_refresh"} <= set(
        MODULES
    )
    assert "tasks.index.backend" in _anywhere(MODULES["tasks.retrieval.retriever"])


def test_the_bottom_imports_nothing_above_it() -> None:
    assert _violations(lambda m, d: m in BOTTOM and d not in BOTTOM) == []


def test_stages_never_reach_up_to_flows_cli_api_or_the_generated_corpora() -> None:
    assert _violations(lambda m, d: m.startswith("tasks") and d.startswith(TOP)) == []
    assert _violations(lambda m, d: m.startswith(("korpus", "tasks", "flows")) and d.startswith("corpora")
                       and m != "korpus.cli") == []  # fmt: skip


def test_the_index_never_imports_the_retriever_above_it() -> None:
    assert _violations(lambda m, d: m.startswith("tasks.index") and d.startswith("tasks.retrieval")) == []


def test_no_import_circle() -> None:
    graph = {name: _at_import_time(tree) - {name} for name, tree in MODULES.items()}
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (circle := visit(dep)):
                return circle
        state[name] = 2
        path.pop()
        return None

    circles = [c for name in sorted(graph) if name not in state and (c := visit(name))]
    assert circles == []
