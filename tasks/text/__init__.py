"""Text, whatever its source: the Russian analysis shared by every backend (`analysis.py`), typo variants
(`typos.py`), identifiers (`identifiers.py`), the text-layer quality
detector (`quality.py`) and structure units (`structure.py`)."""
