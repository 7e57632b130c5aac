"""How BM25 and kNN are fused, chosen on kinds of questions, not sets (#48 items 1-2; #31 item 2 before it).

    .venv/bin/python benchmarks/fusion.py [--keep DIR] [--only SET ...] [--json] [--cases FILE] [--rules RULE ...]

Each set is refreshed once by the real flow with the default settings (kept in `--keep DIR` to be reused). Every
question is then asked as people vary it — **kinds** made deterministically (seeded) from the question as written:

- `as written`; `lower case` (lower-cased, punctuation gone); `typos` (two content words with a keyboard-neighbour
  or a phonetic slip: о/а, е/и, a doubled or single consonant, -тся/-ться, щ/ш); `keywords` (the content words
  alone, at most four, lower case); `colloquial` (lower case in a spoken frame: «подскажите плиз …», «а где … ?»);
  `two in one` (the next question of the set appended; a hit for either counts).

Per message, korpus's own query path: cleaned and split into its questions (tasks/retrieval/query.py), each part's
BM25 and kNN top 50 with their scores (meta parts and furniture set aside as the retriever does; no identifier pins,
which every rule would share), BM25's lexical coverage; every fusion rule is computed from those same candidates,
parts interleaved as `search_message` does. nDCG@10 and R@1 as `korpus eval` counts them. Rules:

- `bm25`, `dense` — one side; `rrf` — Σ 1/(60 + rank); `routed` — korpus's default (dense alone when BM25's best hit
  covers < 0.35 of the query, BM25 alone at ≥ 0.6); `routed, no BM25-alone` (the 0.6 cut off);
- `routed, message unsplit` — the routed default over the whole cleaned message, not split into its questions;
- `rrf@d` — RRF over each side's top d only (d fitted);
- `routed, unless the sides agree` — the routed default, but a low-coverage query keeps BM25 in the fusion when its
  best hit is among dense's top p (p fitted): the sides' agreement, not coverage alone, marks a stray match;
- `convex <norm>` — α·BM25 + (1-α)·cosine after min-max, z-score or theoretical-min-max normalisation (Bruch, Gai and
  Ingber 2023), α fitted; `convex <norm>, routed low` — the same with dense alone below coverage 0.35;
- `convex minmax, two α by coverage` — BM25's weight α_lo below coverage t and α_hi from it (t, α_lo, α_hi fitted:
  the routed rule made continuous; **korpus's default since session 29**, t 0.35, α_lo 0.3, α_hi 0.5);
  `convex minmax, α ramped by coverage` — α_hi · min(1, coverage / t)^g; `convex minmax, three α by coverage` —
  α_lo below 0.35, α_mid to t2, α_hi from t2 (the routed rule's BM25-alone cut made a weight);
- `convex minmax, routed low unless the sides agree` — dense alone below coverage 0.35 only when BM25's best hit is
  not in dense's top q, else convex (q, α fitted).

Fitting is out of sample twice: **leave-one-set-out** (parameters chosen on every kind of the other sets, reported on
the held-out set, per kind) and **leave-one-kind-out** (chosen on the other kinds of every set, reported on the
held-out kind). The hand-written `real-typed` set (eval/real-typed, #48 item 4) is never in a fitting pool: it is
reported with parameters fitted on all the other sets. A rule is kept only if on every set × kind it is ≥ the
better side − 0.005 (nDCG@10); the table says where each breaks.

Dense, three ways (#48 item 2): `dense` as korpus embeds (the chunk's text with its address line, the question
cleaned and split), `dense, body` (the chunk's body alone, re-embedded here: no address prefix — the plain-e5 anchor's
passages) and `dense, as typed` (the message embedded as it came: no clean-up, no split).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.question_sets import REAL_QUESTIONS, REAL_TYPED, ROOT, write_real_colloquial, write_real_typed
from corpora import archive_eval
from corpora.sample_archive import write_sample_archive
from flows.corpus_refresh import run_refresh
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import Embedder
from tasks.retrieval.evaluation import _scores, import_beir, load_questions
from tasks.retrieval.fusion import convex_fuse, rrf_fuse
from tasks.retrieval.query import clean_query, interleave, split_questions
from tasks.retrieval.retriever import Retriever
from tasks.runtime.prefect_server import stop_server
from tasks.text.analysis import analyse

SKIP = ("no-answer", "denied-access", "collection")
KINDS = ("as written", "lower case", "typos", "keywords", "colloquial", "two in one")
REPORTED_ONLY = ("real-typed", "danetqa")
"""Sets no parameter is ever fitted on: reported with parameters fitted on all the others."""
DANETQA = ROOT / "eval" / "danetqa"
SERVED_DEFAULT = ("convex minmax, two α by coverage", (0.35, 0.3, 0.5))
"""korpus's hybrid as served (KORPUS_HYBRID_FUSION=convex: t 0.35, α_lo 0.3, α_hi 0.5), whose interval against the
better side each cell reports (#66 acceptance)."""

ALPHAS = tuple(round(0.1 * n, 1) for n in range(11))
DEPTHS = (5, 10, 20, 30, 50)
FITTED = {
    "rrf@d": DEPTHS,
    "convex minmax": ALPHAS,
    "convex zscore": ALPHAS,
    "convex tmm": ALPHAS,
    "convex tmm, routed low": ALPHAS,
    "convex minmax, routed low": ALPHAS,
    "routed, unless the sides agree": (1, 3, 5, 10, 20),
    "convex minmax, two α by coverage": tuple(
        (t, lo, hi)
        for t in (0.25, 0.35, 0.45, 0.6)
        for lo in (0.0, 0.1, 0.2, 0.3, 0.4)
        for hi in (0.4, 0.5, 0.6, 0.7, 0.9, 1.0)
        if lo < hi
    ),
    "convex minmax, routed low unless the sides agree": tuple((q, a) for q in (1, 3, 10) for a in ALPHAS),
    "convex minmax, α ramped by coverage": tuple(
        (t, hi, g) for t in (0.35, 0.5, 0.7, 1.0) for hi in (0.5, 0.6, 0.8, 1.0) for g in (1, 2)
    ),
    "convex minmax, three α by coverage": tuple(
        (t2, lo, mid, hi)
        for t2 in (0.6, 0.75)
        for lo in (0.1, 0.2, 0.3)
        for mid in (0.4, 0.5, 0.6)
        for hi in (0.6, 0.8, 1.0)
        if mid <= hi
    ),
}
FIXED = ("bm25", "dense", "rrf", "routed", "routed, no BM25-alone", "routed, message unsplit")
DENSE_WAYS = ("dense", "dense, body", "dense, as typed")
STOP = set(
    (
        "что как где когда кто какой какая какие каких каком какое чем чей почему зачем сколько ли же бы "
        "в во на по с со к ко о об от до из за у для при про под над без между через и а но или не ни это "
        "то там тут был была были будет есть нужно можно надо мне нам вы мы я он она они его её их этот эта "
        "эти который которая которые"
    ).split()
)
ROWS = ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю")
NEIGHBOURS = {row[i]: row[i + 1] if i + 1 < len(row) else row[i - 1] for row in ROWS for i in range(len(row))}
PHONETIC = (
    ("о", "а"),
    ("а", "о"),
    ("е", "и"),
    ("и", "е"),
    ("нн", "н"),
    ("сс", "с"),
    ("тся", "ться"),
    ("ться", "тся"),
    ("щ", "ш"),
    ("ё", "е"),
)
FRAMES = ("подскажите плиз {}", "а где {} ?", "{} — кто знает?", "нужно {} срочно", "слушайте, {}", "{} ??")


def build(keep: Path, only: list[str] | None) -> dict[str, tuple[Path, Path]]:
    """Each set refreshed once: name → (data directory, questions)."""
    archive_q, xquad_q = keep / "archive-style.jsonl", keep / "xquad.jsonl"
    archive_eval.write_questions(archive_q)

    def archive(root: Path) -> None:
        archive_eval.write_archive(root)
        archive_eval.apply_changes(root)

    writers = {
        "archive-style": (archive, archive_q),
        "sample-archive": (write_sample_archive, ROOT / "eval" / "sample-archive.jsonl"),
        "xquad-ru": (lambda root: import_beir(ROOT / "eval" / "xquad-ru", root, xquad_q), xquad_q),
        "real-colloquial": (write_real_colloquial, REAL_QUESTIONS),
        "real-typed": (write_real_typed, REAL_TYPED / "questions.jsonl"),
        # DaNetQA (#66): one corpus, its two halves of questions — the fitting half in every fitting pool, the
        # reporting half never (REPORTED_ONLY)
        "danetqa-fit": (lambda root: import_beir(DANETQA, root, keep / "danetqa-fit.jsonl", split="-fit"), None),
        "danetqa": (lambda root: import_beir(DANETQA, root, keep / "danetqa.jsonl", split="-report"), None),
    }
    questions_of = {"danetqa-fit": keep / "danetqa-fit.jsonl", "danetqa": keep / "danetqa.jsonl"}
    sets: dict[str, tuple[Path, Path]] = {}
    for name, (write, questions) in writers.items():
        if only and name not in only:
            continue
        stem = name.removesuffix("-fit")  # the two DaNetQA halves share one refreshed corpus
        root, data = keep / f"{stem}-root", keep / f"{stem}-data"
        if not (data / "korpus.db").is_file() or not (questions or questions_of[name]).is_file():
            write(root)
            if not (data / "korpus.db").is_file():
                run_refresh(root, Settings(data=data))
        sets[name] = (data, questions or questions_of[name])
    return sets


# --- kinds of questions -----------------------------------------------------------------------------------------


def _lower(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s-]", " ", text.lower()).split())


def _content_words(text: str) -> list[str]:
    return [w for w in _lower(text).split() if w not in STOP and len(w) > 2]


def _slip(word: str, rng: random.Random) -> str:
    for wrong, right in rng.sample(PHONETIC, len(PHONETIC)):
        at = word.find(wrong, 1)
        if at > 0:
            return word[:at] + right + word[at + len(wrong) :]
    at = rng.randrange(1, len(word) - 1)
    return word[:at] + NEIGHBOURS.get(word[at], word[at]) + word[at + 1 :]


def kind_of(text: str, kind: str, rng: random.Random, following: str) -> str:
    if kind == "lower case":
        return _lower(text)
    if kind == "typos":
        words = text.split()
        long = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
        for i in rng.sample(long, min(2, len(long))):
            words[i] = _slip(words[i], rng)
        return " ".join(words)
    if kind == "keywords":
        words = _content_words(text)
        kept = sorted(sorted(range(len(words)), key=lambda i: -len(words[i]))[:4])
        return " ".join(words[i] for i in kept) or _lower(text)
    if kind == "colloquial":
        return rng.choice(FRAMES).format(_lower(text))
    if kind == "two in one":
        return f"{text.rstrip('?. ')}? И ещё: {following}"
    return text


# --- each message's candidates, read once ------------------------------------------------------------------------


class Candidates:
    """Per set: every message's parts with both sides' scored top 50, coverage and hits, read through the backend."""

    def __init__(self, data: Path) -> None:
        self.settings = Settings(data=data)
        self.embedder = Embedder(embed_model_path(self.settings))
        self.index = SqliteIndex(self.settings.index_path)
        self.backend = self.index.searcher
        self.retriever = Retriever.from_settings(self.backend, self.settings)
        rows = self.index.conn.execute(
            "SELECT c.rowid, c.body, v.visible FROM chunks c JOIN chunk_visibility v ON v.rowid = c.rowid "
            "WHERE v.visible IS NOT NULL ORDER BY c.rowid"
        ).fetchall()
        self.body_rowids = np.asarray([r[0] for r in rows])
        self.body_scope = np.asarray([r[2] for r in rows])
        self.bodies = self.embedder.embed_passages([r[1] for r in rows]) if rows else np.zeros((0, 384))

    def close(self) -> None:
        self.index.close()

    def _body_top(self, vector: np.ndarray, scopes: list[str], depth: int = 50) -> list[tuple[int, float]]:
        scores = np.where(np.isin(self.body_scope, scopes), self.bodies @ vector, -np.inf)
        best = np.argsort(-scores)[:depth]
        return [(int(self.body_rowids[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]

    def read(self, messages: list[tuple[str, list[str]]]) -> list[dict]:
        """messages: (text, scopes) → per message {parts: [...], raw_dense, hits}."""
        split = [split_questions(clean_query(text)) for text, _ in messages]
        flat = [p for parts in split for p in parts]
        vectors = self.embedder.embed_queries(flat) if flat else []
        raw = self.embedder.embed_queries([text for text, _ in messages]) if messages else []
        out, at = [], 0
        wholes = [clean_query(text) for text, _ in messages]
        whole_vectors = self.embedder.embed_queries(wholes) if messages else []
        for (_text, scopes), parts, raw_vector, whole, whole_vector in zip(
            messages, split, raw, wholes, whole_vectors, strict=True
        ):
            read_parts, keys = [], set()
            # the message unsplit (cleaned, searched as one question) after its parts, when it has several
            for part, vector in [
                *zip(parts, vectors[at : at + len(parts)], strict=True),
                *([(whole, whole_vector)] if len(parts) > 1 else []),
            ]:
                variants = self.backend.typo_variants(analyse(part))
                lexical = self.backend.lexical(part, scopes, 50, True, variants)
                dense = self.backend.vector(vector, scopes, 50)
                body = self._body_top(vector, scopes)
                aside, dropped = self.retriever._set_aside(False, [k for k, _ in [*lexical, *dense, *body]], scopes)
                gone = set(aside) | dropped
                lexical = [(k, s) for k, s in lexical if k not in gone]
                dense = [(k, s) for k, s in dense if k not in gone]
                body = [(k, s) for k, s in body if k not in gone]
                coverage = self.backend.coverage(part, lexical[0][0], variants) if lexical else 0.0
                terms = len(analyse(part))  # the query's length in index terms: a feature of the learned rule
                read_parts.append(
                    {"lexical": lexical, "dense": dense, "body": body, "coverage": coverage, "terms": terms}
                )
                keys |= {k for k, _ in [*lexical, *dense, *body]}
            at += len(parts)
            typed = [(k, s) for k, s in self.backend.vector(raw_vector, scopes, 50)]
            keys |= {k for k, _ in typed}
            hits = dict(self.backend.hits([(k, 0.0) for k in keys], scopes, regions=False))
            out.append({"parts": read_parts, "typed": typed, "hits": hits})
        return out


# --- the rules ---------------------------------------------------------------------------------------------------


def ranking(part: dict, rule: str, p: float | None) -> list:
    lexical, dense, coverage = part["lexical"], part["dense"], part["coverage"]
    keys = lambda scored: [k for k, _ in scored]  # noqa: E731
    if rule == "bm25":
        return keys(lexical)
    if rule in ("dense", "dense, as typed"):
        return keys(dense)
    if rule == "dense, body":
        return keys(part["body"])
    if rule == "rrf":
        return keys(rrf_fuse([keys(lexical), keys(dense)], 60))
    if rule in ("routed", "routed, no BM25-alone"):
        if not lexical or coverage < 0.35:
            return keys(dense)
        if rule == "routed" and coverage >= 0.6:
            return keys(lexical)
        return keys(rrf_fuse([keys(lexical), keys(dense)], 60))
    if rule == "routed, unless the sides agree":  # low coverage sends to dense alone only when dense's top p
        agree = bool(lexical) and lexical[0][0] in keys(dense)[: int(p)]  # does not hold BM25's best hit
        if not lexical or (coverage < 0.35 and not agree):
            return keys(dense)
        if coverage >= 0.6:
            return keys(lexical)
        return keys(rrf_fuse([keys(lexical), keys(dense)], 60))
    if rule == "convex minmax, two α by coverage":  # BM25's weight α_lo below coverage t, α_hi from it
        cut, low, high = p
        return keys(convex_fuse(lexical, dense, high if lexical and coverage >= cut else low, "minmax"))
    if rule == "convex minmax, α ramped by coverage":  # BM25's weight α_hi · min(1, coverage / t)^g
        cut, high, power = p
        alpha = high * min(1.0, coverage / cut) ** power if lexical else 0.0
        return keys(convex_fuse(lexical, dense, alpha, "minmax"))
    if rule == "convex minmax, three α by coverage":  # α_lo below 0.35, α_mid to t2, α_hi from t2
        cut, low, middle, high = p
        alpha = 0.0 if not lexical else low if coverage < 0.35 else middle if coverage < cut else high
        return keys(convex_fuse(lexical, dense, alpha, "minmax"))
    if rule == "convex minmax, routed low unless the sides agree":
        top, alpha = p
        if not lexical or (coverage < 0.35 and lexical[0][0] not in keys(dense)[: int(top)]):
            return keys(dense)
        return keys(convex_fuse(lexical, dense, alpha, "minmax"))
    if rule == "rrf@d":
        fused = keys(rrf_fuse([keys(lexical)[: int(p)], keys(dense)[: int(p)]], 60))
        return list(dict.fromkeys(fused + keys(dense)))
    if rule.endswith("routed low") and (not lexical or coverage < 0.35):
        return keys(dense)
    norm = rule.split()[1]
    return keys(convex_fuse(lexical, dense, p, norm))


def score(case: dict, rule: str, p: float | None = None) -> dict[str, float]:
    read = case["read"]
    if rule == "dense, as typed":
        results = [[read["hits"][k] for k, _ in read["typed"]]]
    elif rule == "routed, message unsplit":
        results = [[read["hits"][k] for k in ranking(read["parts"][-1], "routed", p)]]
    else:
        parts = read["parts"][:-1] if len(read["parts"]) > 1 else read["parts"]  # the unsplit message is last
        results = [[read["hits"][k] for k in ranking(part, rule, p)] for part in parts]
    hits = results[0][:10] if len(results) == 1 else interleave(results, 10)
    figures = _scores(hits, case["expected"])
    return {"ndcg@10": figures["ndcg@10"], "r@1": figures["recall@1"]}


def mean(cases: list[dict], rule: str, p: float | None = None) -> dict[str, float]:
    rows = [score(c, rule, p) for c in cases]
    n = max(1, len(rows))
    return {key: round(sum(r[key] for r in rows) / n, 4) for key in ("ndcg@10", "r@1")}


def fit(pool: list[dict], rule: str) -> float:
    """The parameter with the best mean nDCG@10 on `pool` (the smaller on a tie)."""
    grid = FITTED[rule]  # the earlier (smaller) parameter on a tie
    return max(grid, key=lambda p: (mean(pool, rule, p)["ndcg@10"], -grid.index(p)))


def study(cases: list[dict]) -> dict:
    """Every rule on every set × kind, fitted leave-one-set-out and leave-one-kind-out."""
    sets = sorted({c["set"] for c in cases})
    fitting = [c for c in cases if c["set"] not in REPORTED_ONLY]
    table: dict = {}
    for name in sets:
        pool = [c for c in fitting if c["set"] != name]
        params = {rule: fit(pool, rule) for rule in FITTED}
        for kind in KINDS:
            own = [c for c in cases if c["set"] == name and c["kind"] == kind]
            if not own:
                continue
            row = {rule: mean(own, rule) for rule in (*FIXED, *DENSE_WAYS[1:])}
            row |= {f"{rule} ({params[rule]})": mean(own, rule, params[rule]) for rule in FITTED}
            better = better_side(row)
            for label, figures in row.items():
                if fused(label):
                    rule = label.split(" (")[0]
                    figures |= questions_against(own, rule, params.get(rule), better)
            row["dense"] |= questions_against(own, "dense", None, "dense, body")
            table[f"{name} | {kind} (n={len(own)})"] = row
    by_kind: dict = {}
    for kind in KINDS:
        pool = [c for c in fitting if c["kind"] != kind]
        params = {rule: fit(pool, rule) for rule in FITTED}
        own = [c for c in fitting if c["kind"] == kind]
        row = {rule: mean(own, rule) for rule in FIXED}
        row |= {f"{rule} ({params[rule]})": mean(own, rule, params[rule]) for rule in FITTED}
        by_kind[f"{kind} (n={len(own)})"] = row
    return {
        "by set and kind (leave-one-set-out)": table,
        "by kind (leave-one-kind-out)": by_kind,
        "verdict": verdict(table),
        "intervals": intervals(cases),
    }


def paired_interval(cases: list[dict], rule: str, p: object, side: str, p_side: object = None) -> dict[str, float]:
    """The mean of (rule − side) nDCG@10 over a cell's questions and its 95 % paired-bootstrap interval: the
    questions resampled with replacement (tasks/retrieval/tuning.paired_interval: 2,000 times, seeded), the same
    draw for both."""
    from tasks.retrieval.tuning import paired_interval as interval

    return interval([score(c, rule, p)["ndcg@10"] - score(c, side, p_side)["ndcg@10"] for c in cases])


def intervals(cases: list[dict]) -> dict:
    """Per set × kind: korpus's hybrid as served against the cell's better side, and dense against plain e5 (the
    chunk's body alone), each as a paired-bootstrap 95 % interval; a cell under 300 questions is marked small."""
    out: dict = {}
    rule, p = SERVED_DEFAULT
    for name in sorted({c["set"] for c in cases}):
        for kind in KINDS:
            own = [c for c in cases if c["set"] == name and c["kind"] == kind]
            if not own:
                continue
            sides = {side: mean(own, side)["ndcg@10"] for side in ("bm25", "dense")}
            better = max(sides, key=lambda side: sides[side])
            out[f"{name} | {kind}"] = {
                "n": len(own),
                "small": len(own) < 300,
                "better side": better,
                "hybrid − better": paired_interval(own, rule, p, better),
                "dense − plain e5": paired_interval(own, "dense", None, "dense, body"),
            }
    return out


def questions_against(cases: list[dict], rule: str, p: object, side: str) -> dict[str, int]:
    """How many of a cell's questions `rule` ranks worse and better than `side` (nDCG@10 each): a cell's mean gap
    read as questions (in the sample's nine, one question moves the mean by about 0.03)."""
    pairs = [(score(c, rule, p)["ndcg@10"], score(c, side)["ndcg@10"]) for c in cases]
    worse, better = sum(a < b - 1e-9 for a, b in pairs), sum(a > b + 1e-9 for a, b in pairs)
    return {"questions worse": worse, "questions better": better}


def better_side(row: dict) -> str:
    """The side, bm25 or dense, with the higher nDCG@10 in a cell (bm25 on a tie)."""
    return max(("bm25", "dense"), key=lambda side: row[side]["ndcg@10"])


def fused(label: str) -> bool:
    """Whether a cell's row label is a fusion rule (not one side, nor a way of embedding for dense)."""
    return label != "bm25" and not label.startswith("dense")


def verdict(table: dict) -> dict:
    """Per rule: the cells where it falls more than 0.005 below the better side, and its worst deficit."""
    out: dict = {}
    for cell, row in table.items():
        better = row[better_side(row)]["ndcg@10"]
        for rule, figures in row.items():
            if not fused(rule):
                continue
            name = rule.split(" (")[0]
            entry = out.setdefault(name, {"cells": 0, "below": [], "worst": 0.0})
            entry["cells"] += 1
            gap = round(figures["ndcg@10"] - better, 4)
            if gap < -0.005:
                entry["below"].append(f"{cell}: {gap:+.3f} ({_worse_better(figures)})")
            entry["worst"] = min(entry["worst"], gap)
        # item 2: korpus's dense side against plain e5 over the same passages (the chunk's body alone)
        entry = out.setdefault("dense against plain e5 (dense, body)", {"cells": 0, "below": [], "worst": 0.0})
        entry["cells"] += 1
        gap = round(row["dense"]["ndcg@10"] - row["dense, body"]["ndcg@10"], 4)
        if gap < 0:
            entry["below"].append(f"{cell}: {gap:+.3f} ({_worse_better(row['dense'])})")
        entry["worst"] = min(entry["worst"], gap)
    return out


def _worse_better(figures: dict) -> str:
    worse, better = figures.get("questions worse", "?"), figures.get("questions better", "?")
    return f"questions worse {worse}, better {better}"


def cases_of(name: str, data: Path, questions: Path) -> list[dict]:
    asked = [q for q in load_questions(questions) if q.type not in SKIP and q.expected]
    candidates = Candidates(data)
    try:
        rng, cases = random.Random(48), []
        for kind in KINDS:
            texts = [kind_of(q.question, kind, rng, asked[(n + 1) % len(asked)].question) for n, q in enumerate(asked)]
            scopes = [q.scopes or candidates.settings.default_scopes for q in asked]
            read = candidates.read(list(zip(texts, scopes, strict=True)))
            for n, q in enumerate(asked):
                expected = list(q.expected) + (
                    list(asked[(n + 1) % len(asked)].expected) if kind == "two in one" else []
                )
                cases.append({"set": name, "kind": kind, "type": q.type, "expected": expected, "read": read[n]})
    finally:
        candidates.close()
    return cases


def as_served(sets: dict[str, tuple[Path, Path]]) -> dict:
    """Each set through `evaluate` — the Retriever `korpus search` serves, identifier pins, meta parts, no-answer
    and access checks included — with each `KORPUS_HYBRID_FUSION`, beside its two sides."""
    from tasks.retrieval.evaluation import evaluate

    out: dict = {}
    for name, (data, questions) in sets.items():
        asked = load_questions(questions)
        with SqliteIndex(Settings(data=data).index_path) as index:
            embedder = Embedder(embed_model_path(Settings(data=data)))
            row = {}
            for label, retriever, fusion, low in (
                ("bm25", "bm25", "routed", None),
                ("dense", "dense", "routed", None),
                ("hybrid routed", "hybrid", "routed", None),
                ("hybrid convex", "hybrid", "convex", None),
                ("hybrid default: convex, α 0.3 below coverage 0.35", "hybrid", "convex", 0.3),
            ):
                settings = Settings(data=data, hybrid_fusion=fusion, hybrid_alpha_low=low)
                ranker = Retriever.from_settings(index.searcher, settings)
                report = evaluate(
                    asked,
                    index.searcher,
                    embedder,
                    retriever,
                    settings.default_scopes,
                    settings.no_answer_threshold,
                    ranker,
                )
                row[label] = {
                    "ndcg@10": report["ndcg@10"],
                    "r@1": report["recall@1"],
                    "n": report["n"],
                    "by_type": {t: v["ndcg@10"] for t, v in report["by_type"].items()},
                    "checks": {t: v["passed"] for t, v in report["checks"].items()},
                    "leaks": report["leaks"],
                }
            out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--only", nargs="+")
    parser.add_argument(
        "--as-served",
        action="store_true",
        help="evaluate each set with the served retriever, routed and convex, instead of the study",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", type=Path, help="read every message once into this pickle; reuse it if it exists")
    parser.add_argument("--rules", nargs="+", help="fitted rules to study (default: all)")
    parser.add_argument(
        "--intervals",
        action="store_true",
        help="only the paired-bootstrap intervals of the hybrid as served (no fitting: minutes, not an hour)",
    )
    args = parser.parse_args()
    for rule in set(FITTED) - set(args.rules or FITTED):
        del FITTED[rule]
    with tempfile.TemporaryDirectory(prefix="korpus-fusion-") as tmp:
        keep = args.keep or Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        home = keep / "prefect"
        home.mkdir(exist_ok=True)
        os.environ["PREFECT_HOME"] = str(home)
        try:
            sets = build(keep, args.only)
        finally:
            stop_server(home)
        if args.as_served:
            print(json.dumps(as_served(sets), ensure_ascii=False, indent=2))
            return
        if args.cases and args.cases.exists():
            cases = pickle.loads(args.cases.read_bytes())
        else:
            cases = [c for name, (data, questions) in sets.items() for c in cases_of(name, data, questions)]
            if args.cases:
                args.cases.write_bytes(pickle.dumps(cases))
    if args.intervals:
        report = {"intervals": intervals(cases)}
        if args.json:
            print(json.dumps(report, ensure_ascii=False, indent=2))
        else:
            print_intervals(report)
        return
    report = study(cases)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print_report(report)


def print_report(report: dict, out: Callable[[str], None] = print) -> None:
    for section in ("by set and kind (leave-one-set-out)", "by kind (leave-one-kind-out)"):
        out(f"== {section}: nDCG@10 (R@1)")
        for cell, row in report[section].items():
            out(f"  {cell}")
            for rule, f in row.items():
                out(f"    {rule:>34}: {f['ndcg@10']:.3f} ({f['r@1']:.3f})")
    print_intervals(report, out)
    out("== rules against the better side (−0.005 allowed); dense against plain e5 (nothing allowed)")
    for rule, v in report["verdict"].items():
        out(f"  {rule}: {len(v['below'])} of {v['cells']} cells below, worst {v['worst']:+.3f}")
        for line in v["below"][:8]:
            out(f"      {line}")


def print_intervals(report: dict, out: Callable[[str], None] = print) -> None:
    out("== korpus's hybrid as served − the better side, and dense − plain e5: nDCG@10, paired bootstrap 95 %")
    out("| set | kind | n | better side | hybrid − better [95 %] | dense − plain e5 [95 %] |")
    out("|---|---|---|---|---|---|")
    for cell, row in report["intervals"].items():
        name, kind = cell.split(" | ")
        h, d = row["hybrid − better"], row["dense − plain e5"]
        n = f"{row['n']}{' (small)' if row['small'] else ''}"
        out(
            f"| {name} | {kind} | {n} | {row['better side']} | {h['mean']:+.3f} [{h['low']:+.3f}, {h['high']:+.3f}] "
            f"| {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] |"
        )


if __name__ == "__main__":
    main()
