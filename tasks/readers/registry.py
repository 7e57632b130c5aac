"""Which reader reads which kind of file: the built-in readers as one table of names, plug-ins from the entry-point
group `korpus.readers`, and the lookups every stage uses (`kind_of` by suffix, `reader_for` by kind).

The table is data: reading it imports the reader modules when a lookup first needs them, never the other way —
a reader imports the interface it implements (tasks/readers/base.py) and nothing that imports it back. A plug-in
package names its reader class in its own metadata:

    [project.entry-points."korpus.readers"]
    markdownish = "korpus_markdown:MarkdownReader"
"""

from __future__ import annotations

import os
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from korpus.core.datamodel import SourceKind
from tasks.readers.base import Reader

BUILTIN_READERS = (
    "tasks.readers.pdf:PdfReader",
    "tasks.readers.image:ImageReader",
    "tasks.readers.djvu:DjvuReader",
    "tasks.readers.office:OfficeReader",
    "tasks.readers.text:TextReader",
    "tasks.readers.markup:MarkupReader",
    "tasks.readers.sheet:SheetReader",
    "tasks.readers.mail:MailReader",
    "tasks.readers.archive:ArchiveReader",
    "tasks.readers.audio:AudioReader",
)
ENTRY_POINTS = "korpus.readers"

READERS: dict[SourceKind, Reader] = {}
SUFFIXES: dict[str, SourceKind] = {}
NAMES: dict[str, SourceKind] = {}


def resolve(target: str) -> type:
    """`package.module:Name` → the object it names."""
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def register_reader(reader: Reader) -> Reader:
    READERS[reader.kind] = reader
    SUFFIXES.update({suffix: reader.kind for suffix in reader.suffixes})
    NAMES.update({name: reader.kind for name in getattr(reader, "names", ())})
    return reader


def _loaded() -> None:
    """The built-in readers, then the plug-ins (a plug-in may take over a suffix), on the first lookup."""
    if READERS:
        return
    for target in BUILTIN_READERS:
        register_reader(resolve(target)())
    for point in entry_points(group=ENTRY_POINTS):
        register_reader(point.load()())


def kind_of(path: Path | str) -> SourceKind | None:
    _loaded()
    name = os.path.basename(path).lower()  # string operations: discovery asks this of every file under the root
    return NAMES.get(name) or SUFFIXES.get(os.path.splitext(name)[1])


def is_container(kind: SourceKind | None) -> bool:
    """The kind's reader lists members (tasks/readers/base.py Container): letters, mailboxes, archives."""
    _loaded()
    return kind is not None and hasattr(READERS.get(kind), "members")


def reader_for(kind: SourceKind) -> Reader:
    _loaded()
    return READERS[kind]
