"""Model extraction of dated events for the chronology (KORPUS_LLM_URL), against a local stand-in for an
OpenAI-compatible chat-completions server (tests/integration/chat_stand_in.py: it answers scripted JSON, it is no
model). Records are validated; invalid ones are refused and counted; merging stays code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.meta.publish import read_meta

from .chat_stand_in import Script, chat_stand_in

pytestmark = pytest.mark.integration

REPLY = [
    {"date": "2024-05-15", "event": "Получен ответ министерства на запрос о ремонте.", "persons": []},  # new
    {"date": "12 марта 2023 г.", "event": "Подписан приказ.", "persons": ["Смирнова Е. В."]},  # the rules have it
    {"date": "вчера", "event": "Что-то случилось.", "persons": []},  # no date korpus can read: refused
    {"event": "Без даты."},  # no date field: refused
    {"date": "2023-02-30", "event": "Невозможная дата.", "persons": []},  # no such day: refused
    {"date": "2023", "event": "Год отчёта.", "persons": "Иванов", "extra": 1},  # wrong types, extra field: refused
]


def test_model_events_are_validated_counted_and_merged_by_code(models, tmp_path: Path) -> None:
    from flows.corpus_refresh import run_refresh

    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    (root / "приказ.txt").write_text(
        "Приказ от 12 марта 2023 г. подписала Смирнова Е. В. Ремонт начат в 2024 году.\n", encoding="utf-8"
    )
    script = Script(content="```json\n" + json.dumps(REPLY, ensure_ascii=False) + "\n```")
    with chat_stand_in(script) as url:
        settings = Settings(data=tmp_path / "data", llm_url=url, llm_model="extractor-test")
        summary = run_refresh(root, settings)["meta_documents"]
    assert len(script.requests) == 1 and script.requests[0]["model"] == "extractor-test"
    assert "Приказ от 12 марта 2023 г." in script.requests[0]["messages"][1]["content"]
    assert (summary["llm_records"], summary["llm_added"], summary["llm_refused"]) == (2, 1, 4)
    with SqliteIndex(settings.index_path) as index:
        chronology = "\n".join(read_meta(index, "chronology", ["public"])[0]["parts"])
    entries = [line for line in chronology.splitlines() if line.startswith("- ")]
    assert [e.split("(", 1)[1].split(")", 1)[0] for e in entries] == ["2023-03-12", "2024", "2024-05-15"]
    assert "Получен ответ министерства" in entries[2] and "[приказ.txt · лист 1]" in entries[2]
    assert "Подписан приказ." not in chronology  # the rules' sentence stands for 12 марта 2023

    # Switched off again: the facts are extracted anew without the model (the cache knows which variant it holds).
    plain = run_refresh(root, settings.model_copy(update={"llm_url": None}))["meta_documents"]
    assert plain["facts_extracted"] == 1 and "llm_records" not in plain


def test_a_source_whose_facts_cannot_be_read_is_listed_bare_and_the_refresh_completes(
    models, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.corpus_refresh import run_refresh

    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text("Записка от 12 марта 2023 г. о ремонте кровли.\n", encoding="utf-8")

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("an analyser fault")

    monkeypatch.setattr("tasks.meta.publish.extract_facts", broken)
    settings = Settings(data=tmp_path / "data")
    summary = run_refresh(root, settings)
    assert summary["chunks_indexed"] == 1 and summary["meta_documents"]["facts_failed"] == 1
    with SqliteIndex(settings.index_path) as index:
        toc = "\n".join(read_meta(index, "toc", ["public"])[0]["parts"])
        assert "записка.txt — «записка.txt»" in toc and "Всего документов в коллекции: 1" in toc
