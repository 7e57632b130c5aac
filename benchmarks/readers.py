"""#61: every reader under a budget, and damaged base64 recovered — measured.

    .venv/bin/python benchmarks/readers.py [--corruptions 300]

1. The worst generated input of each kind that expands (a web page of nested unclosed `<iframe>`s, an EPUB whose
   spine names one chapter again and again, a feed of many items, a plain text file): korpus's reader and the reader
   a competent engineer would write without korpus (selectolax's own `.text()` for a page; `zipfile` reading each
   spine entry as named for an EPUB; `.decode()` for text), each in a fresh process, its time (imports left out) and
   peak RSS (imports in), at two sizes
   (the slope: time per input byte from the small size to the large one).
2. Base64 over random corruptions of the real attachments in tests/fixtures/real-archive-2: the share of intact
   4-character groups each decoder gives back — Python's `email` (`get_payload(decode=True)`), korpus before #61
   (stream, the first `=` ends the data), korpus now (line by line, both ends of a damaged line).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import email
import email.message
import email.policy
import io
import json
import random
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.unit.test_transfer_encoding import missing_in_order, real_attachments  # noqa: E402


def nested_frames(levels: int) -> bytes:
    return ("<html><body>" + "".join(f"<iframe>уровень {n} текст " for n in range(levels))).encode()


def repeated_spine(times: int, chapter_bytes: int = 200_000) -> bytes:
    chapter = "<html><body>" + "<p>Глава о поставке насосов и ремонте склада.</p>" * (chapter_bytes // 60) + "</body>"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr(
            "META-INF/container.xml", '<container><rootfiles><rootfile full-path="c.opf"/></rootfiles></container>'
        )
        spine = "".join('<itemref idref="c"/>' for _ in range(times))
        book.writestr(
            "c.opf", f'<package><manifest><item id="c" href="c.html"/></manifest><spine>{spine}</spine></package>'
        )
        book.writestr("c.html", chapter)
    return out.getvalue()


def many_items(items: int) -> bytes:
    body = "".join(
        f"<item><title>Новость {n}</title><description>&lt;p&gt;Текст {n}&lt;/p&gt;</description></item>"
        for n in range(items)
    )
    return f'<?xml version="1.0"?><rss><channel><title>Лента</title>{body}</channel></rss>'.encode()


def long_text(lines: int) -> bytes:
    return "".join(f"Строка {n} служебной записки о ремонте.\n" for n in range(lines)).encode()


CASES = {  # kind → (suffix, generator, small size, large size)
    "html, nested unclosed iframes": (".html", nested_frames, 1000, 4000),
    "epub, one chapter named again in the spine": (".epub", repeated_spine, 50, 200),
    "rss, many items": (".rss", many_items, 5000, 20000),
    "text, long": (".txt", long_text, 50_000, 200_000),
}

RUN = r"""
import json, resource, sys, time
from pathlib import Path
path, who = Path(sys.argv[1]), sys.argv[2]
from selectolax.lexbor import LexborHTMLParser
if who == "korpus":
    from korpus.core.datamodel import Source
    from korpus.core.settings import Settings
    from tasks.readers.registry import kind_of, reader_for
    import tasks.readers.markup, tasks.readers.text
    reader_for(kind_of(path))
    started = time.perf_counter()
    source = Source(source_id=path.name, version="x", path=str(path), kind=kind_of(path), owner="o", access="public")
    outcome = reader_for(source.kind).read(source, Settings())
    chars = sum(len(p.text) for p in outcome.pages)
    refused = [p.detail[:80] for p in outcome.problems]
else:
    refused = []
    started = time.perf_counter()
    if path.suffix == ".html":
        from selectolax.lexbor import LexborHTMLParser
        chars = len(LexborHTMLParser(path.read_bytes().decode()).text())
    elif path.suffix == ".epub":
        import re, zipfile
        from selectolax.lexbor import LexborHTMLParser
        book = zipfile.ZipFile(path)
        opf = book.read("c.opf").decode()
        chars = 0
        for ref in re.findall(r'idref="([^"]+)"', opf):
            chars += len(LexborHTMLParser(book.read("c.html").decode()).text())
    elif path.suffix == ".rss":
        from xml.etree import ElementTree
        chars = len(" ".join(ElementTree.fromstring(path.read_bytes()).itertext()))
    else:
        chars = len(path.read_bytes().decode())
print(json.dumps({"seconds": time.perf_counter() - started, "chars": chars, "refused": refused,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(path: Path, who: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(path), who], capture_output=True, text=True, cwd=ROOT, timeout=900, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def readers(folder: Path) -> list[str]:
    rows = [
        "| input | size | korpus s | korpus peak MB | plain s | plain peak MB | korpus chars | plain chars |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, (suffix, make, small, large) in CASES.items():
        per_byte = []
        for size in (small, large):
            path = folder / f"case{suffix}"
            path.write_bytes(make(size))
            ours, plain = measure(path, "korpus"), measure(path, "plain")
            per_byte.append(ours["seconds"] / path.stat().st_size)
            cells = [
                f"{kind} ({size})",
                f"{path.stat().st_size:,} B",
                f"{ours['seconds']:.2f}",
                f"{ours['peak_mb']:.0f}",
                f"{plain['seconds']:.2f}",
                f"{plain['peak_mb']:.0f}",
                f"{ours['chars']:,}",
                f"{plain['chars']:,}",
            ]
            rows.append("| " + " | ".join(cells) + " |")
            if ours["refused"]:
                rows[-1] += f" refused: {ours['refused'][0]}"
        rows.append(
            f"| ↳ slope, korpus: s per input byte large/small = {per_byte[1] / per_byte[0]:.2f} | | | | | | | |"
        )
    return rows


# --- base64 ----------------------------------------------------------------------------------------------------


def before_61(raw: str) -> bytes:
    """korpus's decoder before #61 (tasks/readers/mail.py `_decoded_blocks`), whole."""
    pending = re.sub(r"[^A-Za-z0-9+/=]", "", raw)
    end = pending.find("=")
    if end >= 0:
        return binascii.a2b_base64(pending[:end] + "=" * (-end % 4)) if end % 4 != 1 else b""
    cut = len(pending) - len(pending) % 4
    out = binascii.a2b_base64(pending[:cut])
    rest = pending[cut:]
    return out + (binascii.a2b_base64(rest + "=" * (-len(rest) % 4)) if len(rest) > 1 else b"")


def by_email(raw: str) -> bytes:
    part = email.message.Message()
    part["Content-Transfer-Encoding"] = "base64"
    part.set_payload(raw)
    return part.get_payload(decode=True) or b""


def now(raw: str) -> bytes:
    from tasks.readers.transfer_encoding import Damage, decode_base64

    return b"".join(decode_base64(raw, Damage()))


def corrupt(payload: str, rnd: random.Random) -> tuple[str, list[bytes]]:
    lines = [line.strip() for line in payload.splitlines() if line.strip()]
    damaged = set(rnd.sample(range(len(lines)), max(1, min(4, len(lines) // 3))))
    groups, out = [], []
    for n, line in enumerate(lines):
        chunks = [line[i : i + 4] for i in range(0, len(line), 4)]
        if n not in damaged:
            groups += [base64.b64decode(g) for g in chunks]
            out.append(line)
            continue
        at = rnd.randrange(len(line))
        stray = rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=!")
        how = rnd.choice(["lose", "add", "replace"])
        out.append(
            {
                "lose": line[:at] + line[at + 1 :],
                "add": line[:at] + stray + line[at:],
                "replace": line[:at] + stray + line[at + 1 :],
            }[how]
        )
        groups += [base64.b64decode(g) for k, g in enumerate(chunks) if k != at // 4]
    return "\n".join(out) + "\n", groups


def kept(groups: list[bytes], out: bytes) -> int:
    return len(groups) - len(missing_in_order(groups, out))


def base64_rows(corruptions: int) -> list[str]:
    rnd = random.Random(61)
    payloads = real_attachments()
    totals = {"email package": 0, "korpus before #61": 0, "korpus now": 0}
    groups_total = 0
    for _ in range(corruptions):
        text, groups = corrupt(rnd.choice(payloads), rnd)
        groups_total += len(groups)
        for name, decode in (("email package", by_email), ("korpus before #61", before_61), ("korpus now", now)):
            totals[name] += kept(groups, decode(text))
    rows = [
        f"{corruptions} corruptions of {len(payloads)} real attachments, {groups_total:,} intact groups:",
        "| decoder | intact groups given back |",
        "|---|---|",
    ]
    rows += [f"| {name} | {count / groups_total:.4f} |" for name, count in totals.items()]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corruptions", type=int, default=300)
    args = parser.parse_args()
    print("\n".join(base64_rows(args.corruptions)))
    print()
    with tempfile.TemporaryDirectory() as folder:
        print("\n".join(readers(Path(folder))))


if __name__ == "__main__":
    main()
