"""A malformed archive: over 40 kinds of bad entries beside good files with odd names. The refresh completes (`korpus
refresh` exits 0), every bad entry is quarantined with a plain reason (each reason has its advice:
korpus/core/datamodel.py REASON_ADVICE), every good file is indexed, nothing outside the root is read, no child process
is left running, and a file changed or removed during the run is left to the next refresh.

Faults no file can carry are injected, each named as such: a DjVu decoder that hangs (a `ddjvu` on PATH that
sleeps past a shortened timeout), a PDF page whose renderer raises, and Whisper raising on one recording."""

from __future__ import annotations

import gzip
import io
import os
import random
import struct
import subprocess
import wave
import zipfile
import zlib
from pathlib import Path

import pymupdf
import pytest

import flows.corpus_refresh
import flows.refresh_tasks
import tasks.readers.djvu
import tasks.readers.pdf
from korpus.core.datamodel import REASON_ADVICE, ReasonCode
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve
from tests.builders import zipped

pytestmark = pytest.mark.integration
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TEXT = "Протокол заседания комиссии по приёмке оборудования. Решили: насосы принять без замечаний."
ROOT_IS_ALL_POWERFUL = os.geteuid() == 0  # root reads a chmod-000 file: then it is a good file


def text_pdf(text: str = TEXT, width: float = 595, height: float = 842, fontsize: float = 11) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=width, height=height)
    page.insert_textbox(
        pymupdf.Rect(50, 50, width - 50, height - 50), text, fontsize=fontsize, fontfile=FONT, fontname="dv"
    )
    return doc.tobytes()


def broken_xref(data: bytes) -> bytes:
    """The cross-reference offset points nowhere: a reader must rebuild the table by scanning the file."""
    head, _, _ = data.rpartition(b"startxref")
    return head + b"startxref\n999999\n%%EOF\n"


def zero_pages() -> bytes:
    return (
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [] "
        b"/Count 0 >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def jbig2_corrupt() -> bytes:
    """A page whose only content is a JBIG2 image with a corrupt stream."""
    doc = pymupdf.open()
    page = doc.new_page()
    image = doc.get_new_xref()
    doc.update_object(
        image,
        "<< /Type /XObject /Subtype /Image /Width 800 /Height 1000 /ColorSpace /DeviceGray "
        "/BitsPerComponent 1 /Filter /JBIG2Decode >>",
    )
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


def giant_png(side: int = 20_000) -> bytes:
    """A PNG header of side × side 1-bit pixels and a few bytes of data: at 20,000 (400 Mpx, within the decode
    limit) the cut data makes the file unreadable; at 30,000 it is over the limit and never decoded (#46 item 2)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
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


TOLERATED: dict[str, set[ReasonCode]] = {}


def _id(rel: str) -> str:
    """The source id korpus gives a path: a name that is not UTF-8 shows its bytes (`\\xcf…`)."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def two_frame_tiff_cut_short() -> bytes:
    """A two-page TIFF copied only in part: the first frame (blank) whole, the second cut in its pixel data."""
    from PIL import Image

    out = io.BytesIO()
    first = Image.new("L", (1240, 1754), 255)
    second = Image.effect_noise((1240, 1754), 80).convert("L")
    first.save(out, "TIFF", save_all=True, append_images=[second], dpi=(150, 150))
    data = out.getvalue()
    return data[: len(data) - 1_000_000]


def jpeg_cut_in_half() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.effect_noise((1600, 1200), 60).convert("RGB").save(out, "JPEG", quality=90)
    data = out.getvalue()
    return data[: len(data) // 2]


def png_bad_crc() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("L", (200, 200), 128).save(out, "PNG")
    data = bytearray(out.getvalue())
    data[29] ^= 0xFF  # inside IHDR: its CRC no longer matches
    return bytes(data)


def blank_pages(count: int) -> bytes:
    """Pages with nothing drawn on them: one item for the file, not one OCR and one item a page."""
    doc = pymupdf.open()
    for _ in range(count):
        doc.new_page()
    return doc.tobytes()


def drawn_pdf() -> bytes:
    """A page with a frame drawn on it and no text: it goes to OCR (a page with nothing drawn is `blank`)."""
    doc = pymupdf.open()
    doc.new_page().draw_rect(pymupdf.Rect(50, 50, 545, 792))
    return doc.tobytes()


def owner_password_pdf() -> bytes:
    """Restrictions (no printing) under an owner password, and no user password: it opens like any PDF."""
    doc = pymupdf.open()
    doc.new_page().insert_textbox(
        pymupdf.Rect(50, 50, 545, 792),
        "Акт приёмки насосной станции, подписан.",
        fontsize=11,
        fontfile=FONT,
        fontname="dv",
    )
    return doc.tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="", permissions=pymupdf.PDF_PERM_ACCESSIBILITY
    )


def blank_djvu(folder: Path) -> bytes:
    from PIL import Image

    pgm = folder / "blank.pgm"
    Image.new("L", (600, 800), 255).save(pgm)
    subprocess.run(["c44", str(pgm), str(folder / "blank.djvu")], check=True, capture_output=True)
    return (folder / "blank.djvu").read_bytes()


def speech_wav(folder: Path, text: str) -> bytes:
    subprocess.run(["espeak-ng", "-v", "ru", "-w", str(folder / "speech.wav"), text], check=True, capture_output=True)
    return (folder / "speech.wav").read_bytes()


def mp3_cut_in_the_middle(folder: Path) -> bytes:
    wav = folder / "long.wav"
    wav.write_bytes(speech_wav(folder, "Совещание по ремонту крыши склада. Решили начать работы в мае."))
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(wav), str(folder / "long.mp3")], check=True)
    data = (folder / "long.mp3").read_bytes()
    return data[: len(data) // 2]


def wav_that_lies_about_its_length(folder: Path) -> bytes:
    """A RIFF header promising ten minutes of samples in front of two seconds of them."""
    data = bytearray(speech_wav(folder, "Запись обрывается."))
    at = data.index(b"data")
    struct.pack_into("<I", data, at + 4, 16000 * 2 * 600)
    struct.pack_into("<I", data, 4, 16000 * 2 * 600 + at)
    return bytes(data)


def zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("опись.txt", "Опись документов архива отдела кадров.".encode())
        for n in range(4):
            archive.writestr(f"нули_{n}.txt", b"\0" * 50_000_000)
    return out.getvalue()


def spine_naming_one_chapter(times: int = 2000) -> bytes:
    """#61: an 11 KB EPUB whose spine names one chapter 2,000 times took a refresh past 24 GB (OOM-killed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(
            "META-INF/container.xml", '<container><rootfiles><rootfile full-path="c.opf"/></rootfiles></container>'
        )
        spine = '<itemref idref="c"/>' * times
        book.writestr(
            "c.opf", f'<package><manifest><item id="c" href="c.html"/></manifest><spine>{spine}</spine></package>'
        )
        book.writestr("c.html", "<p>Глава о поставке насосов для котельной.</p>" * 3000)
    return out.getvalue()


def nested_frames(levels: int = 4000) -> bytes:
    """#61: a page of nested unclosed iframes — each level parsed again cost the square of the page (2.4 GB)."""
    return ("<html><body>" + "".join(f"<iframe>уровень {n} вложенности " for n in range(levels))).encode()


def damaged_base64_letter() -> bytes:
    """#61: a letter whose attachment lost a character in its base64 (and gained a stray one before the padding):
    every line but the damaged ones decodes; before, the whole block came out empty."""
    import base64

    text = "Акт сверки взаимных расчётов с поставщиком угля за третий квартал. ".encode() * 30
    lines = base64.encodebytes(text).decode().splitlines()
    lines[2] = lines[2][:20] + lines[2][21:]
    lines[-1] = lines[-1].rstrip("=") + "Q" + "=" * (len(lines[-1]) - len(lines[-1].rstrip("=")))
    return (
        "From: a@b.ru\nTo: c@d.ru\nSubject: Акт\nMIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain; charset=utf-8\n\nАкт во '
        'вложении.\n--b\nContent-Type: text/plain; charset=utf-8\nContent-Disposition: attachment; filename="akt.txt"'
        "\nContent-Transfer-Encoding: base64\n\n" + "\n".join(lines) + "\n--b--\n"
    ).encode()


def docx_without_document() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
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
        "text/неизвестная_кодировка.txt": (
            bytes(rnd.randrange(128, 256) for _ in range(2000)),
            {ReasonCode.unreadable_file},
        ),
        "text/двоичный.txt": (b"\x7fELF\x02\x01\x01\x00" * 100, {ReasonCode.unreadable_file}),
        "text/пустой.txt": (b"", {ReasonCode.unreadable_file}),
        "audio/битый.wav": (b"RIFF\x24\x00\x00\x00WAVEfmt ", {ReasonCode.unreadable_file}),
        "audio/тишина.wav": (silent_wav(), {ReasonCode.no_speech}),
        "audio/не_аудио.mp3": ("не аудио ".encode() * 50, {ReasonCode.unreadable_file}),
        "audio/пустой.ogg": (b"", {ReasonCode.unreadable_file}),
        "прочее/программа.exe": (b"MZ" + rnd.randbytes(100), {ReasonCode.unsupported_type}),
        "прочее/без_расширения": ("текст без расширения".encode(), {ReasonCode.unsupported_type}),
    }
    work = outside / "work"
    work.mkdir()
    bad |= {
        "img/два_кадра_второй_обрезан.tif": (
            two_frame_tiff_cut_short(),
            {ReasonCode.ocr_failed, ReasonCode.empty_text},
        ),
        "img/обрезан_наполовину.jpg": (
            jpeg_cut_in_half(),
            {ReasonCode.ocr_failed, ReasonCode.unreadable_file, ReasonCode.empty_text, ReasonCode.page_quality},
        ),
        "img/битая_crc.png": (png_bad_crc(), {ReasonCode.unreadable_file, ReasonCode.ocr_failed}),
        "djvu/декодер_зависает.djvu": (blank_djvu(work), {ReasonCode.ocr_failed}),
        "pdf/рендер_падает.pdf": (drawn_pdf(), {ReasonCode.ocr_failed}),
        "pdf/пустые_страницы.pdf": (blank_pages(300), {ReasonCode.empty_text}),
        "img/30000px.png": (giant_png(30_000), {ReasonCode.ocr_failed}),
        "audio/длина_в_заголовке_врёт.wav": (wav_that_lies_about_its_length(work), {ReasonCode.unreadable_file}),
        "audio/whisper_сбой.wav": (speech_wav(work, "Сбой распознавания речи."), {ReasonCode.asr_failed}),
        "почта/битое.msg": (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + rnd.randbytes(600), {ReasonCode.unreadable_file}),
        "таблицы/битая.xlsx": (b"PK\x03\x04" + rnd.randbytes(300), {ReasonCode.unreadable_file}),
        "таблицы/битая.xls": (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + rnd.randbytes(600), {ReasonCode.unreadable_file}),
        "архивы/битый.7z": (b"7z\xbc\xaf\x27\x1c" + rnd.randbytes(200), {ReasonCode.unreadable_file}),
        "text/сжатый_gzip.txt": (gzip.compress("Записка о ремонте. ".encode() * 200), {ReasonCode.unreadable_file}),
        "office/без_document_xml.docx": (docx_without_document(), {ReasonCode.unreadable_file}),
        "pdf/один_байт.pdf": (b"%", {ReasonCode.unreadable_file}),
        "веб/битая.epub": (b"PK\x03\x04" + rnd.randbytes(300), {ReasonCode.unreadable_file}),
        "pdf/читатель_падает.pdf": (text_pdf("Документ, на котором читатель падает."), {ReasonCode.reader_crashed}),
        "веб/обрезанная.rss": (
            '<?xml version="1.0"?><rss><channel><title>Новости</title><item><title>Новость о ремонте'.encode(),
            {ReasonCode.unreadable_file},
        ),
        os.fsdecode("имена/".encode() + "Приказ.txt".encode("cp1251")): (
            "Приказ, имя которого записано в cp1251.".encode(),
            {ReasonCode.unreadable_file},
        ),
    }
    for rel, (data, _) in bad.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    expected = {_id(rel): reasons for rel, (_, reasons) in bad.items()}
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
        "pdf/пароль_владельца.pdf": owner_password_pdf(),
        # markup a browser repairs: read as it renders (#46 item 3), nothing dropped
        "веб/без_head.html": "<html><head><title>Приказ о поставке</title><body><p>Текст договора поставки насосов "
        "для котельной.</p>".encode(),
        "веб/iframe_открыт.html": "<p>Начало записки<iframe src=x>после фрейма о ремонте кровли</p><p>ещё текст "
        "записки</p>".encode(),
        "веб/без_конца.mht": (
            'MIME-Version: 1.0\nContent-Type: multipart/related; boundary="x"\n\n--x\n'
            "Content-Type: text/html; charset=utf-8\n\n<p>Текст сохранённой страницы о поставке "
            "угля"
        ).encode(),
        "почта/html_незакрыт.eml": (
            "From: a@b.ru\nTo: c@d.ru\nSubject: Совещание\nMIME-Version: 1.0\nContent-Type: "
            "text/html; charset=utf-8\n\n<html><body><p>Письмо о переносе совещания<div>на "
            "пятницу"
        ).encode(),
        "старое/letter_cp1252.txt": "Café résumé: the delivery to Zürich is delayed by a week.".encode("cp1252"),
        # #61: small files that expand without bound, read within their budgets; a damaged attachment recovered
        "веб/повтор_главы.epub": spine_naming_one_chapter(),
        "веб/вложенные_фреймы.html": nested_frames(),
        "почта/битое_вложение.eml": damaged_base64_letter(),
    }
    # containers: a zip bomb (its list and its first members read, the rest refused by the ratio limit), a
    # member named out of the archive
    good |= {
        "прочее/бомба.zip": zip_bomb(),
        "прочее/бомба.zip › опись.txt": None,
        "архивы/обход.zip": zipped({"../../вне.txt": b"x", "внутри.txt": "Записка внутри архива.".encode()}),
        "архивы/обход.zip › внутри.txt": None,
    }
    expected |= {
        "прочее/бомба.zip › нули_0.txt": {ReasonCode.unreadable_file},  # 50 MB of NUL bytes: not text
        **{f"прочее/бомба.zip › нули_{n}.txt": {ReasonCode.unreadable_file} for n in (1, 2, 3)},
        "архивы/обход.zip › member-1": {ReasonCode.unreadable_file},
    }
    for rel, data in good.items():
        if data is None:  # a member of a container: written by nobody but the unpacker
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (links / "внутрь.txt").symlink_to(root / "старое" / "письмо_1998.txt")  # inside the root: followed
    good_ids = {*good, "ссылки/внутрь.txt"}
    # damaged, yet with something to read: indexed, or quarantined with one of these reasons — never a crash
    tolerated = {"audio/обрезан_посередине.mp3": mp3_cut_in_the_middle(work)}
    for rel, data in tolerated.items():
        (root / rel).write_bytes(data)
    for rel in tolerated:
        TOLERATED[rel] = {ReasonCode.unreadable_file, ReasonCode.asr_failed, ReasonCode.no_speech}
    # the damaged attachment: its intact lines recovered; the damaged lines' bytes may leave a chunk for review
    TOLERATED["почта/битое_вложение.eml › akt.txt"] = {ReasonCode.text_quality, ReasonCode.unreadable_file}
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
    assert len(expected) >= 40
    # injected faults: a DjVu decoder that hangs (past a 3-s timeout instead of 120), a PDF renderer that raises,
    # Whisper raising on one recording
    shims = outside / "bin"
    shims.mkdir()
    (shims / "ddjvu").write_text("#!/bin/sh\nexec sleep 600\n", encoding="utf-8")
    (shims / "ddjvu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    monkeypatch.setattr(tasks.readers.djvu, "TIMEOUT", 3)
    render = tasks.readers.pdf.pdf_page_image

    def renderer_that_crashes(path: str, *args: object) -> object:
        if "рендер_падает" in path:
            raise RuntimeError("MuPDF error: the page's renderer crashed (injected)")
        return render(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tasks.readers.pdf, "pdf_page_image", renderer_that_crashes)
    transcribe = flows.refresh_tasks.transcribe_windows

    def whisper_that_fails(plan, indices, settings):  # type: ignore[no-untyped-def]
        if "whisper_сбой" in plan.source_id:
            raise RuntimeError("CTranslate2: the model run failed (injected)")
        return transcribe(plan, indices, settings)

    monkeypatch.setattr(flows.refresh_tasks, "transcribe_windows", whisper_that_fails)
    monkeypatch.setenv("KORPUS_FAULT_READ", "читатель_падает:segv")  # its reading child segfaults (#46 item 1)
    # a file changing and one vanishing during the run: right after discovery hashed them
    (root / "меняется.txt").write_text("Первая редакция приказа об отпусках.", encoding="utf-8")
    (root / "исчезает.txt").write_text("Записка, которую удалят посреди обновления.", encoding="utf-8")
    discover = flows.refresh_tasks.discover_sources

    def discover_then_disturb(where: Path, settings: Settings, readings: dict | None = None, told=None) -> list:
        found = discover(where, settings, readings, told)
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
        indexed = {
            s["source_id"]
            for s in index.sources()
            if s["lifecycle"] == "current" and s["chunks"] and s["kind"] != "meta"
        }
    by_source: dict[str, set[str]] = {}
    for item in items:
        by_source.setdefault(item["source_id"], set()).update(item["reasons"])
    for source_id, reasons in expected.items():
        got = {ReasonCode(r) for r in by_source.get(source_id, set())}
        assert got and got <= reasons, (source_id, got, reasons)
        assert all(REASON_ADVICE[r] for r in got)
    for source_id, reasons in TOLERATED.items():
        got = {ReasonCode(r) for r in by_source.pop(source_id, set())}
        assert (source_id in indexed and not got) or (got and got <= reasons), (source_id, got)
    assert set(by_source) == set(expected), set(by_source) ^ set(expected)
    assert indexed - set(TOLERATED) == good_ids, indexed ^ good_ids
    assert "sleep 600" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    badly_named = next(
        i for i in items if i["source_id"] == _id(os.fsdecode("имена/".encode() + "Приказ.txt".encode("cp1251")))
    )
    assert "«имена/Приказ.txt»" in badly_named["detail"]
    everything = " ".join(i["detail"] + (i.get("evidence") or "") for i in items)
    assert "Пароль от сейфа" not in everything  # nothing outside the root was read, not even as evidence
    with SqliteIndex(settings.index_path) as index:
        assert not retrieve(index.searcher, "пароль сейфа", None, ["public"], k=5, mode="bm25")
        assert retrieve(index.searcher, "длинным именем файла", None, ["public"], k=1, mode="bm25")
        assert retrieve(index.searcher, "после фрейма", None, ["public"], k=1, mode="bm25")[0]["source_id"] == (
            "веб/iframe_открыт.html"
        )
        assert retrieve(index.searcher, "уровень 3999", None, ["public"], k=1, mode="bm25")[0]["source_id"] == (
            "веб/вложенные_фреймы.html"
        )  # the deepest level's text is there
        assert retrieve(index.searcher, "акт сверки угля", None, ["public"], k=3, mode="bm25")

    again = flows.corpus_refresh.run_refresh(root, settings)  # the changed file is read now; nothing else
    assert again["changed_during_run"] == [] and again["changes"].get("new") == 1
    with SqliteIndex(settings.index_path) as index:
        assert "меняется.txt" in index.indexed_versions()
        hits = retrieve(index.searcher, "вторая редакция", None, ["public"], k=1, mode="bm25")
    assert hits and hits[0]["source_id"] == "меняется.txt"


def test_removals_and_relabels_are_applied_when_the_refresh_itself_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedding breaks (every document needs it: the refresh fails, non-zero) — yet the file removed from the root
    stops being served and the file moved to `hr` is served to `hr` only, in the same refresh."""
    root = tmp_path / "archive"
    root.mkdir()
    manifest = "defaults:\n  owner: Архив\n  access: public\n"
    (root / "korpus.yaml").write_text(manifest, encoding="utf-8")
    (root / "премия.txt").write_text("Приказ о премии сотрудникам склада.", encoding="utf-8")
    (root / "удалят.txt").write_text("Записка о списании насосов.", encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    flows.corpus_refresh.run_refresh(root, settings)
    (root / "korpus.yaml").write_text(manifest + "rules:\n  - match: премия.txt\n    access: hr\n", encoding="utf-8")
    (root / "удалят.txt").unlink()
    (root / "новый.txt").write_text("Протокол о приёмке кровли.", encoding="utf-8")

    def broken_embedding(*_args: object, **_kwargs: object) -> object:
        raise RuntimeError("ONNX Runtime: the model file is damaged (injected)")

    monkeypatch.setattr(flows.refresh_tasks, "shared_embedder", broken_embedding)
    with pytest.raises(flows.corpus_refresh.RefreshFailed, match="model file is damaged"):
        flows.corpus_refresh.run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        assert not retrieve(index.searcher, "списании насосов", None, ["public", "hr"], k=5, mode="bm25")
        assert not retrieve(index.searcher, "премии сотрудникам", None, ["public"], k=5, mode="bm25")
        assert retrieve(index.searcher, "премии сотрудникам", None, ["hr"], k=5, mode="bm25")
        assert "failed" in index.last_refresh()


def test_korpus_refresh_says_in_one_line_how_it_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 0 and one line when every file was indexed or quarantined with a reason; exit 1 and one line naming the
    failure when the refresh itself failed."""
    from typer.testing import CliRunner

    from korpus.apps.cli import app

    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text("Записка о ремонте крыши.", encoding="utf-8")
    (root / "пустой.pdf").write_bytes(b"")
    runner = CliRunner()
    done = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(tmp_path / "data")])
    assert done.exit_code == 0, done.output
    assert "refresh complete: 2 files, 1 chunks indexed, 1 items quarantined with a reason" in done.stdout
    (root / "новая.txt").write_text("Новая записка о складе.", encoding="utf-8")
    monkeypatch.setattr(flows.refresh_tasks, "shared_embedder", lambda *_a, **_k: 1 / 0)
    failed = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(tmp_path / "data")])
    assert failed.exit_code == 1
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("error:")]
    assert "ZeroDivisionError" in line and "removals and relabels were applied" in line


def test_a_failed_meta_build_withdraws_the_registers_it_would_leave_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's letter is moved to `hr`; the meta build of that refresh fails: the public register that still names
    the person is withdrawn, not served; status says degraded; the next good build brings the registers back."""
    import json

    from typer.testing import CliRunner

    import tasks.meta.publish
    from korpus.apps.cli import app

    root = tmp_path / "archive"
    root.mkdir()
    manifest = "defaults:\n  owner: Архив\n  access: public\n"
    (root / "korpus.yaml").write_text(manifest, encoding="utf-8")
    (root / "письмо.txt").write_text(
        "Директор завода Сергей Николаевич Лапин подписал приказ 12 марта 2001 года.", encoding="utf-8"
    )
    (root / "записка.txt").write_text("Записка о ремонте крыши склада.", encoding="utf-8")
    settings = Settings(data=tmp_path / "data")
    flows.corpus_refresh.run_refresh(root, settings)

    def meta_rows() -> list[str]:
        with SqliteIndex(settings.index_path) as index:
            return [s["source_id"] for s in index.sources() if s["kind"] == "meta" and s["lifecycle"] == "current"]

    assert meta_rows()
    (root / "korpus.yaml").write_text(manifest + "rules:\n  - match: письмо.txt\n    access: hr\n", encoding="utf-8")

    def broken(*_args: object, **_kwargs: object) -> object:
        raise MemoryError("natasha ran out of memory (injected)")

    monkeypatch.setattr(tasks.meta.publish, "refresh_meta", broken)
    summary = flows.corpus_refresh.run_refresh(root, settings)
    assert summary["meta_documents"]["error"].startswith("MemoryError") and summary["meta_documents"]["withdrawn"]
    assert meta_rows() == []
    with SqliteIndex(settings.index_path) as index:
        assert not retrieve(index.searcher, "Лапин", None, ["public"], k=5, mode="bm25")
    status = CliRunner().invoke(app, ["status", "--json", "--data", str(settings.data)])
    assert status.exit_code == 3 and any(
        "meta-document build failed" in r for r in json.loads(status.stdout)["degraded"]
    )
    monkeypatch.undo()
    flows.corpus_refresh.run_refresh(root, settings)  # nothing changed in the files: the registers are built again
    assert meta_rows()
    with SqliteIndex(settings.index_path) as index:
        assert not retrieve(index.searcher, "Лапин", None, ["public"], k=5, mode="bm25")
        assert retrieve(index.searcher, "Лапин", None, ["hr"], k=5, mode="bm25")
