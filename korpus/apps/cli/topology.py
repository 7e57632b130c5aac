"""`korpus topology up|status|kill|start|down`: the production topology as separate processes on this machine's
loopback (tasks/runtime/topology.py) — PostgreSQL, a Prefect server on it with a process worker and korpus's
deployments, a Dask scheduler with two workers, a three-node OpenSearch cluster and two `korpus serve` replicas —
with its state
under KORPUS_HOME/topology. For trials and for the test that kills one part at a time (`make test-topology`);
docs/topology.md is the guide from here to many machines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail, _settings
from korpus.core.settings import Settings

topology_app = typer.Typer(no_args_is_help=True, help="The production topology as processes on loopback.")
Part = Annotated[
    str,
    typer.Argument(
        help="postgres, opensearch, prefect-server, dask-scheduler, dask-worker-1, "
        "dask-worker-2, prefect-worker, serve-1 or serve-2"
    ),
]


def _topology(root: Path | None = None, data: Path | None = None):
    from tasks.runtime.topology import Topology

    settings = _settings(data)
    home = Settings().home / "topology"
    recorded = home / "root.txt"
    if root is None:
        if not recorded.is_file():
            _fail(f"no topology under {home}: korpus topology up --root DIR")
        root = Path(recorded.read_text(encoding="utf-8"))
    home.mkdir(parents=True, exist_ok=True)
    recorded.write_text(str(root.resolve()), encoding="utf-8")
    return Topology(home, root.resolve(), settings.data)


@topology_app.command("up")
def up_cmd(
    root: Annotated[Path, typer.Option("--root", help="The archive the deployments refresh.")], data: DataOption = None
) -> None:
    """Start every part not running (data and ports kept from the last `up`) and print where each answers."""
    from tasks.runtime.topology import TopologyError

    topology = _topology(root, data)
    try:
        topology.up()
    except TopologyError as exc:
        _fail(str(exc))
    typer.echo(
        json.dumps(
            {
                "prefect_api": topology.api_url,
                "prefect_auth": "PREFECT_SERVER_API_AUTH_STRING"
                if os.environ.get("PREFECT_SERVER_API_AUTH_STRING")
                else str(topology.home / "secrets.json"),
                "dask": topology.dask_address,
                "dask_tls": str(topology.home / "tls"),
                "catalog": topology.catalog_url,
                "opensearch": topology.opensearch_url,
                "opensearch_auth": {
                    "user": topology.opensearch_secured.user,
                    "password": "KORPUS_OPENSEARCH_PASSWORD"
                    if os.environ.get("KORPUS_OPENSEARCH_PASSWORD")
                    else str(topology.home / "secrets.json"),
                    "ca": str(topology.opensearch_secured.ca),
                },
                "serve": topology.serve_urls,
                "parts": topology.parts(),
            },
            indent=2,
        )
    )


@topology_app.command("status")
def status_cmd(
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON list: name, pid, state and url of each part.")
    ] = False,
) -> None:
    """Each part (each OpenSearch node on its own), running or down, with its process and where it answers; exit 3
    when any is down."""
    parts = _topology().parts()
    if as_json:
        typer.echo(json.dumps(parts, indent=2))
    else:
        for part in parts:
            typer.echo(f"{part['name']:<20} {part['state']:<8} pid {part['pid'] or '-':<8} {part['url'] or ''}")
    if any(part["state"] != "running" for part in parts):
        raise typer.Exit(3)


@topology_app.command("kill")
def kill_cmd(
    part: Part, node: Annotated[str | None, typer.Option(help="The OpenSearch node (node-2).")] = None
) -> None:
    """SIGKILL one part (its process group; for opensearch, one node) — to see what the rest does."""
    typer.echo(f"killed {part}: pids {_topology().kill(part, node)}")


@topology_app.command("start")
def start_cmd(part: Part) -> None:
    """Start one part again with its ports and data (after `kill`)."""
    _topology().start(part)
    typer.echo(f"{part} running")


@topology_app.command("down")
def down_cmd() -> None:
    """Stop every part; no process is left, the data stays."""
    _topology().down()
    typer.echo("topology stopped")
