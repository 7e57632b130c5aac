"""`korpus refresh`'s progress (flows/progress.py, korpus/apps/cli/progress.py): the counts a refresh keeps, the
plain line without a terminal, the live view on one, and where library logs go."""

from __future__ import annotations

import io
import logging
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from flows import progress as refresh_progress
from flows.progress import RefreshProgress
from korpus.apps.cli.progress import PLAIN_EVERY, PlainLines, clock, live_view, logs_to_file, plain_line, shown

pytestmark = pytest.mark.unit


@given(st.lists(st.tuples(st.sampled_from("ab"), st.floats(0, 1e5, allow_nan=False)), max_size=30))
def test_audio_heard_is_the_furthest_window_of_each_recording(reports: list[tuple[str, float]]) -> None:
    """Windows come back in any order: what is heard is each recording's furthest point, summed."""
    p = RefreshProgress()
    for source_id, seconds in reports:
        p.heard(source_id, seconds)
    furthest = {s: max([t for r, t in reports if r == s] + [0.0]) for s in "ab"}
    assert p.audio_heard == pytest.approx(sum(furthest.values()))


def test_first_searchable_is_the_first_indexed_chunk() -> None:
    p = RefreshProgress(planned=3)
    p.indexed(0)
    assert p.first_searchable is None
    p.indexed(4)
    first = p.first_searchable
    assert first is not None and first >= 0
    p.indexed(5)
    assert p.first_searchable == first and p.chunks_indexed == 9


def test_time_left_goes_by_the_slowest_kind_of_work() -> None:
    p = RefreshProgress(planned=10, started=time.perf_counter() - 100)
    assert p.left() is None  # nothing done: no rate to go by
    p.settled = 5  # files: half done in 100 s → about 100 s left
    assert p.left() == pytest.approx(100, rel=0.05)
    p.pages_planned, p.pages_done = 40, 10  # pages: a quarter done in 100 s → about 300 s left
    assert p.left() == pytest.approx(300, rel=0.05)


@pytest.mark.parametrize(("seconds", "shown"), [(12.4, "12 s"), (245, "4 min 05 s"), (3725, "1 h 02 min")])
def test_clock(seconds: float, shown: str) -> None:
    assert clock(seconds) == shown


def test_the_plain_line_says_every_count_without_control_codes() -> None:
    p = RefreshProgress(planned=10, settled=4, pages_planned=20, pages_done=5, audio_planned=600, audio_heard=90)
    p.indexed(37)
    line = plain_line(p)
    assert "\x1b" not in line and "\r" not in line
    for part in ("files 4/10", "pages OCR'd 5/20", "audio 1.5/10.0 min", "chunks indexed 37", "first searchable"):
        assert part in line
    assert "left" in line


def test_the_live_view_draws_a_bar_for_each_kind_of_work_there_is() -> None:
    def drawn(p: RefreshProgress | None) -> str:
        console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)
        console.print(live_view(p))
        return console.file.getvalue()

    assert "finding files" in drawn(None)
    only_files = drawn(RefreshProgress(planned=3, settled=1))
    assert "1/3" in only_files and "pages OCR'd" not in only_files and "audio" not in only_files
    busy = drawn(RefreshProgress(planned=3, settled=1, pages_planned=8, pages_done=2, audio_planned=120))
    assert "2/8" in busy and "0.0/2.0 min" in busy and "chunks indexed" in busy


def test_library_logs_go_to_the_file_and_warnings_to_the_terminal(tmp_path) -> None:
    """Dask's INFO and WARNING stay in the file, its errors and anyone's warnings reach the terminal; the handlers
    are as they were afterwards."""
    root = logging.getLogger()
    terminal_stream = io.StringIO()
    console = Console(file=terminal_stream, width=200)
    before = list(root.handlers)
    original = logging.StreamHandler(io.StringIO())
    root.addHandler(original)
    speakers = (
        "distributed.worker",
        "distributed.core",
        "distributed.scheduler",
        "prefect.task_runs",
        "prefect.flow_runs",
    )
    levels = {name: logging.getLogger(name).level for name in speakers}  # as the libraries set them, whatever ran
    old_level = root.level
    root.setLevel(logging.INFO)
    for name in speakers:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        with logs_to_file(tmp_path / "logs" / "refresh.log", console):
            logging.getLogger("distributed.worker").info("Registering Worker plugin shuffle")
            logging.getLogger("distributed.core").warning("Event loop was unresponsive")
            logging.getLogger("distributed.scheduler").error("the scheduler lost its workers")
            logging.getLogger("prefect.task_runs").info("Finished in state Completed()")
            logging.getLogger("prefect.flow_runs").warning("a.txt changed or vanished during the refresh")
        assert [h for h in root.handlers if h is not original] == before and original in root.handlers
        logging.getLogger("distributed.worker").info("after the refresh")
    finally:
        root.removeHandler(original)
        root.setLevel(old_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    in_file = (tmp_path / "logs" / "refresh.log").read_text(encoding="utf-8")
    on_terminal = terminal_stream.getvalue()
    for line in ("Registering Worker", "unresponsive", "lost its workers", "Completed()", "vanished"):
        assert line in in_file
    assert "lost its workers" in on_terminal and "vanished" in on_terminal
    assert "Registering" not in on_terminal and "unresponsive" not in on_terminal and "Completed" not in on_terminal
    assert "after the refresh" not in in_file and "after the refresh" in original.stream.getvalue()


def test_without_a_terminal_progress_is_plain_lines() -> None:
    """A line once the plan is known, then one every PLAIN_EVERY seconds while the counts change, and one when the
    documents are done; no control codes."""
    out = io.StringIO()
    lines = PlainLines(out)
    lines.tick(None, 0.0)  # before the plan: nothing to say
    p = RefreshProgress(planned=4)
    lines.tick(p, 1.0)
    p.settled, p.pages_planned, p.pages_done = 2, 6, 3
    lines.tick(p, 2.0)  # changed, but not yet due
    lines.tick(p, 1.0 + PLAIN_EVERY)
    lines.tick(p, 2.0 + 2 * PLAIN_EVERY)  # due, but nothing changed (the clock aside): no line
    p.settled, p.documents_done = 4, True
    lines.tick(p, 3.0 + 2 * PLAIN_EVERY)  # done: at once
    printed = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue() and len(printed) == 3, printed
    assert printed[0].endswith("files 0/4 · chunks indexed 0 · nothing new searchable yet")
    assert "files 2/4 · pages OCR'd 3/6" in printed[1]
    assert "files 4/4" in printed[2] and "documents done" in printed[2]


def test_shown_without_a_terminal_prints_the_refresh_it_sees(tmp_path) -> None:
    out = io.StringIO()
    with shown(tmp_path, out=out):
        p = refresh_progress.begin(2)
        p.settled, p.documents_done = 2, True
        time.sleep(2.5)  # the watcher looks once a second
    assert "files 2/2" in out.getvalue() and "\x1b" not in out.getvalue()
    assert (tmp_path / "logs" / "refresh.log").is_file()
