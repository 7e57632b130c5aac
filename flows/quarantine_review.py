"""`quarantine_review`: a reviewer decides on quarantine items in the Prefect UI — one, or a batch of item ids.

The flow pauses with a typed form — a dropdown for release / reject / reocr, the reviewer's key, a note — and
applies the decision to every item exactly as `korpus review` does (one by one, each recorded; an item it cannot be
applied to is reported, the others still decided).

Whoever can open the Prefect UI is not thereby a reviewer, nor granted a scope:
- the decision is made under a reviewer key from `KORPUS_REVIEW_KEYS` (the same keys as `/review`): the audit trail
  gets the key's name, and an item outside the key's scopes is refused as if it did not exist. Without reviewer
  keys the flow refuses to run. The key typed into the form is deleted from Prefect's run inputs once read;
- what the flow writes to Prefect (the form's description, its artifacts and logs) is item ids, reason codes,
  statuses and counts — never document text, evidence or file names; its result adds each item's outcome in
  words (a refusal may name the file). The evidence is on `/review/items/ID`, each item linked there.

Resume it from the UI, or programmatically: `resume_flow_run(id, run_input={"action": "reject", "reviewer_key":
…})`; the server validates the input against the form's schema and refuses anything else. The web page `/review` of
`korpus serve` is the faster way through a long queue (docs/review.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput, keyset_from_base_key
from prefect.input.actions import delete_flow_run_input
from pydantic import Field, SecretStr

from korpus.core.model_store import set_offline_switches
from korpus.core.settings import Reviewer, Settings
from tasks.index.sqlite import SqliteIndex
from tasks.review.actions import Action, ReviewError, apply_batch

PAUSE_KEY = "decision"


class ReviewDecision(RunInput):
    """The form a reviewer fills in."""

    action: Literal["release", "reject", "reocr"] = Field(description="What to do with the item.")
    reviewer_key: SecretStr = Field(
        min_length=1, max_length=500, description="Your reviewer key (KORPUS_REVIEW_KEYS), as on /review."
    )
    note: str = Field(default="", max_length=2000, description="Why; kept in the audit trail.")


def reviewer_for(key: str, settings: Settings) -> Reviewer:
    """The reviewer a key belongs to (the same lookup as /review's); a key that is not one is refused."""
    reviewer = settings.reviewer(key)
    if reviewer is None:
        raise ReviewError("not a reviewer key (KORPUS_REVIEW_KEYS): nothing was decided")
    return reviewer


@task(name="describe-items", cache_policy=NO_CACHE)
def summarise(item_ids: list[str], settings: Settings) -> str:
    """Markdown for the Prefect UI: per item its id, status, reason codes and page — no text, no file name."""
    lines = ["| item | status | reasons | page |", "|---|---|---|---|"]
    reasons: Counter[str] = Counter()
    with SqliteIndex(settings.index_path) as index:
        for item_id in item_ids:
            item = index.quarantine_item(item_id)
            if item is None:
                lines.append(f"| `{item_id}` | unknown | — | — |")
                continue
            reasons.update(item["reasons"])
            shown = f"[`{item_id}`]({item_page(settings, item_id)})" if settings.review_url else f"`{item_id}`"
            lines.append(f"| {shown} | {item['status']} | {', '.join(item['reasons'])} | {item['page'] or '—'} |")
    where = item_page(settings, "ID") if settings.review_url else "/review/items/ID in korpus serve"
    counts = ", ".join(f"{code} {n}" for code, n in reasons.most_common()) or "—"
    return "\n".join(
        [
            f"## Карантин: {len(item_ids)} item(s)",
            "",
            f"reasons: {counts}",
            "",
            *lines,
            "",
            f"The evidence is shown to reviewers only, at {where}.",
        ]
    )


def item_page(settings: Settings, item_id: str) -> str:
    """The review page's address of one item (korpus/apps/review_web.py serves it at `/review/items/{item_id}`)."""
    return f"{(settings.review_url or '/review').rstrip('/')}/items/{item_id}"


@task(name="apply-decision", cache_policy=NO_CACHE)
def decide(item_ids: list[str], action: str, reviewer: Reviewer, note: str, settings: Settings) -> dict[str, str]:
    return apply_batch(item_ids, Action(action), reviewer.name, note, settings, scopes=reviewer.scopes)


@flow(name="quarantine_review")
def quarantine_review(
    item_id: str | None = None,
    data: str | None = None,
    timeout_s: int = 7 * 24 * 3600,
    item_ids: list[str] | None = None,
) -> dict[str, Any]:
    """Show the quarantine items (`item_id`, or a batch in `item_ids`) as ids and reason codes, wait for one decision
    in the UI form, and apply it under the reviewer key's name and scopes."""
    set_offline_switches()
    settings = Settings(data=Path(data)) if data else Settings()
    if not settings.review_keys:
        raise ReviewError("review is off: set KORPUS_REVIEW_KEYS (reviewer key → name and scopes)")
    ids = list(dict.fromkeys([*([item_id] if item_id else []), *(item_ids or [])]))
    if not ids:
        raise ReviewError("give item_id or item_ids (see `korpus review list`)")
    description = summarise(ids, settings)
    create_markdown_artifact(
        markdown=description, key=f"quarantine-{ids[0]}" if len(ids) == 1 else f"quarantine-batch-{len(ids)}"
    )
    form = ReviewDecision.with_initial_data(description=description[:5000], action="reject")
    decision = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=2, key=PAUSE_KEY)
    delete_flow_run_input(keyset_from_base_key(f"paused-{PAUSE_KEY}")["response"])  # the key leaves Prefect
    reviewer = reviewer_for(decision.reviewer_key.get_secret_value(), settings)
    outcomes = decide(ids, decision.action, reviewer, decision.note, settings)
    for one, outcome in outcomes.items():
        get_run_logger().info(
            "%s: %s by %s → %s",
            one,
            decision.action,
            reviewer.name,
            "refused" if outcome.startswith("refused") else "done",
        )
    tally = Counter("refused" if o.startswith("refused") else "decided" for o in outcomes.values())
    create_markdown_artifact(
        markdown=f"## {decision.action} by {reviewer.name}\n\n"
        + ", ".join(f"{k}: {v}" for k, v in sorted(tally.items())),
        key="quarantine-decision",
    )
    single = {"item_id": ids[0], "outcome": outcomes[ids[0]]} if len(ids) == 1 else {}
    return {"action": decision.action, "reviewer": reviewer.name, "outcomes": outcomes, **single}
