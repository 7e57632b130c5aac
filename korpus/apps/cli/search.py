"""`korpus` commands that ask the index: hybrid and exact search, the evaluation of a retriever on a question set,
BEIR import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from korpus.apps.cli.common import DataOption, _fail, _indexed, _settings, _stateless
from korpus.core.model_store import (
    ModelMissingError,
    embed_model_path,
    set_offline_switches,
)
from korpus.core.settings import parse_scopes


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
    """Hybrid search over current chunks the scopes may see: BM25 and kNN in a convex fusion (min-max normalised,
    BM25 weighing less when it covers little of the question), identifiers pinned first; --mode picks another."""
    from tasks.index.backend import SEARCH_MODES, IndexMismatchError
    from tasks.index.pg_catalog import CatalogUnavailable
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.query import search_message

    settings = _settings(data)
    if mode not in SEARCH_MODES:
        _fail(f"unknown mode {mode!r}: one of {', '.join(SEARCH_MODES)}")
    if mode == "hybrid+rerank" and settings.rerank_model is None:
        _fail("hybrid+rerank needs a rerank model: set KORPUS_RERANK_MODEL to a CrossEncoder folder")
    stateless = _stateless(settings)  # a search replica: the catalog on PostgreSQL and the cluster, no file
    if not stateless:
        _indexed(settings)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    set_offline_switches()
    index = None if stateless else SqliteIndex(settings.index_path)
    explained: list[tuple[str, dict[str, Any]]] = []
    try:
        embed = None
        if mode not in ("bm25", "bm25-nostem"):
            embedder = Embedder(embed_model_path(settings))
            if index is not None:  # a replica's cluster checks the query vector against its own mapping
                index.bind_embedding(embedder.name, embedder.dims)
            embed = embedder.embed_queries
        from tasks.index.registry import backend_for
        from tasks.retrieval.retriever import Retriever

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
    except (ModelMissingError, IndexMismatchError, ValueError, CatalogUnavailable) as exc:
        _fail(str(exc))
    finally:
        if index is not None:
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


def _explanation(part: str, decided: dict[str, Any], mode: str) -> str:
    """How one question's ranking was decided, for a person (`korpus search --explain`)."""
    lines = [f"question: {part}", f"  mode: {mode}; terms: {' '.join(decided.get('terms', [])) or '—'}"]
    for term, variants in decided.get("typo_variants", {}).items():
        lines.append(f"  typo? '{term}' not in the index; also searched: {', '.join(variants)}")
    if decided.get("coverage") is not None:
        verdict = "joins the fusion" if decided["bm25_joined"] else "left out: dense ranks alone (a paraphrase)"
        if not decided.get("dense_joined", True):
            verdict = "ranks alone: the query is worded as the text (dense left out)"
        cuts = f"{decided['min_coverage']:.2f} / {decided.get('lexical_coverage', 1.01):.2f}"
        lines.append(
            f"  BM25's best hit holds {decided['coverage']:.2f} of the query (thresholds {cuts}): BM25 {verdict}"
        )
    if decided.get("fusion") == "convex":
        lines.append(
            f"  convex fusion: {decided['alpha']:.2f} × BM25 + {1 - decided['alpha']:.2f} × cosine "
            "(each min-max normalised over its top list)"
        )
    if decided.get("identifier_pins"):
        lines.append(f"  {decided['identifier_pins']} exact identifier match(es) pinned first")
    return "\n".join(lines)


def exact(
    text: Annotated[str, typer.Argument(help="The exact phrase.")],
    scopes: Annotated[str | None, typer.Option("--scopes", help="Access scopes, comma-separated.")] = None,
    count_only: Annotated[bool, typer.Option("--count", help="Only counts per source (count_mentions).")] = False,
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """search_exact: every occurrence of a phrase with file, page or timecode, line and context."""
    from tasks.index.registry import backend_for
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.retriever import Retriever

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
    from tasks.index.registry import backend_for
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.evaluation import RETRIEVERS, calibrate_no_answer, evaluate, load_questions
    from tasks.retrieval.retriever import Retriever

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
            typer.echo(
                json.dumps(found)
                if as_json
                else f"KORPUS_NO_ANSWER_THRESHOLD={found['threshold']}  (balanced accuracy "
                f"{found['balanced_accuracy']}: answerable ≥ {found['answerable_min']} × {found['answerable']}, "
                f"no-answer ≤ {found['no_answer_max']} × {found['no_answer']})"
            )
            return
        ranker = Retriever.from_settings(backend, settings)  # exactly what `korpus search` and the API rank with
        report = evaluate(
            load_questions(questions),
            backend,
            embedder,
            retriever,
            settings.default_scopes,
            settings.no_answer_threshold,
            ranker,
        )
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    typer.echo(
        f"{retriever}: n={report['n']}  R@1={report['recall@1']}  R@5={report['recall@5']}  "
        f"R@10={report['recall@10']}  MRR@10={report['mrr@10']}  nDCG@10={report['ndcg@10']}  "
        f"leaks={report['leaks']}"
    )
    for kind, row in report["by_type"].items():
        typer.echo(
            f"  {kind:<15} n={row['n']:<4} R@1={row['recall@1']}  R@10={row['recall@10']}  nDCG@10={row['ndcg@10']}"
        )
    for kind, row in report["checks"].items():
        typer.echo(f"  {kind:<15} n={row['n']:<4} passed={row['passed']}")
    if report["routing"]["routed"]:
        routing = report["routing"]
        typer.echo(
            f"  routing: BM25 joined the fusion for {routing['bm25_joined']} of {routing['routed']} questions "
            f"(alone for {routing.get('bm25_only', 0)}), dense alone for {routing['dense_only']}"
        )


def tune_fusion_cmd(
    questions: Annotated[Path, typer.Argument(help="This collection's labelled questions (a `korpus eval` file).")],
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Refit the hybrid's two BM25 weights on half of this collection's questions and compare them with the
    settings in force on the other half (paired bootstrap); recommends the fitted pair only when it is better
    there. Writes nothing: the settings to use are printed (docs/retrieval.md)."""
    from tasks.index.registry import backend_for
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.evaluation import load_questions
    from tasks.retrieval.retriever import Retriever
    from tasks.retrieval.tuning import tune_fusion

    settings = _settings(data)
    if not questions.is_file() or not settings.index_path.is_file():
        _fail(f"need an eval file ({questions}) and an index ({settings.index_path})")
    set_offline_switches()
    with SqliteIndex(settings.index_path) as index:
        backend = backend_for(settings, index)
        ranker = Retriever.from_settings(backend, settings)

        def progress(done: int, total: int) -> None:
            if not as_json and (done == total or done % 5 == 0):
                typer.echo(f"  {done}/{total} weight pairs tried", err=True)

        try:
            report = tune_fusion(
                load_questions(questions),
                backend,
                Embedder(embed_model_path(settings)),
                ranker,
                settings.default_scopes,
                settings.no_answer_threshold,
                progress,
            )
        except ValueError as exc:
            _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    n, check = report["questions"], report["checking_ndcg@10"]
    diff = check["fitted_minus_in_force"]
    typer.echo(
        f"fitted on {n['fitting']} questions: hybrid_alpha={report['fitted']['hybrid_alpha']} "
        f"hybrid_alpha_low={report['fitted']['hybrid_alpha_low']} (in force: {report['in_force']['hybrid_alpha']}, "
        f"{report['in_force']['hybrid_alpha_low']})\n"
        f"checked on {n['checking']} others: nDCG@10 {check['in_force']} → {check['fitted']} "
        f"({diff['mean']:+.4f}, 95 % [{diff['low']:+.4f}, {diff['high']:+.4f}])"
    )
    if report["recommend"] == "fitted":
        typer.echo(
            "better on the questions it was not fitted on: set "
            + " ".join(f"{k}={v}" for k, v in report["settings"].items())
        )
    else:
        typer.echo("not better on the questions it was not fitted on: keep the settings in force")


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


def cite(
    chunk_id: Annotated[str, typer.Argument(help="A hit's chunk_id (from `korpus search --json` or the API).")],
    png: Annotated[Path | None, typer.Option("--png", help="Write the page with the chunk highlighted here.")] = None,
    scopes: Annotated[str | None, typer.Option("--scopes", help="Access scopes, comma-separated.")] = None,
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Where a hit is: its file, page or timecode and the rectangles its words cover; `--png` draws them on the
    page."""
    from korpus.core.datamodel import Source
    from tasks.index.sqlite import SqliteIndex
    from tasks.readers.page_view import page_png

    settings = _settings(data)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    if _stateless(settings):  # a search replica: the chunk from the cluster, checked on the catalog's server
        from tasks.index.pg_catalog import CatalogUnavailable
        from tasks.index.registry import backend_for

        try:
            found = backend_for(settings, None).cited(chunk_id, scope_list)
        except CatalogUnavailable as exc:
            _fail(str(exc))
    else:
        with SqliteIndex(_indexed(settings).index_path) as index:
            found = index.searcher.cited(chunk_id, scope_list)
    if found is None:
        _fail(f"no current chunk {chunk_id!r} that the scopes {', '.join(scope_list)} may see")
    if png is not None:
        if found["page"] is None:
            _fail(f"{found['source_id']} has no pages: the hit starts at {found['t_start']} s of the recording")
        source = Source(
            source_id=found["source_id"],
            version=found["source_version"],
            path=found["path"],
            kind=found["kind"],
            size=found["size"] or 0,
        )
        try:
            image, _size = page_png(source, found["page"], settings, found["regions"])
        except (OSError, ValueError) as exc:
            _fail(f"cannot render {found['source_id']} page {found['page']}: {exc}")
        png.write_bytes(image)
    if as_json:
        typer.echo(
            json.dumps(
                {k: found[k] for k in ("chunk_id", "source_id", "page", "t_start", "regions")},
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    where = f"лист {found['page']}" if found["page"] is not None else f"{found['t_start']} s"
    typer.echo(f"{found['source_id']} · {where}: {len(found['regions'])} region(s)" + (f" → {png}" if png else ""))
    for r in found["regions"]:
        whole = " (the whole page: no word boxes)" if r["whole_page"] else ""
        typer.echo(
            f"  ({r['x0']:.1f}, {r['y0']:.1f}) – ({r['x1']:.1f}, {r['y1']:.1f}) of "
            f"{r['width']:.0f}×{r['height']:.0f} pt{whole}"
        )
