"""Retrieval: one `Retriever` (routing, fusion, identifier pins, rerank, scope enforcement) over any
`SearchBackend` (tasks/index/backend.py) — the embedded SQLite index or an OpenSearch cluster."""
