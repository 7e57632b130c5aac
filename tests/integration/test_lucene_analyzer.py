"""korpus's Russian analysis (tasks/text/analysis.py) against Lucene's own `RussianAnalyzer` — the analyzer OpenSearch's
built-in `russian` is — token for token on the 300-sentence golden fixture, and the stop sets compared word for word.

Lucene comes from a registry package: the Anserini fat jar inside PyPI's `pyserini` 1.6.0 sdist (Lucene 9.9.1,
Apache-2.0), fetched by `make lucene` (part of `make setup`) into `.cache/lucene/`; `KORPUS_LUCENE_JAR` points
elsewhere. Java is Debian's OpenJDK 17 (`make system`). A tiny program (tests/fixtures/analyzer/lucene/
KorpusAnalyze.java) is compiled here and reads the sentences. Skipped, with the reason, only if Java cannot start.
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
JAR = Path(os.environ.get("KORPUS_LUCENE_JAR", ROOT / ".cache" / "lucene" / "anserini-1.7.1-fatjar.jar"))


def _java_starts() -> str | None:
    """Why Java cannot run here, or None when it can."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make system installs openjdk-17-jdk-headless)"
    try:
        subprocess.run(["java", "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"java does not start: {exc}"
    return None


@pytest.fixture(scope="module")
def lucene(tmp_path_factory: pytest.TempPathFactory) -> dict:
    why = _java_starts()
    if why:
        pytest.skip(why)
    assert JAR.is_file(), f"no Lucene jar at {JAR}: run `make lucene` (or set KORPUS_LUCENE_JAR)"
    classes = tmp_path_factory.mktemp("lucene-classes")
    source = FIXTURE / "lucene" / "KorpusAnalyze.java"
    subprocess.run(["javac", "-cp", str(JAR), "-d", str(classes), str(source)], check=True, timeout=300)
    sentences = (FIXTURE / "sentences.txt").read_text(encoding="utf-8")
    run = subprocess.run(
        ["java", "-cp", f"{JAR}{os.pathsep}{classes}", "KorpusAnalyze"],
        input=sentences.encode("utf-8"), capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    version, stop, *rows = run.stdout.decode("utf-8").split("\n")
    texts = [line for line in sentences.split("\n") if line.strip()]
    return {"version": version, "stop": set(stop.split("\t")), "tokens": [r.split("\t") if r else [] for r in rows],
            "texts": texts}  # fmt: skip


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
