"""What every stage runs on: the page cache (`page_cache.py`), retries of transient faults (`retry.py`), engine
versions for cache keys (`versions.py`), the refresh lock (`refresh_lock.py`) and named crash points
(`crash_points.py`)."""
