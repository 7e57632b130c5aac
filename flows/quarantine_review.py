"""`quarantine_review`: a reviewer decides on quarantine items in the Prefect UI — one, or a batch of item ids.

The flow shows the items (markdown: reasons, evidence, decisions so far), pauses with a typed form — a dropdown for
release / reject / reocr, the reviewer's name, a note — and applies the decision to every item exactly as `korpus
review` does (one by one, each recorded; an item it cannot be applied to is reported, the others still decided).
The web page `/review` of `korpus serve` is the faster way through a long queue (docs/review.md).
Resume it from the UI, or programmatically: `resume_flow_run(id, run_input={"action": "reject", ...})`; the
server validates the input against the form's schema and refuses anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import Field

from korpus.model_store import set_offline_switches
from korpus.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.review.actions import Action, ReviewError, apply_batch, describe_item


class ReviewDecision(RunInput):
    """The form a reviewer fills in."""

    action: Literal["release", "reject", "reocr"] = Field(description="What to do with the item.")
    reviewer: str = Field(min_length=1, max_length=200, description="Who decides.")
    note: str = Field(default="", max_length=2000, description="Why; kept in the audit trail.")


@task(name="describe-item", cache_policy=NO_CACHE)
def load_description(item_id: str, settings: Settings) -> str:
    with SqliteIndex(settings.index_path) as index:
        item = index.quarantine_item(item_id)
    if item is None:
        raise ReviewError(f"no quarantine item {item_id!r}")
    return describe_item(item)


@task(name="apply-decision", cache_policy=NO_CACHE)
def decide(item_ids: list[str], decision: ReviewDecision, settings: Settings) -> dict[str, str]:
    return apply_batch(item_ids, Action(decision.action), decision.reviewer, decision.note, settings)


@flow(name="quarantine_review")
def quarantine_review(
    item_id: str | None = None,
    data: str | None = None,
    timeout_s: int = 7 * 24 * 3600,
    item_ids: list[str] | None = None,
) -> dict[str, Any]:
    """Show the quarantine items (`item_id`, or a batch in `item_ids`), wait for one decision in the UI form, apply
    and record it for each."""
    set_offline_switches()
    settings = Settings(data=Path(data)) if data else Settings()
    ids = list(dict.fromkeys([*([item_id] if item_id else []), *(item_ids or [])]))
    if not ids:
        raise ReviewError("give item_id or item_ids (see `korpus review list`)")
    description = "\n\n".join(load_description(i, settings) for i in ids)
    key = f"quarantine-{ids[0]}" if len(ids) == 1 else f"quarantine-batch-{len(ids)}"
    create_markdown_artifact(markdown=description, key=key)
    form = ReviewDecision.with_initial_data(description=description[:5000], action="reject", reviewer="")
    decision = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=2)
    outcomes = decide(ids, decision, settings)
    for one, outcome in outcomes.items():
        get_run_logger().info("%s: %s by %s → %s", one, decision.action, decision.reviewer, outcome)
    single = {"item_id": ids[0], "outcome": outcomes[ids[0]]} if len(ids) == 1 else {}
    return {"action": decision.action, "reviewer": decision.reviewer, "outcomes": outcomes, **single}
