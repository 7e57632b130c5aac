from pathlib import Path

import pytest

from korpus.core.datamodel import ChangeKind, ReasonCode, Source, SourceKind
from tasks.receive import (
    SETTLED_NS,
    Manifest,
    admission_problems,
    discover_sources,
    glob_regex,
    plan_refresh,
    reading_of,
)

pytestmark = pytest.mark.unit

MANIFEST = """\
defaults:
  access: public
rules:
  - match: "тома/**"
    owner: Архив
  - match: "тома/секрет/*.pdf"
    access: restricted
"""


def _source(source_id: str, version: str = "v1", owner: str | None = "o", access: str | None = "public") -> Source:
    return Source(
        source_id=source_id,
        version=version,
        path=f"/x/{source_id}",
        kind=SourceKind.text,
        owner=owner,
        access=access,
    )


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("тома/**", "тома/том_2.pdf", True),
        ("тома/**", "тома/а/б/в.pdf", True),
        ("тома/*.pdf", "тома/а/в.pdf", False),
        ("**/*.wav", "записи/2023/допрос.wav", True),
        ("**/*.wav", "допрос.wav", True),
        ("том_?.pdf", "том_2.pdf", True),
        ("том_?.pdf", "том_12.pdf", False),
    ],
)
def test_glob_is_relative_to_root_and_folder_aware(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is matches


def test_discover_ids_versions_and_manifest_rules(tmp_path: Path) -> None:
    (tmp_path / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    (tmp_path / "тома" / "секрет").mkdir(parents=True)
    (tmp_path / "тома" / "том_2.txt").write_text("текст", encoding="utf-8")
    (tmp_path / "тома" / "секрет" / "дело.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "ничьё.txt").write_text("без владельца", encoding="utf-8")
    (tmp_path / ".hidden").write_text("x", encoding="utf-8")
    sources = {s.source_id: s for s in discover_sources(tmp_path)}
    assert set(sources) == {"тома/том_2.txt", "тома/секрет/дело.pdf", "ничьё.txt"}
    tom = sources["тома/том_2.txt"]
    import hashlib

    assert tom.version == hashlib.sha256("текст".encode()).hexdigest()
    assert (tom.owner, tom.access, tom.kind) == ("Архив", "public", SourceKind.text)
    secret = sources["тома/секрет/дело.pdf"]
    assert (secret.owner, secret.access, secret.kind) == ("Архив", "restricted", SourceKind.pdf)
    assert sources["ничьё.txt"].owner is None


def test_missing_owner_or_access_is_quarantined_not_defaulted() -> None:
    plan = plan_refresh([_source("a.txt", owner=None), _source("b.txt", access=None), _source("c.txt")], {})
    assert [s.source_id for s in plan.to_process] == ["c.txt"]
    assert {i.source_id for i in plan.rejected} == {"a.txt", "b.txt"}
    assert all(i.reasons == [ReasonCode.missing_metadata] for i in plan.rejected)
    assert "owner" in next(i for i in plan.rejected if i.source_id == "a.txt").detail


def test_unsupported_type_is_quarantined() -> None:
    odd = _source("таблица.xlsx").model_copy(update={"kind": None})
    plan = plan_refresh([odd], {})
    assert plan.rejected[0].reasons == [ReasonCode.unsupported_type]


def test_plan_diffs_new_changed_unchanged_removed_relabelled() -> None:
    indexed = {
        "same.txt": {"v1": ("o", "public", "default")},
        "edited.txt": {"v1": ("o", "public", "default")},
        "gone.txt": {"v1": ("o", "public", "default")},
        "moved_scope.txt": {"v1": ("o", "public", "default")},
    }
    on_disk = [
        _source("same.txt").model_copy(update={"tenant": "default"}),
        _source("edited.txt", version="v2").model_copy(update={"tenant": "default"}),
        _source("fresh.txt").model_copy(update={"tenant": "default"}),
        _source("moved_scope.txt", access="hr").model_copy(update={"tenant": "default"}),
    ]
    plan = plan_refresh(on_disk, indexed)
    assert plan.change == {
        "same.txt": ChangeKind.unchanged,
        "edited.txt": ChangeKind.changed,
        "fresh.txt": ChangeKind.new,
        "moved_scope.txt": ChangeKind.unchanged,
        "gone.txt": ChangeKind.removed,
    }
    assert sorted(s.source_id for s in plan.to_process) == ["edited.txt", "fresh.txt"]
    assert [s.source_id for s in plan.relabel] == ["moved_scope.txt"]
    assert plan.removed == ["gone.txt"]


def test_manifest_later_rules_override_key_by_key() -> None:
    manifest = Manifest.model_validate(
        {
            "defaults": {"access": "public", "tenant": "t0"},
            "rules": [{"match": "**", "owner": "A"}, {"match": "x/**", "access": "hr"}],
        }
    )
    assert manifest.metadata_for("x/y.pdf") == {"owner": "A", "access": "hr", "tenant": "t0"}
    assert manifest.metadata_for("z.pdf") == {"owner": "A", "access": "public", "tenant": "t0"}


def test_refused_for_metadata_counts_as_unchanged_until_the_manifest_is_fixed() -> None:
    refused = {"a.txt": {"v1": {"missing-metadata"}}}
    plan = plan_refresh([_source("a.txt", owner=None)], {}, refused)
    assert plan.change == {"a.txt": ChangeKind.unchanged}
    assert [i.source_id for i in plan.rejected] == ["a.txt"]
    fixed = plan_refresh([_source("a.txt")], {}, refused)
    assert [s.source_id for s in fixed.to_process] == ["a.txt"]


def test_refused_for_content_is_not_reprocessed() -> None:
    plan = plan_refresh([_source("a.txt")], {}, {"a.txt": {"v1": {"empty-text"}}})
    assert plan.change == {"a.txt": ChangeKind.unchanged}
    assert plan.to_process == [] and plan.rejected == []
    changed = plan_refresh([_source("a.txt", version="v2")], {}, {"a.txt": {"v1": {"empty-text"}}})
    assert [s.version for s in changed.to_process] == ["v2"]


def test_a_file_back_to_a_refused_version_keeps_the_version_it_replaced() -> None:
    """A file refused as unreadable (v1), then rewritten readable (v2, indexed), then rewritten with v1's bytes again.
    The refusal of v1 stands — it is not read again — and v2 stays served until a version after it is in (#61 item 3:
    the old version stays until the new one is in; before, v2 was retired), taking the manifest's labels."""
    indexed = {"a.txt": {"v2": ("o", "public", None)}}
    plan = plan_refresh([_source("a.txt", version="v1")], indexed, {"a.txt": {"v1": {"unreadable-file"}}})
    assert plan.to_process == [] and plan.removed == [] and plan.relabel == []
    assert plan.change == {"a.txt": ChangeKind.unchanged}
    moved = plan_refresh([_source("a.txt", version="v1", access="hr")], indexed, {"a.txt": {"v1": {"unreadable-file"}}})
    assert [(s.version, s.access) for s in moved.relabel] == [("v2", "hr")]  # an access change never waits
    still = plan_refresh([_source("a.txt", version="v1")], {}, {"a.txt": {"v1": {"unreadable-file"}}})
    assert still.removed == [] and still.change == {"a.txt": ChangeKind.unchanged}  # once retired: nothing to do


def test_a_link_out_of_the_root_is_never_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("секрет вне корня", encoding="utf-8")
    (root / "a.txt").write_text("текст документа", encoding="utf-8")
    (root / "link_out.txt").symlink_to(tmp_path / "outside.txt")
    (root / "link_in.txt").symlink_to(root / "a.txt")
    (root / "sub" / "loop").symlink_to(root)
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    sources = {s.source_id: s for s in discover_sources(root)}
    assert sources["link_out.txt"].outside_root and sources["link_out.txt"].version == "not-read"
    assert not sources["link_in.txt"].outside_root
    plan = plan_refresh(list(sources.values()), {}, {})
    assert [(r.source_id, r.reasons) for r in plan.rejected] == [("link_out.txt", [ReasonCode.outside_root])]
    assert sorted(s.source_id for s in plan.to_process) == ["a.txt", "link_in.txt"]


def test_a_file_discovery_cannot_read_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.receive

    (tmp_path / "закрыт.txt").write_text("текст", encoding="utf-8")
    (tmp_path / "открыт.txt").write_text("текст", encoding="utf-8")
    real = tasks.receive.file_sha256

    def denied(path: Path) -> str:  # what chmod 000 does for a user other than root
        if path.name == "закрыт.txt":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(tasks.receive, "file_sha256", denied)
    found = {s.source_id: s for s in discover_sources(tmp_path)}
    assert found["открыт.txt"].unreadable is None and found["открыт.txt"].mtime_ns > 0
    refused = found["закрыт.txt"]
    assert refused.version == "not-read" and "give the korpus user read access" in (refused.unreadable or "")
    item = admission_problems(refused.model_copy(update={"owner": "o", "access": "public"}))
    assert item is not None and item.reasons == [ReasonCode.unreadable_file]


def test_a_reading_is_trusted_while_the_stat_holds_and_never_for_a_racily_clean_file(tmp_path: Path) -> None:
    """#32 item 4: a file whose size, times and inode match its reading keeps the version without being read; any
    difference reads it; a file changed within SETTLED_NS of its reading leaves no reading (a second write in the
    same timestamp tick could keep every stat field)."""
    (tmp_path / "a.txt").write_text("Письмо о поставке угля.", encoding="utf-8")
    (source,) = discover_sources(tmp_path)
    assert source.hashed and reading_of(source) is None  # written just now: racily clean
    reading = reading_of(source, now_ns=source.ctime_ns + SETTLED_NS + 1)
    assert reading == (source.version, source.size, source.mtime_ns, source.ctime_ns, source.inode)
    (again,) = discover_sources(tmp_path, None, {"a.txt": reading})
    assert not again.hashed and again.version == source.version
    stale = {"a.txt": ("0" * 64, *reading[1:])}  # what a reading says is what discovery takes, unread
    assert discover_sources(tmp_path, None, stale)[0].version == "0" * 64
    (tmp_path / "a.txt").write_text("Письмо о поставке соли.", encoding="utf-8")  # same size, new bytes
    (changed,) = discover_sources(tmp_path, None, {"a.txt": reading})
    assert changed.hashed and changed.version != source.version


@pytest.mark.parametrize("labels", ["access: acme/public", "tenant: a/b", "access: ' '"])
def test_access_and_tenant_names_hold_no_slash(tmp_path: Path, labels: str) -> None:
    """A scope is `access` or `tenant/access` (docs/manifest.md#tenants): a `/` inside either name would make two
    labellings one scope, so the manifest is refused with the name."""
    manifest = f"defaults: {{owner: a, access: public}}\nrules:\n  - {{match: '**', {labels}}}\n"
    (tmp_path / "korpus.yaml").write_text(manifest)
    with pytest.raises(ValueError, match="cannot be empty or hold '/'"):
        Manifest.load(tmp_path)
