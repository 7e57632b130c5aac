"""The search page at `/` against the API it sits on (#51: p95 within 1.5× of `/search`), side by side.

    .venv/bin/python benchmarks/search_page.py --data DIR [--rounds 5]

The same questions (the demo archive's eval set, eval/sample-archive.jsonl, and the archive-style questions when the
data holds that set) through `GET /search?q=…&k=8` — what an LLM front end calls — and `GET /?q=…` — the page, which
asks the retriever for its top 50 to filter and count, renders them and ten snippets. In one process (FastAPI's
TestClient, no network), alternating the two per question, every round; p50 and p95 in milliseconds and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient

from korpus.apps.api import create_app
from korpus.core.settings import Settings
from tasks.retrieval.evaluation import load_questions

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--questions", type=Path, default=ROOT / "eval" / "sample-archive.jsonl")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    questions = [q.question for q in load_questions(args.questions)]
    times: dict[str, list[float]] = {"/search": [], "/": []}
    with TestClient(create_app(Settings(data=args.data))) as http:
        http.get("/search", params={"q": "прогрев"})  # models loaded before the clock
        http.get("/", params={"q": "прогрев"})
        for _ in range(args.rounds):
            for question in questions:
                for path, params in (("/search", {"q": question, "k": 8}), ("/", {"q": question})):
                    started = time.perf_counter()
                    assert http.get(path, params=params).status_code == 200
                    times[path].append(1000 * (time.perf_counter() - started))
    row = {
        path: {"p50_ms": round(statistics.median(t), 1), "p95_ms": round(statistics.quantiles(t, n=20)[18], 1)}
        for path, t in times.items()
    }
    row["p95 ratio"] = round(row["/"]["p95_ms"] / row["/search"]["p95_ms"], 2)
    print(json.dumps({"questions": len(questions), "rounds": args.rounds, **row}, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
