"""BOUND and ROUTE: the approved chunk policies (`policies.py`), the chunker (`chunking.py`, with the optional LLM
boundary splitter in `splitter.py`) and the deterministic contract gate (`gate.py`)."""
