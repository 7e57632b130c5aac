"""OCR tiers behind one interface (engine.py): Tesseract (tier 1) and a VLM (tier 2), each cached per page."""
