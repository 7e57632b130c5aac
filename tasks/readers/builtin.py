"""Registers korpus's own readers (called by tasks/readers/base.py on the first lookup)."""

from tasks.readers.audio import AudioReader
from tasks.readers.base import register_reader
from tasks.readers.djvu import DjvuReader
from tasks.readers.image import ImageReader
from tasks.readers.office import OfficeReader
from tasks.readers.pdf import PdfReader
from tasks.readers.text import TextReader


def register_builtin_readers() -> None:
    for reader in (PdfReader(), ImageReader(), DjvuReader(), OfficeReader(), TextReader(), AudioReader()):
        register_reader(reader)
