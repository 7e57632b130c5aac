"""#61 item 2: a damaged base64 attachment keeps every group that arrived intact.

The property runs over the real base64 attachments of the letters in tests/fixtures/real-archive-2 (third-party files,
licences beside them): random corruptions — a character lost, one added (of the alphabet, `=`, or outside it), one
replaced — in random lines; every 4-character group the corruption did not touch decodes to its original bytes, in
order. Before, one stray character before the padding gave `b""` for the whole block (up to 1 MiB)."""

from __future__ import annotations

import email
import email.policy
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.readers.transfer_encoding import Damage, decode_base64

pytestmark = pytest.mark.unit
LETTERS = Path(__file__).parents[1] / "fixtures" / "real-archive-2" / "email"
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def real_attachments() -> list[str]:
    """The base64 payloads (as the letters hold them: 76-character lines) of the real letters' parts over 200 characters
    (benchmarks/readers.py measures the decoders over the same)."""
    found = []
    for path in sorted(LETTERS.glob("*.eml")):
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.compat32)
        for part in message.walk():
            payload = part.get_payload()
            if isinstance(payload, str) and part.get("content-transfer-encoding", "").lower() == "base64":
                if len(payload) > 200:
                    found.append(payload)
    return found


ATTACHMENTS = real_attachments()


def test_the_real_letters_hold_base64_attachments() -> None:
    assert len(ATTACHMENTS) >= 3 and max(map(len, ATTACHMENTS)) > 100_000


def decoded(text: str) -> tuple[bytes, Damage]:
    damage = Damage()
    return b"".join(decode_base64(text, damage, block=4096)), damage


def missing_in_order(pieces: list[bytes], out: bytes) -> list[int]:
    """Indices of the pieces not found in `out` in order (each after the one before)."""
    missing, at = [], 0
    for n, piece in enumerate(pieces):
        found = out.find(piece, at)
        if found < 0:
            missing.append(n)
        else:
            at = found + len(piece)
    return missing


@pytest.mark.parametrize("number", range(len(ATTACHMENTS)))
def test_an_intact_attachment_decodes_as_the_email_package_decodes_it(number: int) -> None:
    import base64

    out, damage = decoded(ATTACHMENTS[number])
    assert out == base64.b64decode("".join(ATTACHMENTS[number].split())) and not damage


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_intact_group_of_a_damaged_real_attachment_decodes_to_its_bytes(data: st.DataObject) -> None:
    import base64

    payload = data.draw(st.sampled_from(ATTACHMENTS))
    lines = payload.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    most = max(1, min(4, len(lines) // 3))  # damage is sparse: most lines arrive whole
    damaged_lines = data.draw(st.sets(st.integers(0, len(lines) - 1), min_size=1, max_size=most))
    groups: list[bytes] = []  # every original group the corruption left alone, as bytes
    corrupted = list(lines)
    for n, line in enumerate(lines):
        line = line.strip()
        line_groups = [line[i : i + 4] for i in range(0, len(line), 4)]
        if n not in damaged_lines:
            groups += [base64.b64decode(g) for g in line_groups]
            continue
        at = data.draw(st.integers(0, len(line) - 1))
        how = data.draw(st.sampled_from(["lose", "add", "add-equals", "add-outside", "replace"]))
        stray = data.draw(st.sampled_from(ALPHABET))
        new = {
            "lose": line[:at] + line[at + 1 :],
            "add": line[:at] + stray + line[at:],
            "add-equals": line[:at] + "=" + line[at:],
            "add-outside": line[:at] + "!" + line[at:],
            "replace": line[:at] + stray + line[at + 1 :],
        }[how]
        corrupted[n] = new
        touched = at // 4
        groups += [base64.b64decode(g) for k, g in enumerate(line_groups) if k != touched]
    out, _damage = decoded("\n".join(corrupted) + "\n")
    missing = missing_in_order(groups, out)
    assert not missing, (len(missing), len(groups))
    assert len(out) >= len(b"".join(groups))


def test_a_stray_character_before_the_padding_loses_only_its_line() -> None:
    """The reported case: the last line `…AB=` gets a stray character before its `=`; before, the whole block
    decoded to nothing."""
    import base64

    original = bytes(range(256)) * 40 + b"xy"
    lines = base64.encodebytes(original).decode().splitlines()
    lines[-1] = lines[-1][:-1] + "Q=" if lines[-1].endswith("=") else lines[-1] + "Q"
    out, damage = decoded("\n".join(lines))
    assert out.startswith(original[: 57 * (len(lines) - 1)]) and damage.lines == [len(lines)]
    assert "decoded from both ends" in damage.describe()


def test_damage_is_recorded_on_the_attachments_listing(tmp_path: Path) -> None:
    """The damage goes with the member into the container's listing (tasks/unpack.py `members.json`)."""
    import base64
    import json

    from korpus.core.settings import Settings
    from tasks.receive import discover_sources
    from tasks.unpack import unpack_root

    text = "Акт сверки взаимных расчётов за третий квартал. ".encode() * 40
    lines = base64.encodebytes(text).decode().splitlines()
    lines[3] = lines[3][:10] + lines[3][11:]  # a character lost in the fourth line
    letter = (
        "From: a@b.ru\nTo: c@d.ru\nSubject: Акт\nMIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain; charset=utf-8\n\nСм. вложение.\n'
        '--b\nContent-Type: text/plain; charset=utf-8\nContent-Disposition: attachment; filename="akt.txt"\n'
        "Content-Transfer-Encoding: base64\n\n" + "\n".join(lines) + "\n--b--\n"
    )
    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: a\n  access: public\n", encoding="utf-8")
    (root / "письмо.eml").write_text(letter, encoding="utf-8")
    settings = Settings(data=tmp_path / "data")
    sources = {s.source_id: s for s in discover_sources(root, settings)}
    child = sources["письмо.eml › akt.txt"]
    body = Path(child.path).read_bytes()
    assert body[: 57 * 3] == text[: 57 * 3] and body.endswith(text[57 * 4 :])
    listing = json.loads(next(unpack_root(settings).rglob("members.json")).read_text(encoding="utf-8"))
    entry = next(m for m in listing["members"] if m["name"] == "akt.txt")
    assert "line(s) (4)" in entry["damage"] and any("akt.txt" in note for note in listing["notes"])
