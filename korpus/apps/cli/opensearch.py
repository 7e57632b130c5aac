"""`korpus opensearch start|status|stop`: a local OpenSearch node (or an N-node cluster) on loopback, assembled from
Maven Central by `make setup` (tasks/runtime/opensearch_node.py), with its data under KORPUS_HOME/opensearch. Point
korpus at it with KORPUS_BACKEND=opensearch and KORPUS_OPENSEARCH_URL set to the URL `start` prints last.
`korpus opensearch reconcile` compares the whole catalog with whichever cluster KORPUS_OPENSEARCH_URL names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail
from korpus.core.settings import Settings

opensearch_app = typer.Typer(no_args_is_help=True, help="A local OpenSearch node for KORPUS_BACKEND=opensearch.")


def _home() -> Path:
    return Settings().home / "opensearch"


@opensearch_app.command("start")
def start_cmd(
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=9, help="Nodes in the cluster, one JVM each.")] = 1,
    port: Annotated[int, typer.Option("--port", help="HTTP port of the first node (the next ones follow).")] = 9200,
    heap: Annotated[int, typer.Option("--heap-mb", help="Java heap of each node, MB.")] = 1024,
) -> None:
    """Start the node(s), wait until the cluster is healthy (green; yellow for one node) and print the URL of the
    first node on the last line."""
    from tasks.runtime.opensearch_node import KNN_VERSION, OPENSEARCH_VERSION, NodeError, start

    home = _home()
    try:
        started = start(home, nodes=nodes, port=port, heap_mb=heap, detach=True, log=sys.stderr)
    except NodeError as exc:
        _fail(str(exc))
    for node in started:
        typer.echo(f"{node.name}: {node.url} pid {node.pid} (data {node.home})")
    typer.echo(
        f"OpenSearch {OPENSEARCH_VERSION} with k-NN {KNN_VERSION}, {nodes} node(s); stop: korpus opensearch stop"
    )
    typer.echo(started[0].url)


@opensearch_app.command("status")
def status_cmd() -> None:
    """Each running node with its URL, cluster health and process id; exit 3 when none runs."""
    from tasks.runtime.opensearch_node import status

    nodes = status(_home())
    if not nodes:
        typer.echo(f"no local OpenSearch node is running (home {_home()}): korpus opensearch start")
        raise typer.Exit(3)
    for node in nodes:
        typer.echo(f"{node['name']}: {node['url']} {node['health']} pid {node['pid']}")


@opensearch_app.command("stop")
def stop_cmd() -> None:
    """Stop every node `start` started; no JVM is left."""
    from tasks.runtime.opensearch_node import stop

    stopped = stop(_home())
    typer.echo(f"stopped {stopped} node(s)" if stopped else "no local OpenSearch node was running")


@opensearch_app.command("reconcile")
def reconcile_cmd(data: DataOption = None) -> None:
    """Compare every chunk of the catalog with every document of the cluster (KORPUS_OPENSEARCH_URL) and send what
    differs — a repair, and what the weekly `verify` refresh does at its end; a sync otherwise reads only what
    changed. Both are walked in order a page at a time: memory does not grow with the corpus."""
    from korpus.apps.cli.ops import sync_opensearch

    sync_opensearch(data, full=True)
