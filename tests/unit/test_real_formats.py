"""Readers, the detector and the layer-vs-OCR choice on small inputs built here (no external programs)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from PIL import Image

from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import OcrRead, TierCounts, cached_read
from tasks.ocr.registry import ENGINES, cascade, register_engine
from tasks.parse import choose_text
from tasks.readers.base import ParseOutcome, UnreadableSourceError
from tasks.readers.image import ImageReader, image_dpi
from tasks.readers.registry import READERS, SUFFIXES, kind_of, register_reader
from tasks.readers.text import decode_text
from tasks.text.quality import text_language, text_layer_quality, word_f1

pytestmark = pytest.mark.unit
SETTINGS = Settings()
RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю. Настоящий приказ вступает в силу с 1 января."


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "cp1251", "koi8_r", "cp866"])
def test_russian_text_is_decoded_from_any_common_encoding(encoding: str) -> None:
    text, used = decode_text(RUSSIAN.encode(encoding))
    assert text.lstrip("\ufeff") == RUSSIAN
    assert used.replace("-", "_").startswith(encoding.replace("-", "_")[:5])


def test_bytes_no_encoding_reads_are_refused_with_the_encodings_tried() -> None:
    noise = bytes(range(128, 256)) * 8
    with pytest.raises(UnreadableSourceError, match="cp1251, koi8_r, cp866"):
        decode_text(noise)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("M]heh\\guc dh^_dk Jhkkbckdhc N_^_jZpbb hl Ijbgyl =hkm^Zjkl\\_gghc >mfhc fZy H^h[j_g", "glyph-codes"),
        ("npoTOKon Necepa MocKBa cocTaB KoMnccnn BbInoJIHeHo paбoTa goroBop", "case-flips"),
        ("Ð¡Ð¾Ð²ÐµÑ‚ Ð´Ð¸Ñ€ÐµÐºÑ‚Ð¾Ñ€Ð¾Ð² Ð¿Ñ€Ð¸Ð½Ñ\u008fÐ» Ñ€ÐµÑˆÐµÐ½Ð¸Ðµ", "mojibake"),
        ("РЎРѕРІРµС‚ РґРёСЂРµРєС‚РѕСЂРѕРІ РїСЂРёРЅСЏР» СЂРµС€РµРЅРёРµ Рѕ РІС‹РїР»Р°С‚Рµ", "mojibake"),
    ],
)
def test_garbage_layers_are_caught(text: str, reason: str) -> None:
    quality = text_layer_quality(text, SETTINGS)
    assert reason in quality.garbage, (quality.reasons, quality.signals)


@pytest.mark.parametrize(
    "text",
    [
        "Association football, more commonly known as simply football or soccer, is a team sport played between "
        "two teams of eleven players who almost exclusively use their feet to propel a ball.",
        "Введение ................................................ 3\nГлава 1. Обзор ................... 7\n"
        "Глава 2. Методы ........................................ 15\nЗаключение ..................... 42",
        "docker run -d --name sova-asr -p 8888:8888 sova/asr:latest\n"
        'curl -X POST http://localhost:8888/recognize -F "audio=@test.wav"\n'
        '{"text": "распознанный текст", "time": 0.42}',
        "1. Общие положения\n2. Права и обязанности сторон\n3. Порядок расчётов\n4. Ответственность сторон",
    ],
)
def test_good_layers_are_not_garbage(text: str) -> None:
    quality = text_layer_quality(text, SETTINGS)
    assert quality.readable, (quality.reasons, quality.signals)


def test_dot_leaders_do_not_count_as_punctuation() -> None:
    toc = "\n".join(f"Глава {i}. Раздел отчёта {'.' * 60} {i * 7}" for i in range(1, 12))
    assert "punctuation-density" not in text_layer_quality(toc, SETTINGS).reasons


def _page(text: str, method: str = "text-layer", tier: int = 0) -> PageResult:
    return PageResult(source_id="a.pdf", source_version="v", page=1, text=text, method=method, tier=tier)


def _choose(layer: str, ocr: str) -> PageResult:
    q_layer, q_ocr = text_layer_quality(layer, SETTINGS), text_layer_quality(ocr, SETTINGS)
    return choose_text(_page(layer), _page(ocr, "tesseract", 1), q_layer, q_ocr, SETTINGS.layer_agreement)


def test_an_english_layer_stays_when_ocr_reads_the_same() -> None:
    english = "The SOVA ASR service recognises speech; run it with docker compose up and send audio files."
    kept = _choose(english, english.replace("SOVA", "S0VA"))
    assert kept.method == "text-layer" and kept.layer_check.decision == "layer-kept"


def test_an_english_layer_stays_even_when_rus_ocr_garbles_it() -> None:
    kept = _choose("SOVA ASR converts speech to text with high accuracy", "ЗОУА АЗК сопуейз зреесЬ 10 тех")
    assert kept.method == "text-layer" and kept.layer_check.similarity < 0.5


def test_a_glyph_code_layer_loses_to_cyrillic_ocr() -> None:
    chosen = _choose("M]heh\\guc dh^_dk Jhkkbckdhc N_^_jZpbb hl", "Уголовный кодекс Российской Федерации от")
    assert chosen.method == "tesseract" and chosen.layer_check.decision == "ocr-replaced-layer"
    assert "glyph-codes" in chosen.layer_check.layer_reasons


def test_language_is_told_by_script() -> None:
    assert (text_language(RUSSIAN), text_language("Plain English words here"), text_language("12 345")) == (
        "ru",
        "en",
        "und",
    )
    assert word_f1("Уголовный кодекс", "уголовный  КОДЕКС") == 1.0


def test_a_photo_without_a_stated_resolution_is_taken_as_an_a4_page() -> None:
    photo = Image.new("L", (2480, 3508), 255)
    assert image_dpi(photo) == 300
    photo.info["dpi"] = (200, 200)
    assert image_dpi(photo) == 200


def test_a_multi_page_tiff_is_one_page_per_frame(tmp_path: Path) -> None:
    path = tmp_path / "scan.tif"
    frames = [Image.new("L", (200, 300), shade) for shade in (255, 200, 150)]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    source = Source(source_id="scan.tif", version="v", path=str(path), kind=SourceKind.image)
    outcome = ImageReader().read(source, SETTINGS)
    assert (outcome.page_count, outcome.ocr_pending) == (3, [1, 2, 3])
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    refused = ImageReader().read(source.model_copy(update={"path": str(broken)}), SETTINGS)
    assert refused.problems and refused.problems[0].reasons[0].value == "unreadable-file"


class ToyEngine:
    """A whole OCR engine: it reads every page as `text`, with the resolution it was given, and counts its reads."""

    name, tier, dpi, image_format = "toy", 1, 100, "png"
    text = "страница {dpi} dpi"
    reads: ClassVar[list[int]] = []

    @classmethod
    def from_settings(cls, settings: Settings) -> ToyEngine:
        return cls()

    def available(self) -> bool:
        return True

    def cache_key(self) -> str:
        return f"{self.name}-1"

    def warm_up(self) -> None:
        pass

    def read(self, image, earlier):  # type: ignore[no-untyped-def]
        dpi = image(self.dpi, self.image_format).dpi
        self.reads.append(dpi)
        return OcrRead(text=self.text.format(dpi=dpi), engine=f"{self.name} 1")


def test_a_toy_engine_and_a_toy_reader_take_one_class_and_one_line_each(tmp_path: Path) -> None:
    class NoteReader:
        kind, suffixes = SourceKind.text, (".note",)

        def read(self, source: Source, settings: Settings) -> ParseOutcome:
            return ParseOutcome(page_count=1, ocr_pending=[1])

        def page_image(self, source, page, settings):  # type: ignore[no-untyped-def]
            return lambda dpi, fmt: __import__("tasks.ocr.engine").ocr.engine.PageImage(b"", dpi, 595, 842)

        def searchable_copy(self, source, pages, settings):  # type: ignore[no-untyped-def]
            return None

    kind_of("warm.txt")  # the built-in readers are registered first
    saved_readers, saved_suffixes = dict(READERS), dict(SUFFIXES)
    try:
        register_engine(ToyEngine)
        register_reader(NoteReader())
        assert kind_of("a.note") is SourceKind.text
        settings = Settings(data=tmp_path, ocr_tiers=["toy"])
        assert [e.name for e in cascade(settings)] == ["toy"]
        source = Source(source_id="a.note", version="ab" * 32, path="/a.note", kind=SourceKind.text)
        counts = TierCounts()
        image = NoteReader().page_image(source, 1, settings)
        first = cached_read(ENGINES["toy"].from_settings(settings), source, 1, image, None, settings, counts)
        again = cached_read(ENGINES["toy"].from_settings(settings), source, 1, image, None, settings, counts)
        assert first.text == again.text == "страница 100 dpi" and (counts.engine_calls, counts.cache_hits) == (1, 1)
    finally:
        ENGINES.pop("toy", None)
        READERS.clear(), READERS.update(saved_readers)
        SUFFIXES.clear(), SUFFIXES.update(saved_suffixes)


def test_unknown_tiers_are_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="unknown engines"):
        cascade(Settings(ocr_tiers=["tesseract", "nonesuch"]))


def test_a_reviewers_reocr_reads_the_page_afresh(tmp_path: Path) -> None:
    """Normal runs serve the page cache; a forced re-OCR (korpus review reocr) calls the engines again."""
    from tasks.parse import ocr_page

    class CountingEngine(ToyEngine):
        name = "counting"
        text = "Протокол заседания комиссии по приёмке склада номер семь"
        reads: ClassVar[list[int]] = []

    path = tmp_path / "page.png"
    Image.new("L", (827, 1169), 255).save(path, dpi=(100, 100))
    source = Source(source_id="page.png", version="cd" * 32, path=str(path), kind=SourceKind.image)
    settings = Settings(data=tmp_path / "data", ocr_tiers=["counting"])
    try:
        register_engine(CountingEngine)
        first = ocr_page(source, 1, settings)
        again = ocr_page(source, 1, settings)
        forced = ocr_page(source, 1, settings, force_vlm=True)
    finally:
        ENGINES.pop("counting", None)
    assert (first.engine_calls, again.cache_hits, forced.engine_calls) == (1, 1, 1)
    assert len(CountingEngine.reads) == 2 and first.pages[0].text == forced.pages[0].text


def test_latin_twins_of_cyrillic_initials_are_written_in_cyrillic() -> None:
    from korpus.core.datamodel import PageWord
    from tasks.ocr.tesseract import cyrillic_initials

    def word(text: str, line: int = 0) -> PageWord:
        return PageWord(text=text, x0=0, y0=0, x1=1, y1=1, line=line)

    words = [word("Кузнецов"), word("H."), word("A.,"), word("Петрова"), word("SOVA", 1), word("A", 1), word("ASR", 1)]
    assert [w.text for w in cyrillic_initials(words)] == ["Кузнецов", "Н.", "А.,", "Петрова", "SOVA", "A", "ASR"]


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Café résumé, à bientôt. Merci pour la réunion de lundi.", "cp1252"),
        ("Zürich Straße: die Lieferung verzögert sich um zwei Wochen.", "cp1252"),
        ("Grüße aus München, Ihre Jörg und Käthe.", "latin_1"),
        ("Zürich Straße, Grüße und schöne Feiertage.", "cp850"),
        ("Zażółć gęślą jaźń. Dziękuję za przesłanie umowy.", "cp1250"),
        ("Příliš žluťoučký kůň úpěl ďábelské ódy.", "iso8859_2"),
        ("Шёл дождь", "mac_cyrillic"),
        ("Протокол", "cp1251"),
        ("Привет", "koi8_r"),
    ],
)
def test_western_central_and_short_texts_are_read_not_refused(text: str, encoding: str) -> None:
    """Letters in cp1252, latin-1, cp850, cp1250 and iso-8859-2, and Russian words too short to score as Russian:
    each was refused as «no encoding reads it» before."""
    assert decode_text(text.encode(encoding))[0] == text
