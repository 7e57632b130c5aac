"""structure-v1 on documents built in the test: the rules of the policy and the substring invariant."""

from __future__ import annotations

import random

import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind, UnitKind
from tasks.contract.chunking import build_chunks, chars_as_tokens, is_exception_sentence
from tasks.contract.policies import POLICIES
from tasks.text.structure import text_structure

pytestmark = pytest.mark.unit
POLICY = POLICIES["structure-v1"]


def _source(kind: SourceKind = SourceKind.pdf) -> Source:
    return Source(source_id="тома/том_2.pdf", version="cd" * 32, path="/r", kind=kind, owner="Архив", access="public")


def _pages(*texts: str, markdown: bool = False) -> list[PageResult]:
    return [
        PageResult(
            source_id="тома/том_2.pdf",
            source_version="cd" * 32,
            page=i + 1,
            text=t,
            method="text-layer",
            units=text_structure(t, markdown=markdown),
        )
        for i, t in enumerate(texts)
    ]


def _chunks(*texts: str, markdown: bool = False) -> list:
    chunks, _ = build_chunks(_source(), _pages(*texts, markdown=markdown), "structure-v1", count=chars_as_tokens)
    return chunks


def test_rule_and_its_exception_stay_in_one_chunk() -> None:
    filler = " ".join(f"Пункт {i} описывает обычный порядок работы склада и учёта товаров." for i in range(40))
    rule = "Сотрудники обязаны сдавать ключи охране ежедневно."
    exception = "За исключением случаев, когда склад работает в ночную смену по приказу директора."
    chunks = _chunks(f"{filler} {rule} {exception} {filler}")
    assert len(chunks) > 2
    holder = [c for c in chunks if rule in c.body]
    assert len(holder) == 1 and exception in holder[0].body


@pytest.mark.parametrize("marker", ["За исключением", "Кроме того", "Если иное", "Однако", "При этом", "«Однако"])
def test_exception_markers(marker: str) -> None:
    assert is_exception_sentence(f"{marker} это не так.")
    assert not is_exception_sentence("Исключительно важно.")


def test_table_stays_whole_with_title_and_note() -> None:
    table = (
        "Таблица 3. Остатки\n\n| Товар | Кол-во |\n|---|---|\n| Насос | 2 |\n| Кабель | 10 |\n\nПримечание: на 1 мая."
    )
    chunks = _chunks(f"Остатки на складе приведены ниже.\n\n{table}\n\nДалее следует опись.")
    holder = [c for c in chunks if "| Насос | 2 |" in c.body]
    assert len(holder) == 1
    assert "Таблица 3. Остатки" in holder[0].body and "Примечание: на 1 мая." in holder[0].body


def test_oversized_table_splits_by_rows_with_header_repeated() -> None:
    rows = "\n".join(f"| Позиция {i:03d} | {i * 7} шт. | склад {i % 5} |" for i in range(200))
    text = f"Таблица 1. Опись\n\n| Наименование | Количество | Место |\n|---|---|---|\n{rows}"
    chunks = _chunks(text)
    assert len(chunks) >= 3
    for i, chunk in enumerate(chunks):
        body_lines = chunk.body.split("\n")
        assert all(line.startswith(("|", "Таблица")) or not line for line in body_lines), "a row was cut"
        assert all(line.count("|") in (0, 4) for line in body_lines), "a row was cut mid-way"
        if i:
            assert "| Наименование | Количество | Место |" in chunk.text.split("\n")[1:3]
            assert "Наименование" not in chunk.body
    all_rows = [line for c in chunks for line in c.body.split("\n") if line.startswith("| Позиция")]
    assert len(all_rows) == 200 and len(set(all_rows)) == 200


def test_headings_never_end_a_chunk_and_start_the_section_path() -> None:
    text = "# Раздел 1\n\nПервый абзац раздела.\n\n## Подраздел 1.1\n\nТекст подраздела.\n\n# Раздел 2\n\nЕщё текст."
    chunks = _chunks(text, markdown=True)
    for chunk in chunks:
        units = [u for u in text_structure(text, markdown=True) if chunk.locator.start <= u.start < chunk.locator.end]
        assert units[-1].kind is not UnitKind.heading
    sub = next(c for c in chunks if "Текст подраздела." in c.body)
    assert sub.section_path == ["Раздел 1", "Подраздел 1.1"]


def test_heading_at_page_end_opens_the_next_page() -> None:
    chunks = _chunks("Текст первой страницы.\n\nГлава 2. Поставка", "Поставщик передаёт товар в срок.")
    assert all(not c.body.endswith("Глава 2. Поставка") for c in chunks)
    second = next(c for c in chunks if c.locator.page == 2)
    assert second.section_path[-1] == "Глава 2. Поставка" and "§ Глава 2. Поставка" in second.text


def test_procedure_splits_by_steps_with_title_in_section_path() -> None:
    steps = "\n".join(
        f"{i}. Комиссия выполняет проверку номер {i} и составляет подробный акт о ней." for i in range(1, 41)
    )
    chunks = _chunks(f"Приёмка проводится в следующем порядке:\n\n{steps}")
    assert len(chunks) >= 2
    for chunk in chunks:
        lines = [ln for ln in chunk.body.split("\n") if ln.strip()]
        assert all(ln.startswith("Приёмка") or ln.split(".")[0].isdigit() for ln in lines)
    later = [c for c in chunks if not c.body.startswith("Приёмка")]
    assert later and all(c.section_path[-1] == "Приёмка проводится в следующем порядке:" for c in later)


def test_yo_quotes_and_spaces_are_kept_byte_for_byte() -> None:
    text = "Ёлочки «ёлка» и „лапки“ — тире,  два  пробела.\n\nЕщё абзац с ё."
    chunks = _chunks(text)
    joined = "".join(c.body for c in chunks)
    assert "Ёлочки «ёлка» и „лапки“ — тире,  два  пробела." in joined and "Ещё абзац с ё." in joined


WORDS = "договор поставка склад ёлка кровля ремонт комиссия приказ «кавычки» заключение акт насос".split()


def _random_document(rng: random.Random) -> str:
    blocks = []
    for _ in range(rng.randint(1, 25)):
        kind = rng.choice(["para", "para", "para", "heading", "list", "table", "exception", "md-heading"])
        sentence = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30))).capitalize() + "."  # noqa: E731
        if kind == "para":
            blocks.append(" ".join(sentence() for _ in range(rng.randint(1, 12))))
        elif kind == "heading":
            blocks.append(f"{rng.randint(1, 9)}. {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}")
        elif kind == "md-heading":
            blocks.append("#" * rng.randint(1, 3) + " " + rng.choice(WORDS))
        elif kind == "list":
            blocks.append("\n".join(f"{i}. {sentence()}" for i in range(1, rng.randint(2, 15))))
        elif kind == "table":
            rows = "\n".join(f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} |" for _ in range(rng.randint(1, 80)))
            blocks.append(f"Таблица {rng.randint(1, 9)}. {rng.choice(WORDS)}\n\n| А | Б |\n|---|---|\n{rows}")
        else:
            blocks.append(f"{sentence()} За исключением {rng.choice(WORDS)}, {rng.choice(WORDS)}.")
    sep = rng.choice(["\n\n", "\n\n\n", "\n \n"])
    return rng.choice(["", " ", "\n"]) + sep.join(blocks) + rng.choice(["", "\n", "  "])


@pytest.mark.parametrize("seed", range(300))
def test_substring_invariant_on_generated_documents(seed: int) -> None:
    rng = random.Random(seed)
    pages = _pages(*[_random_document(rng) for _ in range(rng.randint(1, 3))], markdown=rng.random() < 0.5)
    chunks, empty = build_chunks(_source(), pages, "structure-v1", count=chars_as_tokens)
    by_page = {p.page: p for p in pages}
    covered = 0
    for chunk in chunks:
        page = by_page[chunk.locator.page]
        assert page.text[chunk.locator.start : chunk.locator.end] == chunk.body
        assert chunk.text.endswith(chunk.body) and chunk.text.startswith("[том_2.pdf · лист ")
        assert chunk.policy_version == "structure-v1"
        covered += len(chunk.body)
    # nothing but whitespace and page-closing headings is left out
    assert covered >= sum(len(p.text.strip()) for p in pages) * 0.8 or not chunks
    assert all(p.text.strip() for p in pages) == (not empty)
