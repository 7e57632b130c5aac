"""korpus's Russian analysis (tasks/text/analysis.py) against Lucene's own `RussianAnalyzer` and against the real
OpenSearch node's `_analyze` with its built-in `russian` analyzer, token for token on the 300-sentence golden fixture,
and the stop sets compared word for word.

Lucene comes from Maven Central: the jars the OpenSearch node is assembled from (infra/opensearch/node, `make
opensearch`, Lucene 9.12.1, Apache-2.0). Java is Debian's OpenJDK 17 (`make system`). A tiny program
(tests/fixtures/analyzer/lucene/KorpusAnalyze.java) is compiled here and reads the sentences.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.text.analysis import RUSSIAN_STOP_WORDS, analyse

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "analyzer"
LUCENE = ROOT / "infra" / "opensearch" / "node" / "target" / "lib"


@pytest.fixture(scope="module")
def lucene(tmp_path_factory: pytest.TempPathFactory) -> dict:
    for tool in ("java", "javac"):
        assert shutil.which(tool), f"{tool} is not installed (make system installs openjdk-17-jdk-headless)"
    jars = sorted(LUCENE.glob("lucene-*.jar"))
    assert jars, f"no Lucene jars in {LUCENE}: run `make opensearch`"
    classpath = os.pathsep.join(str(j) for j in jars)
    classes = tmp_path_factory.mktemp("lucene-classes")
    source = FIXTURE / "lucene" / "KorpusAnalyze.java"
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(source)], check=True, timeout=300)
    sentences = (FIXTURE / "sentences.txt").read_text(encoding="utf-8")
    run = subprocess.run(
        ["java", "-cp", f"{classpath}{os.pathsep}{classes}", "KorpusAnalyze"],
        input=sentences.encode("utf-8"),
        capture_output=True,
        check=True,
        timeout=300,
    )
    version, stop, *rows = run.stdout.decode("utf-8").split("\n")
    texts = [line for line in sentences.split("\n") if line.strip()]
    return {
        "version": version,
        "stop": set(stop.split("\t")),
        "tokens": [r.split("\t") if r else [] for r in rows],
        "texts": texts,
    }


def test_lucene_runs_the_version_opensearch_builds_on(lucene: dict) -> None:
    assert lucene["version"].startswith("lucene 9.")  # OpenSearch 2.x is Lucene 9; 3.x Lucene 10 (same analyzer)


def test_stop_words_equal_lucenes_default_stop_set(lucene: dict) -> None:
    assert lucene["stop"] == set(RUSSIAN_STOP_WORDS)


def test_every_golden_sentence_analyses_as_lucene_does(lucene: dict) -> None:
    golden = [json.loads(line) for line in (FIXTURE / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [g["text"] for g in golden] == lucene["texts"]
    differ = [
        (g["text"], g["tokens"], theirs)
        for g, theirs in zip(golden, lucene["tokens"], strict=False)
        if g["tokens"] != theirs or analyse(g["text"]) != theirs
    ]
    assert differ == [], f"{len(differ)} sentences differ from Lucene, first: {differ[:3]}"


def test_every_golden_sentence_analyses_as_the_opensearch_node_does(opensearch_url: str) -> None:
    """The node's own `russian` analyzer (`_analyze`), on every sentence: what its BM25 side indexes."""
    import httpx

    golden = [json.loads(line) for line in (FIXTURE / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    differ = []
    with httpx.Client(base_url=opensearch_url, timeout=30) as client:
        for g in golden:
            answer = client.post("/_analyze", json={"analyzer": "russian", "text": g["text"]})
            theirs = [t["token"] for t in answer.raise_for_status().json()["tokens"]]
            if theirs != g["tokens"]:
                differ.append((g["text"], g["tokens"], theirs))
    assert len(golden) == 300 and differ == [], f"{len(differ)} sentences differ from the node, first: {differ[:3]}"
