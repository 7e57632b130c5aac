"""Where chunks are stored and searched: the SQLite catalog and index (`sqlite.py`, always; its search side in
`sqlite_search.py`), the OpenSearch mirror (`opensearch.py`), and the in-memory vector snapshot
(`vector_cache.py`). Both search sides implement `tasks.index.backend.SearchBackend`."""
