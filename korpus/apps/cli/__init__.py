"""`korpus`, the command line: one Typer app whose commands live in small modules by what they are about —
`sources` (sample, refresh, chunks, sources, quarantine, ocr, export), `search` (search, exact, cite, eval,
import-beir), `review` (the `korpus review …` group), `meta`, `models` (models, reindex), `serve`, `ops` (status, gc,
sync-opensearch, prefect), `opensearch` (the `korpus opensearch …` group: a local node, reconcile), `topology` (the
production topology as processes on loopback) — listed in `COMMANDS` below, the one place that names them; `common`
holds the shared options and errors.
"""

from __future__ import annotations

import os
import sys

# Before Prefect is imported anywhere: no telemetry lookups on a machine without network.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import typer

from korpus.apps.cli import meta, models, ops, search, serve, sources
from korpus.apps.cli.catalog import catalog_app
from korpus.apps.cli.opensearch import opensearch_app
from korpus.apps.cli.review import review_app
from korpus.apps.cli.topology import topology_app

COMMANDS = (
    ("sample", sources.sample),
    ("models", models.models),
    ("refresh", sources.refresh),
    ("search", search.search),
    ("ocr", sources.ocr),
    ("export", sources.export),
    ("chunks", sources.chunks),
    ("exact", search.exact),
    ("cite", search.cite),
    ("eval", search.evaluate_cmd),
    ("tune-fusion", search.tune_fusion_cmd),
    ("import-beir", search.import_beir_cmd),
    ("reindex", models.reindex),
    ("meta", meta.meta_cmd),
    ("status", ops.status),
    ("gc", ops.gc),
    ("sync-opensearch", ops.sync_opensearch_cmd),
    ("prefect", ops.prefect_cmd),
    ("serve", serve.serve),
    ("sources", sources.sources),
    ("quarantine", sources.quarantine),
)
"""Every top-level command, in the order `korpus --help` lists them."""

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Russian archives → citable RAG evidence.")
app.add_typer(review_app, name="review")
app.add_typer(opensearch_app, name="opensearch")
app.add_typer(catalog_app, name="catalog")
app.add_typer(topology_app, name="topology")
for _name, _command in COMMANDS:
    app.command(_name)(_command)

WATCHED_COMMANDS = frozenset({"refresh", "serve", "reindex", "review", "eval", "sync-opensearch", "gc", "cite"})
"""Commands that start other programs (a temporary Prefect server, LibreOffice, Tesseract, ffmpeg): run as the
`korpus` program, they get a watchdog that kills whatever they leave running, also when they are SIGKILLed
(tasks/runtime/processes.py)."""


def main() -> None:  # pragma: no cover - console entry point
    os.environ.setdefault("DO_NOT_TRACK", "1")  # Prefect's client sends no usage data (korpus runs offline)
    if WATCHED_COMMANDS & set(sys.argv[1:2]):
        from tasks.runtime.processes import watch_over_me

        watch_over_me()
    sys.exit(app())
