"""Letters (tasks/readers/mail.py, mail_headers.py) on real third-party messages (tests/fixtures/real-archive-2,
Apache-2.0 and MIT) and on messages built here for what the real ones do not show: raw 8-bit headers, RFC 2231
names, a character split between two encoded words, HTML-only bodies, alternatives read once, mailboxes."""

from __future__ import annotations

from email.header import Header
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pytest

from korpus.core.datamodel import Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.mail import MailReader, mbox_messages
from tasks.readers.mail_headers import decode_header
from tasks.readers.registry import kind_of

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive-2" / "email"
SETTINGS = Settings.model_construct()


def source_of(path: Path) -> Source:
    return Source(source_id=path.name, version="v", path=str(path), kind=kind_of(path), size=path.stat().st_size)


def read(path: Path) -> tuple[str, str | None]:
    outcome = MailReader().read(source_of(path), SETTINGS)
    assert not outcome.problems, outcome.problems
    return outcome.pages[0].text, outcome.pages[0].label


def names(path: Path) -> list[tuple[str, SourceKind | None]]:
    return [(m.name, m.kind) for m in MailReader().members(source_of(path), SETTINGS)]


def test_kinds_by_suffix_and_by_name() -> None:
    assert kind_of("a/письмо.eml") is SourceKind.mail and kind_of("b.MSG") is SourceKind.mail
    assert kind_of("ящик.mbox") is SourceKind.mail and kind_of("x/WINMAIL.DAT") is SourceKind.mail
    assert kind_of("данные.dat") is None


def test_a_message_inside_a_message_is_a_member_and_its_to_header_is_decoded() -> None:
    path = FIXTURES / "flanker_enclosed_rfc822.eml"
    text, label = read(path)
    assert "Кому: Александр Клижентас☯ <bob@example.com>" in text and "Вложения: thanks.eml" in text
    assert label == "30.06.2012 17:05 · Bob Marley → Александр Клижентас☯ · «Wow»"
    assert names(path) == [("thanks.eml", SourceKind.mail)]
    inner = next(MailReader().members(source_of(path), SETTINGS))
    assert b"Subject: Thanks!" in b"".join(inner.blocks)


def test_a_raw_utf8_name_cut_mid_character_keeps_what_is_whole() -> None:
    [(name, kind)] = names(FIXTURES / "flanker_russian_attachment_yahoo.eml")
    assert name == "Картинка с очень, очень длинным предлинным именем преименем таким чт"
    assert kind is SourceKind.image  # the name lost its extension: the MIME type (image/png) says what reads it


def test_koi8r_text_and_a_winmail_dat_member() -> None:
    path = FIXTURES / "mimekit_tnef_koi8r.eml"
    text, label = read(path)
    assert "шостий" in text and label.startswith("13.11.2017 08:01 · RR Tester 1 → ems365sync")
    [member] = list(MailReader().members(source_of(path), SETTINGS))
    assert (member.name, member.kind) == ("winmail.dat", SourceKind.mail)


def test_tnef_own_subject_date_and_text(tmp_path: Path) -> None:
    [member] = list(MailReader().members(source_of(FIXTURES / "mimekit_tnef_koi8r.eml"), SETTINGS))
    tnef = tmp_path / "winmail.dat"
    tnef.write_bytes(b"".join(member.blocks))
    text, label = read(tnef)
    assert "шостий" in text and "«rr test 7»" in label and label.startswith("13.11.2017")


def test_an_outlook_msg_in_cp1251() -> None:
    text, label = read(FIXTURES / "poi_cyrillic_message.msg")
    assert 'Тема: Автоматический ответ подсистемы обмена данными ФГУП "Почта России".' in text
    assert "было успешно получено брокером" in text and label.startswith("18.05.2010 07:38 · no-reply@niips.ru →")


def test_a_base64_subject_and_a_structured_body() -> None:
    text, label = read(FIXTURES / "dedoc_example.eml")
    assert label.endswith("«Пример документа»") and "Статья 1" in text and "Сидоров" in text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("=?koi8-r?B?8NLJy8HaIM8g0NLFzcnJ?=", "Приказ о премии"),
        ("=?windows-1251?Q?=CF=F0=E8=EA=E0=E7?= =?windows-1251?Q?_=B9_5?=", "Приказ № 5"),
        # one character's two UTF-8 bytes split between two encoded words
        (
            "=?utf-8?B?0J/RgNC40LrQsNC3INC+INC/0YDQtdC80LjQuCDQ?=\r\n =?utf-8?B?odC80LjRgNC90L7QstC+0Lk=?=",
            "Приказ о премии Смирновой",
        ),
        ("Re: =?UTF-8?Q?=D0=B0=D0=BA=D1=82?= сверки", "Re: акт сверки"),
    ],
)
def test_encoded_words(raw: str, expected: str) -> None:
    assert decode_header(raw) == expected


@pytest.mark.parametrize("codec", ["cp1251", "koi8_r", "utf-8"])
def test_raw_8bit_subject_in_a_russian_code_page(tmp_path: Path, codec: str) -> None:
    body = "Акт сверки расчётов за март".encode(codec)
    raw = b"From: buh@example.ru\r\nTo: dir@example.ru\r\nSubject: " + "Акт сверки за март".encode(codec)
    raw += b"\r\nContent-Type: text/plain\r\n\r\n" + body + b"\r\n"
    path = tmp_path / "письмо.eml"
    path.write_bytes(raw)
    text, label = read(path)
    assert "Тема: Акт сверки за март" in text and "Акт сверки расчётов за март" in text
    assert label == "buh@example.ru → dir@example.ru · «Акт сверки за март»"


def letter_with_attachments() -> bytes:
    message = MIMEMultipart("mixed")
    message["From"] = str(Header("Бухгалтерия", "utf-8")) + " <buh@example.ru>"
    message["To"] = "dir@example.ru"
    message["Subject"] = Header("Смета на ремонт склада", "koi8-r")
    message["Date"] = "Mon, 12 May 2003 14:02:00 +0400"
    alternative = MIMEMultipart("alternative")
    alternative.attach(MIMEText("Смета во вложении, согласуйте до пятницы.", "plain", "cp1251"))
    alternative.attach(
        MIMEText(
            "<html><body><p>Смета во вложении, согласуйте до пятницы.</p><script>track()</script></body></html>",
            "html",
            "utf-8",
        )
    )
    message.attach(alternative)
    sheet = MIMEApplication(b"a;b\n1;2\n", "octet-stream")
    sheet.add_header("Content-Disposition", "attachment", filename=("utf-8", "", "смета 2003.csv"))  # RFC 2231
    message.attach(sheet)
    note = MIMEApplication("Акт приёмки".encode("cp1251"), "octet-stream")
    note.add_header("Content-Disposition", "attachment", filename=str(Header("акт.txt", "cp1251")))  # RFC 2047
    message.attach(note)
    return message.as_bytes()


def test_alternatives_read_once_and_attachments_named_by_rfc2231_and_rfc2047(tmp_path: Path) -> None:
    path = tmp_path / "смета.eml"
    path.write_bytes(letter_with_attachments())
    text, label = read(path)
    assert text.count("Смета во вложении") == 1 and "track" not in text
    assert label == "12.05.2003 14:02 · Бухгалтерия → dir@example.ru · «Смета на ремонт склада»"
    assert names(path) == [("смета 2003.csv", None), ("акт.txt", None)]
    assert "Вложения: смета 2003.csv, акт.txt" in text


def test_an_html_only_letter_becomes_text(tmp_path: Path) -> None:
    message = MIMEText(
        "<html><head><style>p{}</style></head><body><h1>Уведомление</h1><p>Склад закрыт "
        "на инвентаризацию.</p></body></html>",
        "html",
        "koi8-r",
    )
    message["Subject"] = "Inventory"
    path = tmp_path / "html.eml"
    path.write_bytes(message.as_bytes())
    text, _ = read(path)
    assert "Склад закрыт на инвентаризацию." in text and "<" not in text and "p{}" not in text


def test_a_mailbox_gives_each_letter_and_unescapes_from_lines(tmp_path: Path) -> None:
    box = tmp_path / "ящик.mbox"
    letters = []
    for n in range(1, 4):
        letters.append(
            f"From buh@example.ru Mon May 12 14:0{n}:00 2003\nFrom: buh@example.ru\nSubject: письмо {n}"
            f"\nContent-Type: text/plain; charset=utf-8\n\nТекст {n}.\n>From the archive.\n\n"
        )
    box.write_bytes("".join(letters).encode())
    messages = list(mbox_messages(box))
    assert len(messages) == 3 and b"From the archive." in messages[1] and b">From" not in messages[1]
    assert [m.name for m in MailReader().members(source_of(box), SETTINGS)] == [
        "письмо 0001.eml",
        "письмо 0002.eml",
        "письмо 0003.eml",
    ]
    text, _ = read(box)
    assert "писем — 3" in text


SUBJECTS = (
    "Смета на ремонт склада",
    "Сверка остатков угля",
    "Приказ",
    "Счёт-фактура Семёнову",
    "Юбилей завода",
    "Re: акт приёмки 12",
    "ЭЦП: сертификат истекает",
    "Щебень - поставка в июне",
    "Яковлеву И. П.",
)


@pytest.mark.parametrize("codec", ["cp1251", "koi8_r", "cp866"])
def test_short_raw_headers_in_each_code_page(codec: str) -> None:
    from tasks.readers.mail_headers import decode_bytes

    for subject in SUBJECTS:
        assert decode_bytes(subject.encode(codec)) == subject, (codec, subject)
