import pytest

from korpus.core.datamodel import PageWord
from tasks.ocr.vlm import place_on_lines

pytestmark = pytest.mark.unit


def _line(i: int, y: float) -> list[PageWord]:
    return [
        PageWord(text="x", x0=50, y0=y, x1=150, y1=y + 12, line=i),
        PageWord(text="y", x0=160, y0=y, x1=300, y1=y + 12, line=i),
    ]


def test_vlm_lines_land_on_tier1_line_boxes_in_order() -> None:
    tier1 = _line(0, 100) + _line(1, 130)
    words = place_on_lines("Акт приёмки\nбез замечаний", tier1, 595, 842)
    assert [w.text for w in words] == ["Акт", "приёмки", "без", "замечаний"]
    assert {w.y0 for w in words[:2]} == {100} and {w.y0 for w in words[2:]} == {130}
    assert words[0].x0 == 50 and words[1].x1 <= 300 and words[0].x1 <= words[1].x0


def test_more_vlm_lines_than_boxes_spread_proportionally_and_no_boxes_stack_down_the_page() -> None:
    words = place_on_lines("a\nb\nc\nd", _line(0, 100) + _line(1, 300), 595, 842)
    assert [w.y0 for w in words] == [100, 100, 300, 300]
    stacked = place_on_lines("один\nдва", [], 595, 842)
    assert stacked[0].y0 < stacked[1].y0 and all(0 <= w.y1 <= 842 for w in stacked)
