"""The text-layer quality detector: each signal catches its kind of garbage; good Russian text passes."""

import pytest

from korpus.core.settings import Settings
from tasks.text.quality import PageFacts, text_layer_quality

pytestmark = pytest.mark.unit
SETTINGS = Settings()
GOOD = (
    "Протокол совещания у директора склада от 14 сентября 1998 года. Присутствовали: Кузнецов Н. А., "
    "Петрова Е. И. Слушали: о ремонте кровли склада № 3. Решили: выделить 120 000 рублей."
)


def test_good_russian_layer_passes() -> None:
    q = text_layer_quality(GOOD, SETTINGS)
    assert q.ok and q.reasons == [] and q.score > 0.8
    assert q.signals["cyrillic_share"] > 0.9


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("npoTOKon Necepa\nMocKBa OTPH 1031851041431 cocTaB KoMnccnn BbInoJIHeHo", "low-cyrillic-share"),
        ("Пpoтокол сoвещания Мoсква дирeктор склaда отдел учета кадров", "mixed-script-words"),
        (
            GOOD + " 会議の議事録 倉庫の屋根の修理について 十二万ルーブルを割り当てる 責任者 出席者全員",
            "unexpected-script",
        ),
        ("\n".join(["ООО Северный ветер, страница"] * 12 + ["Текст договора поставки."]), "repeated-lines"),
        ("Таблица\n" + "\n".join(["|   |   |   |"] * 10) + "\nКонец таблицы документа", "empty-table"),
        ("П р о т о к о л с о в е щ а н и я у д и р е к т о р а с к л а д а", "one-letter-tokens"),
        ("Протокол §§§ ### ••• ((( ))) ;;; --- === ~~~ ^^^ *** +++ @@@ !!! ??? :::", "punctuation-density"),
        ("  7 \n", "too-little-text"),
    ],
)
def test_each_signal_refuses_its_garbage(text: str, reason: str) -> None:
    q = text_layer_quality(text, SETTINGS)
    assert not q.ok and reason in q.reasons, (q.reasons, q.signals)


def test_a_scan_needs_real_text_on_it() -> None:
    short = "Протокол № 7 от 14 сентября"
    assert text_layer_quality(short, SETTINGS).ok
    on_image = text_layer_quality(short, SETTINGS, PageFacts(image_coverage=0.95))
    assert not on_image.ok and on_image.reasons == ["too-little-text-for-image"]


def test_an_invisible_layer_is_held_to_stricter_thresholds() -> None:
    # 60 % Cyrillic passes as a visible layer but not as an old invisible OCR layer
    text = "Протокол совещания директора склада ремонт кровли " + "Moscow meeting roof repair"
    assert text_layer_quality(text, SETTINGS).ok
    suspect = text_layer_quality(text, SETTINGS, PageFacts(invisible_share=1.0))
    assert not suspect.ok and "invisible-layer" in suspect.reasons


def test_thresholds_come_from_settings() -> None:
    lax = Settings(text_layer_min_cyrillic=0.0, text_layer_max_mixed_script=1.0, text_layer_max_case_flips=1.0)
    assert text_layer_quality("npoTOKon Necepa MocKBa OTPH cocTaB KoMnccnn", lax).ok
