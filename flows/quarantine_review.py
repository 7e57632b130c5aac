"""`quarantine_review`: a reviewer decides on one quarantine item in the Prefect UI.

The flow shows the item (markdown: reasons, evidence, decisions so far), pauses with a typed form — a dropdown for
release / reject / reocr, the reviewer's name, a note — and applies the decision exactly as `korpus review` does.
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
from tasks.index_sqlite import SqliteIndex
from tasks.review import Action, ReviewError, apply_decision, describe_item


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
def decide(item_id: str, decision: ReviewDecision, settings: Settings) -> str:
    return apply_decision(item_id, Action(decision.action), decision.reviewer, decision.note, settings)


@flow(name="quarantine_review")
def quarantine_review(item_id: str, data: str | None = None, timeout_s: int = 7 * 24 * 3600) -> dict[str, Any]:
    """Show one quarantine item, wait for a reviewer's decision in the UI form, apply and record it."""
    set_offline_switches()
    settings = Settings(data=Path(data)) if data else Settings()
    description = load_description(item_id, settings)
    create_markdown_artifact(markdown=description, key=f"quarantine-{item_id}")
    form = ReviewDecision.with_initial_data(description=description, action="reject", reviewer="")
    decision = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=2)
    outcome = decide(item_id, decision, settings)
    get_run_logger().info("%s: %s by %s → %s", item_id, decision.action, decision.reviewer, outcome)
    return {"item_id": item_id, "action": decision.action, "reviewer": decision.reviewer, "outcome": outcome}
