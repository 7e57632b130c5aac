"""Containers become child sources at discovery (tasks/unpack.py, tasks/readers/archive.py): ids that name their
parents, inherited access that only a child rule overrides, nested containers, and the limits — a zip bomb, `../`
names, links, too many members, too deep — each refused with its reason while the rest is taken out."""

from __future__ import annotations

import io
import tarfile
import zipfile
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pytest

from korpus.core.datamodel import SourceKind
from korpus.core.settings import Settings
from tasks.receive import admission_problems, discover_sources
from tasks.unpack import member_name, unpack_root
from tests.builders import zipped

pytestmark = pytest.mark.unit
MANIFEST = "defaults: {owner: office, access: public}\nrules:\n  - {match: 'кадры/**', access: hr}\n"


def letter(attachments: dict[str, bytes], subject: str = "Документы") -> bytes:
    message = MIMEMultipart()
    message["From"], message["To"], message["Subject"] = "a@example.ru", "b@example.ru", subject
    message.attach(MIMEText("Во вложении.", "plain", "utf-8"))
    for name, data in attachments.items():
        part = MIMEApplication(data)
        part.add_header("Content-Disposition", "attachment", filename=("utf-8", "", name))
        message.attach(part)
    return message.as_bytes()


def found(root: Path, settings: Settings) -> dict[str, object]:
    return {s.source_id: s for s in discover_sources(root, settings)}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    return tmp_path / "root"


def test_members_of_a_letter_in_an_archive_are_children_with_inherited_access(root: Path, tmp_path: Path) -> None:
    inner = letter({"акт.txt": "Акт сверки № 7".encode(), "смета.csv": b"a;b\n1;2\n"})
    (root / "кадры").mkdir()
    (root / "кадры" / "архив.zip").write_bytes(zipped({"2003/письмо.eml": inner, "2003/приказ.txt": "Приказ".encode()}))
    settings = Settings(data=tmp_path / "data")
    sources = found(root, settings)
    assert list(sources) == [
        "кадры/архив.zip",
        "кадры/архив.zip › 2003/письмо.eml",
        "кадры/архив.zip › 2003/письмо.eml › акт.txt",
        "кадры/архив.zip › 2003/письмо.eml › смета.csv",
        "кадры/архив.zip › 2003/приказ.txt",
    ]
    act = sources["кадры/архив.zip › 2003/письмо.eml › акт.txt"]
    assert (act.kind, act.access, act.owner) == (SourceKind.text, "hr", "office")  # inherited from the archive
    assert act.file_name == "архив.zip › 2003/письмо.eml › акт.txt"
    assert act.parent_id == "кадры/архив.zip › 2003/письмо.eml"
    assert Path(act.path).read_bytes() == "Акт сверки № 7".encode() and Path(act.path).is_relative_to(settings.data)
    assert sources["кадры/архив.zip › 2003/письмо.eml › смета.csv"].kind is SourceKind.sheet


def test_a_glob_for_files_never_reaches_into_containers_only_a_child_rule_does(root: Path, tmp_path: Path) -> None:
    (root / "korpus.yaml").write_text(
        "defaults: {owner: office, access: hr}\nrules:\n  - {match: '**/*.txt', access: public}\n"
        "  - {match: 'почта/*.eml › *.csv', access: finance}\n",
        encoding="utf-8",
    )
    (root / "почта").mkdir()
    (root / "почта" / "п.eml").write_bytes(letter({"акт.txt": b"x" * 10, "смета.csv": b"a;b\n"}))
    sources = found(root, Settings(data=tmp_path / "data"))
    assert sources["почта/п.eml › акт.txt"].access == "hr"  # not made public by a rule for files on disk
    assert sources["почта/п.eml › смета.csv"].access == "finance"


def test_a_second_discovery_reads_the_listing_not_the_container(root: Path, tmp_path: Path) -> None:
    (root / "a.zip").write_bytes(zipped({"x.txt": b"first text here"}))
    settings = Settings(data=tmp_path / "data")
    first = found(root, settings)
    listing = next(unpack_root(settings).rglob("members.json"))
    stamp = listing.stat().st_mtime_ns
    second = found(root, settings)
    assert first == second and listing.stat().st_mtime_ns == stamp
    (root / "a.zip").write_bytes(zipped({"y.txt": b"second text here"}))  # changed: its old children go
    assert list(found(root, settings)) == ["a.zip", "a.zip › y.txt"]


def test_a_zip_bomb_is_stopped_with_a_reason_and_the_rest_taken_out(root: Path, tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("readme.txt", "Инструкция по эксплуатации".encode())
        for n in range(3):
            archive.writestr(f"zeros{n}.txt", b"\0" * (40 << 20))  # 120 MiB of zeros in ~120 KB
    (root / "бомба.zip").write_bytes(out.getvalue())
    settings = Settings(data=tmp_path / "data")
    sources = found(root, settings)
    assert sources["бомба.zip › readme.txt"].unreadable is None
    refused = [s for s in sources.values() if s.unreadable and "zip bomb" in s.unreadable]
    assert refused, {k: s.unreadable for k, s in sources.items()}
    assert sum(f.stat().st_size for f in unpack_root(settings).rglob("*") if f.is_file()) < (70 << 20)
    item = admission_problems(refused[0])
    assert item is not None and "unpack_max_ratio" in item.detail


def test_names_that_leave_the_archive_and_links_are_refused(root: Path, tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in (("../../etc/passwd", b"root:x:0:0"), ("/abs/x.txt", b"abs"), ("ok/файл.txt", b"fine")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("ok/link.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        archive.addfile(link)
    (root / "t.tar.gz").write_bytes(out.getvalue())
    settings = Settings(data=tmp_path / "data")
    sources = found(root, settings)
    assert sources["t.tar.gz"].kind is SourceKind.archive
    assert sources["t.tar.gz › ok/файл.txt"].unreadable is None
    reasons = sorted(s.unreadable for k, s in sources.items() if k != "t.tar.gz" and s.unreadable)
    assert len(reasons) == 3 and sum("leads out of the container" in r for r in reasons) == 2
    assert any("a link" in r for r in reasons)
    assert not (tmp_path / "etc").exists() and not Path("/abs/x.txt").exists()
    assert all(p.is_relative_to(unpack_root(settings)) for p in unpack_root(settings).rglob("*"))


@pytest.mark.parametrize("raw", ["../x", "a/../../x", "/etc/passwd", "C:\\Windows\\x", "..\\..\\x", ""])
def test_member_names_out_of_the_container(raw: str) -> None:
    assert member_name(raw) is None


def test_member_names_kept() -> None:
    assert member_name("./a//b\\c.txt") == "a/b/c.txt" and member_name("акт.pdf") == "акт.pdf"


def test_nesting_and_member_count_limits(root: Path, tmp_path: Path) -> None:
    data = b"deep text"
    for level in range(4):
        data = zipped({f"level{level}.zip" if level else "deep.txt": data})
    (root / "матрёшка.zip").write_bytes(data)
    (root / "много.zip").write_bytes(zipped({f"f{n}.txt": b"x" * 20 for n in range(30)}))
    settings = Settings(data=tmp_path / "data", unpack_max_depth=2, unpack_max_members=25)
    sources = found(root, settings)
    deep = [s for k, s in sources.items() if k.startswith("матрёшка.zip") and s.unreadable]
    assert len(deep) == 1 and "unpack_max_depth" in deep[0].unreadable
    many = [s for k, s in sources.items() if k.startswith("много.zip ›")]
    assert len([s for s in many if not s.unreadable]) == 25
    assert all("unpack_max_members" in s.unreadable for s in many if s.unreadable)


def test_a_mailbox_of_a_thousand_letters(root: Path, tmp_path: Path) -> None:
    lines = []
    for n in range(1, 1001):
        lines.append(
            f"From a@example.ru Mon May 12 14:00:00 2003\nFrom: a@example.ru\nSubject: письмо {n}\n"
            f"Content-Type: text/plain; charset=utf-8\n\nТекст письма номер {n}.\n\n"
        )
    (root / "ящик.mbox").write_text("".join(lines), encoding="utf-8")
    sources = found(root, Settings(data=tmp_path / "data"))
    letters = [s for k, s in sources.items() if k.startswith("ящик.mbox ›")]
    assert len(letters) == 1000 and all(s.kind is SourceKind.mail and s.access == "public" for s in letters)
    assert (
        Path(sources["ящик.mbox › письмо 0777.eml"].path)
        .read_text(encoding="utf-8")
        .endswith("Текст письма номер 777.\n\n")
    )


def test_a_damaged_archive_gives_no_children_and_its_own_read_says_why(root: Path, tmp_path: Path) -> None:
    from tasks.readers.registry import reader_for

    (root / "битый.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 50)
    settings = Settings(data=tmp_path / "data")
    sources = found(root, settings)
    assert list(sources) == ["битый.zip"]
    outcome = reader_for(SourceKind.archive).read(sources["битый.zip"], settings)
    assert outcome.problems and "does not open" in outcome.problems[0].detail


def test_a_container_that_cannot_be_unpacked_never_stops_discovery(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An injected fault (the unpacker raising, as a full disk would): one refused child, the other files found."""
    import tasks.unpack

    (root / "a.zip").write_bytes(zipped({"x.txt": b"text"}))
    (root / "b.txt").write_text("Записка.", encoding="utf-8")

    def full_disk(*_args: object) -> list:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tasks.unpack, "_unpack", full_disk)
    sources = found(root, Settings(data=tmp_path / "data"))
    assert list(sources) == ["a.zip", "a.zip › …", "b.txt"]
    assert "No space left on device" in sources["a.zip › …"].unreadable


def test_gc_removes_the_members_of_container_versions_the_catalog_no_longer_holds(root: Path, tmp_path: Path) -> None:
    from tasks.index.retention import _unneeded_files

    (root / "a.zip").write_bytes(zipped({"x.txt": b"first"}))
    settings = Settings(data=tmp_path / "data")
    kept = found(root, settings)["a.zip"].version
    (root / "a.zip").write_bytes(zipped({"x.txt": b"second"}))
    gone = found(root, settings)["a.zip"].version
    (unpack_root(settings) / "zz" / "zz.123.part").mkdir(parents=True)  # left by a killed unpacking
    unneeded = {p.name for p in _unneeded_files(settings, {kept}, set())}
    assert gone in unneeded and kept not in unneeded and "zz.123.part" in unneeded


def test_a_7z_archive_with_a_cyrillic_name_in_a_folder(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real 7z (written by libarchive itself) holding a Cyrillic-named file in a folder."""
    import libarchive

    src = tmp_path / "src" / "отчёты"
    src.mkdir(parents=True)
    (src / "смета.txt").write_text("Смета на ремонт кровли.", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "src")  # the member's name is the path given
    with libarchive.file_writer(str(root / "архив.7z"), "7zip") as archive:
        archive.add_files("отчёты/смета.txt")
    sources = found(root, Settings(data=tmp_path / "data"))
    child = sources["архив.7z › отчёты/смета.txt"]
    assert child.kind is SourceKind.text and Path(child.path).read_text(encoding="utf-8") == "Смета на ремонт кровли."


def test_a_zip_from_an_old_windows_archiver_names_its_members_in_cp866(root: Path, tmp_path: Path) -> None:
    """No UTF-8 flag, the name's bytes in cp866 (what Windows' own zip and old archivers write in Russia)."""
    name = "Приказ о премии.doc"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        info = zipfile.ZipInfo(name.encode("cp866").decode("cp437"))  # stored as those bytes, flag unset
        archive.writestr(info, b"x" * 10)
    (root / "старый.zip").write_bytes(out.getvalue())
    assert "старый.zip › Приказ о премии.doc" in found(root, Settings(data=tmp_path / "data"))


def test_a_container_replaced_while_it_is_unpacked_keeps_no_listing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery hashed the first bytes; the file is replaced before its members are taken out: what came out
    belongs to other bytes, so nothing is listed under the first version (the next refresh reads the new one)."""
    import tasks.unpack

    (root / "a.zip").write_bytes(zipped({"x.txt": b"first text"}))
    members = tasks.unpack._unpack

    def replaced_meanwhile(source, folder, settings, budget):  # type: ignore[no-untyped-def]
        (root / "a.zip").write_bytes(zipped({"y.txt": b"second text"}))
        return members(source, folder, settings, budget)

    monkeypatch.setattr(tasks.unpack, "_unpack", replaced_meanwhile)
    settings = Settings(data=tmp_path / "data")
    assert list(found(root, settings)) == ["a.zip"]
    assert not list(unpack_root(settings).rglob("members.json"))


def test_a_data_directory_restored_in_part_is_unpacked_again_each_child_once(root: Path, tmp_path: Path) -> None:
    (root / "a.zip").write_bytes(zipped({"x.txt": b"first text", "y.txt": b"second text", "z.txt": b"third"}))
    settings = Settings(data=tmp_path / "data")
    first = list(found(root, settings))
    next(p for p in unpack_root(settings).rglob("*.txt") if p.name.startswith("00002")).unlink()
    again = [s.source_id for s in discover_sources(root, settings)]
    assert again == first == ["a.zip", "a.zip › x.txt", "a.zip › y.txt", "a.zip › z.txt"]
    assert all(Path(s.path).is_file() for s in discover_sources(root, settings) if "›" in s.source_id)


def test_an_attachment_is_decoded_as_it_is_counted_and_decoding_stops_at_the_limit(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#46 item 6: a letter's attachment comes out in blocks as its base64 is decoded, so the member limit stops the
    decoding itself; before, the whole attachment was decoded in memory first and counted after."""
    from tasks.readers import mail, transfer_encoding

    decoded: list[int] = []
    real = transfer_encoding.binascii.a2b_base64

    def counting(data: str, **options: bool) -> bytes:
        out = real(data, **options)
        decoded.append(len(out))
        return out

    monkeypatch.setattr(transfer_encoding.binascii, "a2b_base64", counting)
    big = bytes(range(256)) * (48 << 12)  # 48 MiB that do not compress
    (root / "письмо.eml").write_bytes(letter({"акт.txt": "Акт сверки".encode(), "архив.bin": big}))
    settings = Settings(data=tmp_path / "data", unpack_max_member_bytes=4 << 20)
    sources = found(root, settings)
    assert sources["письмо.eml › акт.txt"].unreadable is None
    refused = sources["письмо.eml › архив.bin"]
    assert refused.unreadable and "unpack_max_member_bytes" in refused.unreadable
    assert max(decoded) <= mail.DECODE_BLOCK and sum(decoded) <= (4 << 20) + 2 * mail.DECODE_BLOCK


@pytest.mark.parametrize("size", [0, 1, 2, 3, 57, 4096, 3 << 20])
def test_blockwise_base64_decoding_gives_what_the_email_package_gives(size: int) -> None:
    from email.message import Message

    from tasks.readers.mail import _decoded_blocks
    from tasks.readers.transfer_encoding import Damage

    original = bytes((n * 7) % 251 for n in range(size))
    part = MIMEApplication(original)
    assert b"".join(_decoded_blocks(part, Damage())) == part.get_payload(decode=True) == original
    damaged = Message()
    damaged["Content-Transfer-Encoding"] = "base64"
    lines = part.get_payload().splitlines()
    damaged.set_payload("\n".join(lines[: len(lines) // 2]) + "!")  # cut after whole lines, a stray character
    assert b"".join(_decoded_blocks(damaged, Damage())) == original[: 57 * (len(lines) // 2)]
