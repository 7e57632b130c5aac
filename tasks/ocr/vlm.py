"""Tier 2 of the OCR cascade: a vision-language model behind an OpenAI-compatible chat-completions API.

`KORPUS_VLM_URL` points at e.g. vLLM serving DeepSeek-OCR or Qwen2.5-VL; model, prompt and timeout are settings.
Only pages that failed tier 1 are sent, under the Prefect global concurrency limit `korpus-vlm` when one exists
(`prefect gcl create korpus-vlm --limit 2`), so a GPU server is not flooded. Text has no geometry: it is placed
on tier 1's line boxes for the searchable PDF.
"""

from __future__ import annotations

import base64

from korpus.core.datamodel import PageWord
from korpus.core.settings import Settings
from tasks.runtime.chat import ChatClient, ChatError, ChatUnavailable
from tasks.runtime.retry import RetryPolicy

CONCURRENCY_LIMIT = "korpus-vlm"


class VlmError(ChatError):
    """The VLM endpoint answered something unusable, or is not configured."""


def read_page(png: bytes, settings: Settings) -> str:
    """Send one page image, get its text. A server that stays down past the retries raises `ChatUnavailable`
    (the page is left pending); an unusable answer raises `VlmError`."""
    if not settings.vlm_url:
        raise VlmError("no VLM endpoint configured (KORPUS_VLM_URL)")
    image = base64.b64encode(png).decode("ascii")
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": settings.vlm_prompt},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
        ],
    }
    client = ChatClient(settings.vlm_url, settings.vlm_model, settings.vlm_timeout, RetryPolicy.from_settings(settings))
    from prefect.concurrency.sync import concurrency

    try:
        with concurrency(CONCURRENCY_LIMIT, occupy=1, strict=False):
            return client.complete([message]).strip()
    except ChatUnavailable:
        raise
    except ChatError as exc:
        raise VlmError(f"VLM request failed: {exc}") from exc


def place_on_lines(text: str, tier1_words: list[PageWord], page_width: float, page_height: float) -> list[PageWord]:
    """VLM lines onto tier 1's line boxes (proportionally when the counts differ); words spread by length."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    boxes: dict[int, list[PageWord]] = {}
    for word in tier1_words:
        boxes.setdefault(word.line, []).append(word)
    line_boxes = [
        (min(w.x0 for w in ws), min(w.y0 for w in ws), max(w.x1 for w in ws), max(w.y1 for w in ws))
        for _, ws in sorted(boxes.items())
    ]
    if not line_boxes:  # nothing from tier 1: stack the lines down the page
        step = page_height / max(1, len(lines))
        line_boxes = [(36.0, i * step, page_width - 36.0, (i + 0.8) * step) for i in range(len(lines))]
    placed: list[PageWord] = []
    for i, line in enumerate(lines):
        x0, y0, x1, y1 = line_boxes[min(len(line_boxes) - 1, i * len(line_boxes) // max(1, len(lines)))]
        tokens = line.split()
        total = sum(len(t) + 1 for t in tokens)
        x = x0
        for token in tokens:
            width = (x1 - x0) * (len(token) + 1) / total
            placed.append(
                PageWord(text=token, x0=x, y0=y0, x1=x + width * len(token) / (len(token) + 1), y1=y1, line=i)
            )
            x += width
    return placed
