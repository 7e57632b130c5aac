import pytest

from korpus.settings import Settings
from tasks.pdf_pages import text_layer_quality

pytestmark = pytest.mark.unit
SETTINGS = Settings()


def test_good_russian_layer_passes() -> None:
    q = text_layer_quality("Протокол совещания у директора склада от 14 сентября 1998 года.", SETTINGS)
    assert q.ok and q.cyrillic_share > 0.9 and q.reasons == []


def test_latin_look_alike_garbage_fails() -> None:
    q = text_layer_quality("npoTOKon Necepa\nMocKBa OTPH 1031851041431 cocTaB KoMnccnn", SETTINGS)
    assert not q.ok
    assert "low-cyrillic-share" in q.reasons


def test_mixed_script_words_fail_even_when_mostly_cyrillic() -> None:
    q = text_layer_quality("Пpoтокол сoвещания Мoсква дирeктор склaда отдел учета кадров", SETTINGS)
    assert not q.ok and "mixed-script-words" in q.reasons


def test_near_empty_layer_fails() -> None:
    q = text_layer_quality("  7 \n", SETTINGS)
    assert not q.ok and q.reasons == ["too-little-text"]
