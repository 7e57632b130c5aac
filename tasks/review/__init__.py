"""Manual quarantine review: decisions and their effects (`actions.py`) and the queue the web page reads
(`queue.py`)."""
