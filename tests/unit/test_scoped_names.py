"""#61 item 4: names never cross scopes — a container's page lists only the members that share its labels, and typo
variants come only from terms the caller's scopes hold. Both as properties over generated manifests with narrowing
rules (` › ` rules for members; documents of random scopes for the vocabulary). Before: an archive's page listed
every member («Характеристика_Кривошеин_Аркадий.txt» under `public` while the member was `hr`), a letter's page
every attachment, and a surname only `hr` held was offered to `public` as a "did you mean"."""

from __future__ import annotations

import tempfile
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from korpus.core.datamodel import Chunk, Locator, Source, SourceKind
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.readers.registry import reader_for
from tasks.receive import discover_sources
from tasks.text.analysis import analyse
from tests.builders import zipped

pytestmark = pytest.mark.unit
SURNAMES = ("Кривошеин", "Смирнова", "Ведерников", "Остроумов", "Белозерская", "Черкасов")
SCOPES = ("public", "hr", "finance")


def _letter(names: list[str]) -> bytes:
    message = MIMEMultipart(boundary="korpus-names")
    message["From"], message["To"], message["Subject"] = "a@b.ru", "c@d.ru", "Документы"
    message.attach(MIMEText("Направляю документы.", "plain", "utf-8"))
    for name in names:
        part = MIMEApplication(f"Характеристика: {name}.".encode())
        part.add_header("Content-Disposition", "attachment", filename=("utf-8", "", name))
        message.attach(part)
    return message.as_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    members=st.lists(st.sampled_from(SURNAMES), min_size=1, max_size=5, unique=True),
    rules=st.dictionaries(st.sampled_from(SURNAMES), st.sampled_from(SCOPES), max_size=4),
    container_access=st.sampled_from(SCOPES),
    form=st.sampled_from(["zip", "eml"]),
)
def test_a_containers_page_names_only_the_members_that_share_its_scope(
    members: list[str], rules: dict[str, str], container_access: str, form: str
) -> None:
    names = [f"Характеристика_{m}.txt" for m in members]
    container = f"пакет.{form}"
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "root"
        root.mkdir()
        child_rules = [{"match": f"{container} › *{surname}*", "access": access} for surname, access in rules.items()]
        manifest = {"defaults": {"owner": "Архив", "access": container_access}, "rules": child_rules}
        (root / "korpus.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
        data = zipped({n: f"Характеристика {n}".encode() for n in names}) if form == "zip" else _letter(names)
        (root / container).write_bytes(data)
        sources = {s.source_id: s for s in discover_sources(root, Settings(data=Path(folder) / "data"))}
        page = reader_for(sources[container].kind).read(sources[container], Settings()).pages[0].text  # type: ignore[arg-type]
    for name, surname in zip(names, members, strict=True):
        child = sources[f"{container} › {name}"]
        shares = child.access == container_access
        assert child.access == rules.get(surname, container_access)
        assert (surname in page) == shares, (surname, child.access, container_access, page)


def _index(path: Path, documents: list[tuple[str, str]]) -> SqliteIndex:
    index = SqliteIndex(path)
    for n, (access, body) in enumerate(documents):
        source = Source(
            source_id=f"d{n}.txt", version="v1", path="/dev/null", kind=SourceKind.text, owner="o", access=access
        )
        chunk = Chunk(
            chunk_id=f"c{n}",
            source_id=source.source_id,
            source_version="v1",
            locator=Locator(page=1, end=len(body)),
            text=body,
            body=body,
            owner="o",
            access_rule=access,
            policy_version="structure-v2",
        )
        index.publish_version(source, [chunk], np.ones((1, 4), dtype=np.float32), [], embed_model="m")
    return index


def _mistyped(word: str, at: int) -> str:
    at = 1 + at % (len(word) - 2)  # never the first letter (it is not corrected)
    return word[:at] + word[at + 1 :]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    documents=st.lists(st.tuples(st.sampled_from(SCOPES), st.sampled_from(SURNAMES)), min_size=1, max_size=6),
    caller=st.sets(st.sampled_from(SCOPES), min_size=1, max_size=2),
    query=st.sampled_from(SURNAMES),
    at=st.integers(0, 20),
)
def test_typo_variants_come_only_from_what_the_callers_scopes_hold(
    documents: list[tuple[str, str]], caller: set[str], query: str, at: int
) -> None:
    bodies = [(access, f"Характеристика на сотрудника {surname} утверждена.") for access, surname in documents]
    visible_terms = {t for access, body in bodies if access in caller for t in analyse(body)}
    with tempfile.TemporaryDirectory() as folder, _index(Path(folder) / "k.db", bodies) as index:
        variants = index.searcher.typo_variants(analyse(_mistyped(query, at)), sorted(caller))
        offered = {v for found in variants.values() for v in found}
        assert offered <= visible_terms, (offered - visible_terms, caller)
        # a variant the caller's scopes hold is still offered: the rule is narrowed, not switched off
        held = [s for a, s in documents if a in caller]
        if query in held:
            term = analyse(query)[0]
            assert any(term in found for found in variants.values()) or not variants, (variants, term)


def test_an_hr_surname_is_not_offered_to_public(tmp_path: Path) -> None:
    bodies = [("hr", "Характеристика на сотрудника Кривошеин Аркадий."), ("public", "Приказ о ремонте склада.")]
    with _index(tmp_path / "k.db", bodies) as index:
        mistyped = analyse("Кривошейн")
        assert index.searcher.typo_variants(mistyped, ["public"]) == {}
        assert index.searcher.typo_variants(mistyped, ["hr"]) == {mistyped[0]: [analyse("Кривошеин")[0]]}
