"""korpus: Russian-language archives turned into citable RAG evidence."""

__version__ = "0.1.0"
