"""One Reader per file kind (base.py: the interface and the registry by suffix)."""
