"""`korpus sample DIR`: a small Russian archive written for korpus, covering every path of a document.

- a born-digital contract with headings, a table and a numbered procedure (text layer kept);
- an image-only scan, 300 dpi, slightly rotated and noisy (Tesseract);
- a scan whose invisible text layer is Latin look-alike garbage, «AkT npoBepkn» (detected, OCR'd again);
- a recording made with espeak-ng, with pauses (faster-whisper, timecodes);
- an HR order under access rule `hr` that the default scopes cannot see;
- a letter the manifest gives no owner (quarantined with `missing-metadata`);
- the manifest `korpus.yaml`.
All names, ИНН and numbers are invented; the ИНН has a valid checksum.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONT = FONT_DIR / "DejaVuSans.ttf"
FONT_BOLD = FONT_DIR / "DejaVuSans-Bold.ttf"
FONT_SERIF = FONT_DIR / "DejaVuSerif.ttf"

SAMPLE_INN = "7708123450"
SAMPLE_CONTRACT = "45-17/2023"

MANIFEST = """\
# Corpus manifest: who owns what, who may read it. Rules apply in order; later ones win key by key.
defaults:
  access: public
  tenant: default
rules:
  - match: "договоры/**"
    owner: Юридический отдел
  - match: "сканы/**"
    owner: Архив
  - match: "записи/**"
    owner: Секретариат
  - match: "кадры/**"
    owner: Отдел кадров
    access: hr
  # входящие/ has no owner on purpose: its files are quarantined with reason missing-metadata.
"""

CONTRACT_PAGES = [
    [
        ("h1", f"Договор поставки № {SAMPLE_CONTRACT}"),
        ("p", "г. Москва, 12 марта 2023 г."),
        (
            "p",
            f"ООО «Северный ветер» (ИНН {SAMPLE_INN}), именуемое в дальнейшем «Поставщик», в лице генерального "
            "директора Иванова Петра Сергеевича, и АО «Уральские машины», именуемое «Покупатель», в лице "
            "финансового директора Смирновой Анны Викторовны, заключили настоящий договор о нижеследующем.",
        ),
        ("h2", "1. Предмет договора"),
        (
            "p",
            "Поставщик обязуется передать Покупателю насосное оборудование по спецификации (таблица 1), "
            "а Покупатель обязуется принять и оплатить его. Общая сумма договора составляет 1 250 000,00 рублей.",
        ),
        (
            "table",
            [
                "Таблица 1. Спецификация",
                ("Наименование", "Количество", "Цена, руб."),
                ("Насос ЦНС 38-44", "2 шт.", "415 000,00"),
                ("Электродвигатель АИР 180", "2 шт.", "210 000,00"),
            ],
        ),
    ],
    [
        ("h2", "2. Порядок приёмки оборудования"),
        ("p", "Приёмка проводится в следующем порядке:"),
        ("li", "1. Покупатель проверяет комплектность поставки по товарной накладной."),
        ("li", "2. Комиссия Покупателя осматривает оборудование и составляет акт приёмки."),
        (
            "li",
            "3. При обнаружении недостатков Покупатель направляет Поставщику претензию в течение 10 дней.",
        ),
        ("h2", "3. Сроки"),
        (
            "p",
            "Срок поставки — до 30 апреля 2023 г. За просрочку поставки Поставщик уплачивает пени 0,1 % "
            "от стоимости недопоставленного оборудования за каждый день просрочки.",
        ),
    ],
]

SCAN_TEXT = [
    "ПРОТОКОЛ № 7",
    "совещания у директора склада",
    "14 сентября 1998 г.",
    "Присутствовали: Кузнецов Н. А., Петрова Е. И., Соколов В. М.",
    "Слушали: о ремонте кровли склада № 3, которая",
    "протекает после осенних дождей.",
    "Решили: выделить 120 000 рублей на ремонт кровли",
    "склада № 3 до 1 ноября 1998 г. Ответственный —",
    "Кузнецов Н. А.",
]

GARBAGE_SCAN_TEXT = [
    "АКТ ПРОВЕРКИ",
    "пожарной безопасности архивного здания",
    "3 февраля 2001 г.",
    "Комиссия в составе Орлова Д. С. и Морозовой Т. П.",
    "проверила состояние огнетушителей и пожарной",
    "сигнализации в хранилище документов.",
    "Выявлено: четыре огнетушителя с истёкшим сроком",
    "поверки. Предписано заменить их до 1 марта 2001 г.",
]
GARBAGE_LAYER = [
    "AkT npoBepkn",
    "noxapHoN 6e3onacHocTn apxnBHoro 3DaHnR",
    "3 cpeBpaJIR 2001 r.",
    "KoMnccnR B cocTaBe OpJIoBa D. C. n Mopo3oBoN T. n.",
    "npoBepnJIa cocToRHne orHeTywnTeJIeN n noxapHoN",
]

SPEECH_PHRASES = [
    "Совещание по поставке насосов.",
    "Поставщик задерживает отгрузку оборудования на две недели.",
    "Решено направить поставщику претензию до двадцатого мая.",
]

HR_ORDER = """\
ПРИКАЗ № 17-к
от 3 апреля 2023 г.

О премировании сотрудников

За успешное заключение договора поставки насосного оборудования ПРИКАЗЫВАЮ:
выплатить финансовому директору Смирновой Анне Викторовне премию в размере 50 000 рублей.

Генеральный директор П. С. Иванов
"""

UNOWNED_LETTER = """\
Входящее письмо № 112 от 20 мая 2023 г.

ООО «Северный ветер» сообщает о готовности отгрузить насосы после 25 мая 2023 г.
"""


def write_sample_archive(target: Path) -> list[Path]:
    """Write the sample archive into `target` (created if missing); returns the files written."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    (target / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    written.append(target / "korpus.yaml")
    written.append(_write(target / "договоры" / "договор_поставки_45-17.pdf", _contract_pdf()))
    written.append(_write(target / "сканы" / "протокол_1998.pdf", _scan_pdf(SCAN_TEXT, seed=7)))
    written.append(
        _write(
            target / "сканы" / "акт_проверки_2001.pdf",
            _scan_pdf(GARBAGE_SCAN_TEXT, seed=11, layer=GARBAGE_LAYER),
        )
    )
    written.append(_write_text(target / "кадры" / "приказ_17-к.txt", HR_ORDER))
    written.append(_write_text(target / "входящие" / "письмо_112.txt", UNOWNED_LETTER))
    written.append(speech_recording(SPEECH_PHRASES, target / "записи" / "совещание_2023-05-15.wav", pause=1.5))
    return written


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _write_text(path: Path, text: str) -> Path:
    return _write(path, text.encode("utf-8"))


def _contract_pdf() -> bytes:
    return typeset_pdf(CONTRACT_PAGES)


def typeset_pdf(pages: list[list[tuple]]) -> bytes:
    """A born-digital A4 PDF: per page, blocks of ("h1" | "h2" | "p", text) or ("table", [title, header, rows…])."""
    doc = pymupdf.open()
    for blocks in pages:
        page = doc.new_page(width=595, height=842)
        page.insert_font(fontname="dv", fontfile=str(FONT))
        page.insert_font(fontname="dvb", fontfile=str(FONT_BOLD))
        y = 60.0
        for kind, content in blocks:
            if kind == "table":
                y = _draw_table(page, content, y)
                continue
            size, font = {"h1": (16, "dvb"), "h2": (13, "dvb")}.get(kind, (11, "dv"))
            rect = pymupdf.Rect(60, y, 535, y + 200)
            left = page.insert_textbox(rect, content, fontsize=size, fontname=font)
            y += 200 - left + size * 0.8
    doc.subset_fonts()
    return _pdf_bytes(doc)


def _pdf_bytes(doc: pymupdf.Document) -> bytes:
    """Same content, same bytes: no dates and no fresh file id, so a re-written sample is 'unchanged'."""
    doc.set_metadata({})
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    doc.close()
    return data


def _draw_table(page: pymupdf.Page, content: list, y: float) -> float:
    title, *rows = content
    page.insert_text((60, y + 12), title, fontsize=11, fontname="dvb")
    y += 22
    widths = [230, 110, 135]
    for row in rows:
        x = 60.0
        for width, cell in zip(widths, row, strict=True):
            page.draw_rect(pymupdf.Rect(x, y, x + width, y + 22), color=(0, 0, 0), width=0.7)
            page.insert_text((x + 5, y + 15), cell, fontsize=10, fontname="dv")
            x += width
        y += 22
    return y + 16


def _scan_pdf(lines: list[str], seed: int, layer: list[str] | None = None) -> bytes:
    """Render text as a 300-dpi greyscale scan, rotated a little, with noise; optionally a garbage layer."""
    src = pymupdf.open()
    page = src.new_page(width=595, height=842)
    page.insert_font(fontname="dvs", fontfile=str(FONT_SERIF))
    y = 90.0
    for line in lines:
        page.insert_text((70, y), line, fontsize=14, fontname="dvs")
        y += 26
    pix = page.get_pixmap(dpi=300, colorspace=pymupdf.csGRAY, alpha=False)
    src.close()
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    rng = np.random.default_rng(seed)
    image = image.rotate(random.Random(seed).uniform(0.6, 1.0), resample=Image.BICUBIC, fillcolor=255)
    image = image.filter(ImageFilter.GaussianBlur(0.6))
    pixels = np.asarray(image, dtype=np.int16) + rng.normal(0, 14, (image.height, image.width)).astype(np.int16)
    specks = rng.random((image.height, image.width)) < 0.0008
    pixels[specks] = 0
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    with tempfile.TemporaryDirectory() as tmp:
        jpeg = Path(tmp) / "scan.jpg"
        image.save(jpeg, quality=70)
        out = pymupdf.open()
        scan = out.new_page(width=595, height=842)
        scan.insert_image(scan.rect, filename=str(jpeg))
        if layer:
            yy = 90.0
            for line in layer:
                scan.insert_text((70, yy), line, fontsize=14, render_mode=3)
                yy += 26
        return _pdf_bytes(out)


def speech_recording(phrases: list[str], path: Path, pause: float = 1.5, rate: int = 16_000) -> Path:
    """Speak each phrase with espeak-ng (Russian voice) and join them with `pause` seconds of silence."""
    import soundfile

    if shutil.which("espeak-ng") is None:
        raise RuntimeError("espeak-ng is not installed: apt-get install espeak-ng")
    path.parent.mkdir(parents=True, exist_ok=True)
    silence = np.zeros(int(pause * rate), dtype=np.float32)
    parts = [silence[: rate // 2]]
    with tempfile.TemporaryDirectory() as tmp:
        for i, phrase in enumerate(phrases):
            raw = Path(tmp) / f"{i}.wav"
            subprocess.run(["espeak-ng", "-v", "ru", "-s", "140", "-w", str(raw), phrase], check=True)
            resampled = Path(tmp) / f"{i}-16k.wav"
            subprocess.run(
                [
                    "ffmpeg",
                    "-nostdin",
                    "-v",
                    "error",
                    "-y",
                    "-i",
                    str(raw),
                    "-ac",
                    "1",
                    "-ar",
                    str(rate),
                    str(resampled),
                ],
                check=True,
            )
            samples, _ = soundfile.read(resampled, dtype="float32")
            parts += [samples, silence]
    soundfile.write(path, np.concatenate(parts), rate, subtype="PCM_16")
    return path
