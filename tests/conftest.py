"""Shared fixtures. Integration tests use the real models built by `korpus models` under KORPUS_HOME."""

from __future__ import annotations

import os
import tempfile

# Before Prefect is imported: a private Prefect home (ephemeral server database) and no telemetry lookups.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="korpus-test-prefect-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # a loaded 2-core machine (FACTS.md)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
