"""PDF pages: rendering and text layers (`pages.py`), the searchable copy with an invisible text layer
(`searchable.py`, `invisible_font.py`)."""
