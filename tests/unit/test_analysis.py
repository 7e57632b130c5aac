import pytest

from tasks.text.analysis import RUSSIAN_STOP_WORDS, analyse, words

pytestmark = pytest.mark.unit


def test_inflected_forms_share_a_stem() -> None:
    assert analyse("договор") == analyse("договорами") == analyse("договора")
    assert analyse("кровли") == analyse("кровля")


def test_stop_words_are_dropped_and_text_lowercased() -> None:
    terms = analyse("Ремонт И замена В течение года")
    assert "и" not in terms and "в" not in terms
    assert terms[0] == analyse("ремонт")[0]
    assert {"и", "в", "не", "что"} <= RUSSIAN_STOP_WORDS


def test_dates_amounts_and_identifiers_stay_whole() -> None:
    assert "12.03.2023" in words("заключён 12.03.2023 г.")
    assert "000,50" in words("1 250 000,50 руб.")
    assert "7708123450" in analyse("ИНН 7708123450")
    # hyphens and slashes split, as UAX#29 does
    assert words("45-17/2023") == ["45", "17", "2023"]


def test_exact_field_keeps_yo_and_unstemmed_forms() -> None:
    assert words("Ёлочки «ёлка»") == ["ёлочки", "ёлка"]
