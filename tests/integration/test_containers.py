"""Letters, mailboxes, archives and spreadsheets through a real refresh (Prefect, Dask, the embedding model, SQLite):
real third-party messages and a real XLS budget (tests/fixtures/real-archive-2) beside letters built here. No file
is `unsupported-type`; a subject written in koi8-r or cp1251 finds its letter; an attachment inside an archive inside
a letter is cited by that chain and served under the letter's access; a number in a spreadsheet row is found with its
sheet and rows; a removed or relabelled letter takes its children with it."""

from __future__ import annotations

import shutil
from email.header import Header
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.corpus_refresh import run_refresh
from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve
from tests.builders import zipped

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive-2"
MANIFEST = "defaults: {owner: канцелярия, access: public}\nrules:\n  - {match: 'кадры/**', access: hr}\n"


def letter_with_an_archive() -> bytes:
    message = MIMEMultipart()
    message["From"] = "Отдел кадров <hr@example.ru>"
    message["To"] = "director@example.ru"
    message["Subject"] = Header("Документы по премированию кладовщиков", "koi8-r")
    message["Date"] = "Mon, 12 May 2003 14:02:00 +0400"
    message.attach(MIMEText("Направляю документы по премированию, архив во вложении.", "plain", "koi8-r"))
    archive = zipped(
        {
            "документы/акт.txt": "Акт проверки склада № 7: недостача ящиков не выявлена.".encode(),
            "документы/премии.csv": "ФИО;Сумма\nСмирнова А. В.;45 000\n".encode("cp1251"),
        }
    )
    part = MIMEApplication(archive, "zip")
    part.add_header("Content-Disposition", "attachment", filename=("utf-8", "", "документы.zip"))
    message.attach(part)
    return message.as_bytes()


def letter_with_a_cp1251_subject() -> bytes:
    return (
        b"From: buh@example.ru\r\nTo: sklad@example.ru\r\nSubject: "
        + "Сверка остатков угля".encode("cp1251")
        + b"\r\nContent-Type: text/plain; charset=windows-1251\r\n\r\n"
        + "Прошу сверить остатки угля на складе к пятнице.".encode("cp1251")
    )


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Settings, dict]:
    root = tmp_path_factory.mktemp("office") / "share"
    (root / "почта").mkdir(parents=True)
    (root / "кадры").mkdir()
    (root / "таблицы").mkdir()
    for path in (FIXTURES / "email").iterdir():
        shutil.copy(path, root / "почта" / path.name)
    shutil.copy(FIXTURES / "office" / "poi_57925_budget.xls", root / "таблицы")
    (root / "кадры" / "премии.eml").write_bytes(letter_with_an_archive())
    (root / "почта" / "сверка.eml").write_bytes(letter_with_a_cp1251_subject())
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    settings = Settings(data=root.parent / "data", meta_documents=False)
    summary = run_refresh(root, settings)
    return root, settings, summary


def search(settings: Settings, query: str, scopes: list[str], k: int = 3) -> list[dict]:
    with SqliteIndex(settings.index_path) as index:
        return retrieve(index.searcher, query, None, scopes, k=k, mode="bm25")


def test_nothing_is_unsupported_and_children_are_in_the_catalog(refreshed: tuple[Path, Settings, dict]) -> None:
    _, settings, _ = refreshed
    with SqliteIndex(settings.index_path) as index:
        items = index.quarantine_items("open")
        rows = {r["source_id"]: r for r in index.sources() if r["lifecycle"] == "current"}
    assert not [i for i in items if "unsupported-type" in i["reasons"]], items
    for child in (
        "почта/flanker_enclosed_rfc822.eml › thanks.eml",
        "почта/mimekit_tnef_koi8r.eml › winmail.dat",
        "кадры/премии.eml › документы.zip",
        "кадры/премии.eml › документы.zip › документы/акт.txt",
        "кадры/премии.eml › документы.zip › документы/премии.csv",
    ):
        assert rows[child]["chunks"] > 0, child
    assert rows["кадры/премии.eml › документы.zip › документы/премии.csv"]["kind"] == "sheet"
    assert {r["access"] for k, r in rows.items() if k.startswith("кадры/")} == {"hr"}


def test_subjects_in_koi8r_and_cp1251_find_their_letters(refreshed: tuple[Path, Settings, dict]) -> None:
    _, settings, _ = refreshed
    hits = search(settings, "сверка остатков угля", ["public"])
    assert hits[0]["source_id"] == "почта/сверка.eml"
    assert hits[0]["text"].startswith("[сверка.eml · buh@example.ru → sklad@example.ru · «Сверка остатков угля»]")
    hits = search(settings, "документы по премированию кладовщиков", ["public", "hr"])
    assert hits[0]["source_id"] == "кадры/премии.eml"
    assert "12.05.2003 14:02 · Отдел кадров → director@example.ru" in hits[0]["text"]
    hits = search(settings, "Автоматический ответ подсистемы обмена данными Почта России", ["public"])
    assert hits[0]["source_id"] == "почта/poi_cyrillic_message.msg"


def test_an_attachment_in_an_archive_in_a_letter_is_cited_and_kept_to_its_scope(
    refreshed: tuple[Path, Settings, dict],
) -> None:
    _, settings, _ = refreshed
    assert not search(settings, "недостача ящиков не выявлена", ["public"])
    [hit, *_] = search(settings, "недостача ящиков не выявлена", ["hr"])
    assert hit["source_id"] == "кадры/премии.eml › документы.zip › документы/акт.txt"
    assert hit["text"].startswith("[премии.eml › документы.zip › документы/акт.txt]")
    [row, *_] = search(settings, "Смирнова 45 000", ["hr"])
    assert row["source_id"].endswith("документы/премии.csv") and "лист «премии» · строка 2" in row["text"]


def test_a_number_in_a_spreadsheet_row_is_found_with_its_sheet_and_rows(
    refreshed: tuple[Path, Settings, dict],
) -> None:
    _, settings, _ = refreshed
    hits = search(settings, "источники внешнего финансирования бюджетов 620", ["public"])
    assert hits[0]["source_id"] == "таблицы/poi_57925_budget.xls"
    assert hits[0]["text"].startswith("[poi_57925_budget.xls · лист «Дефициты» · строки ")


def test_sources_shows_the_tree(refreshed: tuple[Path, Settings, dict]) -> None:
    _, settings, _ = refreshed
    out = CliRunner().invoke(app, ["sources", "--data", str(settings.data)]).output
    lines = [line.split("  v=")[0] for line in out.splitlines()]
    assert "current     кадры/премии.eml" in lines
    assert "current     └─ документы.zip" in lines and "current        └─ документы/акт.txt" in lines


def test_relabelling_or_removing_a_letter_takes_its_children_along(refreshed: tuple[Path, Settings, dict]) -> None:
    root, settings, _ = refreshed
    (root / "korpus.yaml").write_text(MANIFEST + "  - {match: 'кадры/премии.eml', access: public}\n", encoding="utf-8")
    again = run_refresh(root, settings)
    assert again["chunks_embedded"] == 0  # a relabel: nothing read again
    [hit, *_] = search(settings, "недостача ящиков не выявлена", ["public"])
    assert hit["source_id"].endswith("документы/акт.txt")
    (root / "кадры" / "премии.eml").unlink()
    run_refresh(root, settings)
    assert not search(settings, "недостача ящиков не выявлена", ["public", "hr"])
    with SqliteIndex(settings.index_path) as index:
        current = {r["source_id"] for r in index.sources() if r["lifecycle"] == "current"}
    assert not [s for s in current if s.startswith("кадры/премии.eml")]


def test_a_members_name_stays_in_its_scope_when_a_rule_narrows_it_later(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """#61 item 4, as the issue reproduced it: a zip of an inventory and a personnel reference, public; then a rule
    `пакет.zip › *Кривошеин*` → `hr`. The member moves to `hr`, and so does its name: the next refresh reads the
    archive's page again, and `public` no longer finds «Кривошеин» in its listing (before: the archive's page kept
    naming the member). The same holds for a letter's attachments."""
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults: {owner: канцелярия, access: public}\n", encoding="utf-8")
    members = {"Опись_1.txt": "Опись дел архива отдела.", "Характеристика Кривошеин Аркадий.txt": "Характеристика."}
    (root / "пакет.zip").write_bytes(zipped({name: text.encode() for name, text in members.items()}))
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    run_refresh(root, settings)
    assert any(h["source_id"] == "пакет.zip" for h in search(settings, "Кривошеин", ["public"], k=5))

    rule = "  - {match: 'пакет.zip › *Кривошеин*', access: hr}\n"
    (root / "korpus.yaml").write_text(
        f"defaults: {{owner: канцелярия, access: public}}\nrules:\n{rule}", encoding="utf-8"
    )
    summary = run_refresh(root, settings)
    assert summary["changes"].get("changed", 0) >= 1, summary  # the archive's page was read again
    public = search(settings, "Кривошеин", ["public"], k=5)
    assert public == [], [h["source_id"] for h in public]
    assert any("Кривошеин" in h["source_id"] for h in search(settings, "Кривошеин", ["hr"], k=5))
    with SqliteIndex(settings.index_path) as index:
        _source, pages = index.current_source("пакет.zip")  # type: ignore[misc]
    listing = "\n".join(p.text for p in pages)
    assert "Опись_1.txt" in listing and "Кривошеин" not in listing and "файлов: 1" in listing

    (root / "korpus.yaml").write_text("defaults: {owner: канцелярия, access: public}\n", encoding="utf-8")
    run_refresh(root, settings)  # the rule goes: the name is the archive's to list again
    assert any(h["source_id"] == "пакет.zip" for h in search(settings, "Кривошеин", ["public"], k=5))
