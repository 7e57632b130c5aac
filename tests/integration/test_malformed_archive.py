"""A malformed archive: 30 kinds of bad entries beside good files with odd names. The refresh completes, every
bad entry is quarantined with a reason (each reason has its advice: korpus/datamodel.py REASON_ADVICE), every
good file is indexed, nothing outside the root is read, and a file changed or removed during the run is left
to the next refresh."""

from __future__ import annotations

import io
import os
import random
import struct
import wave
import zlib
from pathlib import Path

import pymupdf
import pytest

import flows.corpus_refresh
import flows.refresh_tasks
from korpus.datamodel import REASON_ADVICE, ReasonCode
from korpus.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TEXT = "Протокол заседания комиссии по приёмке оборудования. Решили: насосы принять без замечаний."
ROOT_IS_ALL_POWERFUL = os.geteuid() == 0  # root reads a chmod-000 file: then it is a good file


def text_pdf(text: str = TEXT, width: float = 595, height: float = 842, fontsize: float = 11) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=width, height=height)
    page.insert_textbox(pymupdf.Rect(50, 50, width - 50, height - 50), text, fontsize=fontsize, fontfile=FONT,
                        fontname="dv")  # fmt: skip
    return doc.tobytes()


def broken_xref(data: bytes) -> bytes:
    """The cross-reference offset points nowhere: a reader must rebuild the table by scanning the file."""
    head, _, _ = data.rpartition(b"startxref")
    return head + b"startxref\n999999\n%%EOF\n"


def zero_pages() -> bytes:
    return (b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [] "
            b"/Count 0 >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n")  # fmt: skip


def jbig2_corrupt() -> bytes:
    """A page whose only content is a JBIG2 image with a corrupt stream."""
    doc = pymupdf.open()
    page = doc.new_page()
    image = doc.get_new_xref()
    doc.update_object(image, "<< /Type /XObject /Subtype /Image /Width 800 /Height 1000 /ColorSpace /DeviceGray "
                             "/BitsPerComponent 1 /Filter /JBIG2Decode >>")  # fmt: skip
    doc.update_stream(image, random.Random(2).randbytes(4000), new=True, compress=False)
    doc.xref_set_key(page.xref, "Resources", f"<< /XObject << /Im0 {image} 0 R >> >>")
    contents = doc.get_new_xref()
    doc.update_object(contents, "<< >>")
    doc.update_stream(contents, b"q 595 0 0 842 0 0 cm /Im0 Do Q", new=True)
    doc.xref_set_key(page.xref, "Contents", f"{contents} 0 R")
    return doc.tobytes()


def dingbats() -> bytes:
    """Russian words set in ZapfDingbats: a layer of symbols, a page of symbols."""
    doc = pymupdf.open()
    page = doc.new_page()
    for i in range(20):
        page.insert_text((50, 60 + 30 * i), "Протокол заседания комиссии " * 2, fontname="zadb", fontsize=14)
    return doc.tobytes()


def encrypted() -> bytes:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "секрет", fontfile=FONT, fontname="dv")
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u")


def giant_png() -> bytes:
    """A 20,000 × 20,000 px PNG header (400 Mpx): a decompression bomb is refused before it is decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")
    )


def silent_wav(seconds: float = 3.0) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * int(16000 * seconds))
    return out.getvalue()


def build(root: Path, outside: Path) -> tuple[dict[str, set[ReasonCode]], set[str]]:
    """The archive: bad entries with the reasons each may end with, and the good files' ids."""
    rnd = random.Random(7)
    good_pdf = text_pdf()
    bad: dict[str, tuple[bytes, set[ReasonCode]]] = {
        "pdf/пустой.pdf": (b"", {ReasonCode.unreadable_file}),
        "pdf/обрезанный.pdf": (good_pdf[: len(good_pdf) // 3], {ReasonCode.unreadable_file, ReasonCode.empty_text}),
        "pdf/не_pdf.pdf": ("просто текст с расширением pdf".encode(), {ReasonCode.unreadable_file}),
        "pdf/с_паролем.pdf": (encrypted(), {ReasonCode.unreadable_file}),
        "pdf/без_страниц.pdf": (zero_pages(), {ReasonCode.unreadable_file}),
        "pdf/jbig2_битый.pdf": (jbig2_corrupt(), {ReasonCode.empty_text, ReasonCode.page_quality}),
        "pdf/шрифт_dingbats.pdf": (dingbats(), {ReasonCode.page_quality, ReasonCode.empty_text}),
        "img/пустой.png": (b"", {ReasonCode.unreadable_file}),
        "img/обрезанный.jpg": (b"\xff\xd8\xff\xe0" + rnd.randbytes(100), {ReasonCode.unreadable_file}),
        "img/текст.tif": ("это не картинка".encode(), {ReasonCode.unreadable_file}),
        "img/20000px.png": (giant_png(), {ReasonCode.unreadable_file}),
        "djvu/пустой.djvu": (b"", {ReasonCode.unreadable_file}),
        "djvu/битый.djvu": (b"AT&TFORM" + rnd.randbytes(300), {ReasonCode.unreadable_file}),
        "office/пустой.docx": (b"", {ReasonCode.unreadable_file}),
        "office/битый.docx": (b"PK\x03\x04" + rnd.randbytes(200), {ReasonCode.unreadable_file}),
        "office/текст.doc": ("это не документ Word".encode(), {ReasonCode.unreadable_file}),
        "office/битый.odt": (b"PK\x03\x04" + rnd.randbytes(64), {ReasonCode.unreadable_file}),
        "text/неизвестная_кодировка.txt": (bytes(rnd.randrange(128, 256) for _ in range(2000)),
                                           {ReasonCode.unreadable_file}),
        "text/двоичный.txt": (b"\x7fELF\x02\x01\x01\x00" * 100, {ReasonCode.unreadable_file}),
        "text/пустой.txt": (b"", {ReasonCode.unreadable_file}),
        "audio/битый.wav": (b"RIFF\x24\x00\x00\x00WAVEfmt ", {ReasonCode.unreadable_file}),
        "audio/тишина.wav": (silent_wav(), {ReasonCode.no_speech}),
        "audio/не_аудио.mp3": ("не аудио ".encode() * 50, {ReasonCode.unreadable_file}),
        "audio/пустой.ogg": (b"", {ReasonCode.unreadable_file}),
        "прочее/программа.exe": (b"MZ" + rnd.randbytes(100), {ReasonCode.unsupported_type}),
        "прочее/без_расширения": ("текст без расширения".encode(), {ReasonCode.unsupported_type}),
    }  # fmt: skip
    for rel, (data, _) in bad.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    expected = {rel: reasons for rel, (_, reasons) in bad.items()}
    (outside / "секрет.txt").write_text("Пароль от сейфа: 1234. Это лежит вне архива.", encoding="utf-8")
    links = root / "ссылки"
    links.mkdir()
    (links / "наружу.txt").symlink_to(outside / "секрет.txt")
    (links / "наружу_папка").symlink_to(outside, target_is_directory=True)  # never walked, said
    (links / "петля_а.txt").symlink_to(links / "петля_б.txt")
    (links / "петля_б.txt").symlink_to(links / "петля_а.txt")
    (links / "в_никуда.txt").symlink_to(root / "нет_такого.txt")
    os.mkfifo(links / "канал.txt")
    expected |= {
        "ссылки/наружу.txt": {ReasonCode.outside_root},
        "ссылки/наружу_папка": {ReasonCode.outside_root},
        "ссылки/петля_а.txt": {ReasonCode.unreadable_file},
        "ссылки/петля_б.txt": {ReasonCode.unreadable_file},
        "ссылки/в_никуда.txt": {ReasonCode.unreadable_file},
        "ссылки/канал.txt": {ReasonCode.unreadable_file},
    }
    locked = root / "text" / "без_доступа.txt"
    locked.write_text("Записка, закрытая правами доступа к файлу.", encoding="utf-8")
    locked.chmod(0)
    good = {
        "pdf/нормальный.pdf": good_pdf,
        "pdf/битая_таблица_xref.pdf": broken_xref(text_pdf("Акт сверки взаимных расчётов за третий квартал.")),
        "pdf/лист_200_дюймов.pdf": text_pdf("Чертёж генерального плана территории завода.", 14_400, 14_400, 200),
        "имена/" + "очень_длинное_имя_" * 6 + "документа.txt": "Записка с очень длинным именем файла.".encode(),
        "имена/пробелы и — тире.txt": "Записка с пробелами в имени.".encode(),
        "имена/-начинается с дефиса.txt": "Записка, имя которой начинается с дефиса.".encode(),
        "имена/перевод\nстроки.txt": "Записка с переводом строки в имени.".encode(),
        "имена/эмодзи 📄.txt": "Записка с эмодзи в имени.".encode(),
        "имена/кавычки 'одинарные' и \"двойные\".txt": "Записка с кавычками в имени.".encode(),
        "старое/письмо_1998.txt": "Письмо директору завода о поставке угля.".encode("cp1251"),
        "a/b/c/d/e/f/g/h/глубоко.txt": "Записка на восьмом уровне вложенности папок.".encode(),
    }
    for rel, data in good.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (links / "внутрь.txt").symlink_to(root / "старое" / "письмо_1998.txt")  # inside the root: followed
    good_ids = {*good, "ссылки/внутрь.txt"}
    if ROOT_IS_ALL_POWERFUL:
        good_ids.add("text/без_доступа.txt")
    else:
        expected["text/без_доступа.txt"] = {ReasonCode.unreadable_file}
    return expected, good_ids


def test_a_malformed_archive_is_contained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tmp_path / "archive", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    expected, good_ids = build(root, outside)
    assert len(expected) >= 30
    # a file changing and one vanishing during the run: right after discovery hashed them
    (root / "меняется.txt").write_text("Первая редакция приказа об отпусках.", encoding="utf-8")
    (root / "исчезает.txt").write_text("Записка, которую удалят посреди обновления.", encoding="utf-8")
    discover = flows.refresh_tasks.discover_sources

    def discover_then_disturb(where: Path) -> list:
        found = discover(where)
        with open(root / "меняется.txt", "a", encoding="utf-8") as handle:
            handle.write(" Вторая редакция.")
        (root / "исчезает.txt").unlink()
        return found

    monkeypatch.setattr(flows.refresh_tasks, "discover_sources", discover_then_disturb)
    settings = Settings(data=tmp_path / "data")
    summary = flows.corpus_refresh.run_refresh(root, settings)
    monkeypatch.undo()

    assert sorted(summary["changed_during_run"]) == ["исчезает.txt", "меняется.txt"]
    with SqliteIndex(settings.index_path) as index:
        items = index.quarantine_items("open")
        indexed = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current" and s["chunks"]
                   and s["kind"] != "meta"}  # fmt: skip
    by_source: dict[str, set[str]] = {}
    for item in items:
        by_source.setdefault(item["source_id"], set()).update(item["reasons"])
    for source_id, reasons in expected.items():
        got = {ReasonCode(r) for r in by_source.get(source_id, set())}
        assert got and got <= reasons, (source_id, got, reasons)
        assert all(REASON_ADVICE[r] for r in got)
    assert set(by_source) == set(expected), set(by_source) ^ set(expected)
    assert indexed == good_ids, indexed ^ good_ids
    everything = " ".join(i["detail"] + (i.get("evidence") or "") for i in items)
    assert "Пароль от сейфа" not in everything  # nothing outside the root was read, not even as evidence
    with SqliteIndex(settings.index_path) as index:
        assert not retrieve(index.searcher, "пароль сейфа", None, ["public"], k=5, mode="bm25")
        assert retrieve(index.searcher, "длинным именем файла", None, ["public"], k=1, mode="bm25")

    again = flows.corpus_refresh.run_refresh(root, settings)  # the changed file is read now; nothing else
    assert again["changed_during_run"] == [] and again["changes"].get("new") == 1
    with SqliteIndex(settings.index_path) as index:
        assert "меняется.txt" in index.indexed_versions()
        hits = retrieve(index.searcher, "вторая редакция", None, ["public"], k=1, mode="bm25")
    assert hits and hits[0]["source_id"] == "меняется.txt"
