"""One client for every OpenAI-compatible chat-completions endpoint korpus talks to: the VLM OCR tier
(`KORPUS_VLM_URL`) and the LLM boundary splitter (`KORPUS_SPLITTER_URL`).

What a server restart looks like — 429/500/502/503/504, a refused or dropped connection, a read timeout — is a
`ChatUnavailable` (transient) and is retried with backoff (tasks/runtime/retry.py), honouring `Retry-After`. What no
retry can fix — another 4xx, an answer that is not a chat completion — is a `ChatError` at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from tasks.runtime.retry import RetryPolicy, TransientError, with_retries

RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class ChatError(RuntimeError):
    """The endpoint answered something no retry will change (a 4xx, no usable content)."""


class ChatUnavailable(ChatError, TransientError):
    """The endpoint did not answer (timeout, connection refused or dropped, 5xx, 429): worth trying again."""


@dataclass
class ChatClient:
    """`ChatClient(url, model).complete(messages)` → the assistant's text.

    >>> ChatClient("http://127.0.0.1:8000/v1", "qwen2.5-vl", timeout=60).complete([{"role": "user", "content": "…"}])
    """

    url: str
    model: str
    timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def complete(self, messages: list[dict[str, Any]], **extra: Any) -> str:
        body = {"model": self.model, "temperature": 0, "messages": messages, **extra}
        endpoint = f"{self.url.rstrip('/')}/chat/completions"
        return with_retries(lambda: self._once(endpoint, body), self.retry, f"chat {self.model} at {self.url}")

    def _once(self, endpoint: str, body: dict[str, Any]) -> str:
        try:
            response = httpx.post(endpoint, json=body, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise ChatUnavailable(f"no answer within {self.timeout:.0f} s") from exc
        except httpx.TransportError as exc:  # refused, reset, dropped mid-answer
            raise ChatUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code in RETRIED_STATUS:
            raise ChatUnavailable(f"HTTP {response.status_code}", retry_after=_retry_after(response))
        if response.status_code >= 400:
            raise ChatError(f"HTTP {response.status_code}: {response.text[:300]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ChatError(f"not a chat completion: {response.text[:300]!r}") from exc
        if not isinstance(content, str):
            raise ChatError("the answer holds no text")
        return content


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None
