"""Static checks of the infra recipes and the docs: every compose file is valid by the Compose specification (the
schema vendored in check-jsonschema; no container engine runs here), and every KORPUS_* name the docs, recipes and
deployments mention is a real setting — a renamed setting cannot leave a recipe behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from korpus.core.settings import Settings

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
CHECK = Path(sys.executable).parent / "check-jsonschema"
COMPOSE_FILES = sorted((REPO / "infra").glob("*/compose.yaml"))
NOT_SETTINGS = {
    "KORPUS_CONFIG": "the settings file itself",
    "KORPUS_REPO": "deployments/prefect.yaml: the checkout a worker runs",
    "KORPUS_SOURCE_ROOT": "deployments/prefect.yaml: the nightly refresh's root parameter",
    "KORPUS_CRASH_AT": "tests: crash points of the kill suite",
    "KORPUS_TEST_AUDIO": "tests: another recording for the speech tests",
    "KORPUS_SCREENSHOTS": "tests: where the browser test writes its screenshots",
    "KORPUS_TOPOLOGY_NEIGHBOUR": "tests: 0 runs make test-topology without its CPU-bound neighbour",
    "KORPUS_REVIEWER": "korpus review: the default reviewer name",
    "KORPUS_NER_ALL_SENTENCES": "benchmarks: the registers' NER on every sentence, the comparison row of scale.py",
}


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECK), "--builtin-schema", "vendor.compose-spec", str(path)], capture_output=True, text=True, timeout=60
    )


def test_there_are_compose_recipes_for_each_service() -> None:
    assert {p.parent.name for p in COMPOSE_FILES} == {"vllm", "opensearch", "prefect"}


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.parent.name)
def test_compose_file_is_valid(path: Path) -> None:
    done = _validate(path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_compose_check_can_fail(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text("services:\n  web:\n    image: nginx\n    ports: 80\n    restart: sometimes-maybe\n")
    assert _validate(broken).returncode != 0


def test_every_korpus_name_in_docs_and_recipes_is_a_setting() -> None:
    settings = {f"KORPUS_{name.upper()}" for name in Settings.model_fields}
    texts = [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(p for p in (REPO / "infra").rglob("*.*") if "target" not in p.parts),  # not a build's output
        *(REPO / "deployments").glob("*.yaml"),
    ]
    unknown: dict[str, list[str]] = {}
    for path in texts:
        for name in re.findall(r"KORPUS_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")):
            family = any(s.startswith(name + "_") for s in settings)  # "KORPUS_TEXT_LAYER_*" in a table
            if name not in settings and name not in NOT_SETTINGS and not family:
                unknown.setdefault(name, []).append(path.name)
    assert unknown == {}
