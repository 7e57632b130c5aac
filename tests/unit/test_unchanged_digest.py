"""#47: the quick unchanged refresh trusts the tree's digest (tasks/unchanged.py) exactly where discovery trusts a
file's stat. Property: after any sequence of changes to a tree, an unchanged digest means discovery sees every
source with the same id, kind, size, times, inode and refusal, and the manifest unchanged — so the refresh's plan,
computed from that view and an unchanged catalog, is what it was."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.receive import MANIFEST_NAME, discover_sources
from tasks.unchanged import tree_digest

pytestmark = pytest.mark.unit

NAMES = ["a.txt", "b.pdf", "папка/c.txt", "папка/d.docx", ".скрытая/e.txt", "f.txt", MANIFEST_NAME]
TEXTS = ["письмо", "другое", "письмо ", "", "приказ о ремонте кровли"]

operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(TEXTS)),
    st.tuples(st.just("same-size"), st.sampled_from(NAMES), st.just("")),  # rewritten, old mtime put back
    st.tuples(st.just("touch-back"), st.sampled_from(NAMES), st.just("")),  # an old mtime set
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.sampled_from(["0", "644"])),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("link"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("replace"), st.sampled_from(NAMES), st.just("")),  # a new inode, same bytes
    st.tuples(st.just("rmdir"), st.just("папка"), st.just("")),
)


def _apply(root: Path, op: str, name: str, arg: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    exists = path.is_file() and not path.is_symlink()
    if op == "write":
        path.unlink(missing_ok=True) if path.is_symlink() else None
        path.write_text(arg, encoding="utf-8")
    elif op == "same-size" and exists:
        before = path.stat()
        data = path.read_bytes()
        path.write_bytes(data[::-1])
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif op == "touch-back" and exists:
        os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    elif op == "chmod" and exists:
        path.chmod(int(arg, 8))
    elif op == "remove" and (exists or path.is_symlink()):
        path.unlink()
    elif op == "rename" and exists and not (root / arg).is_dir():
        (root / arg).parent.mkdir(parents=True, exist_ok=True)
        path.rename(root / arg)
    elif op == "link" and not path.exists() and not path.is_symlink() and name != arg:
        path.symlink_to(root / arg)
    elif op == "replace" and exists:
        fresh = path.with_name(path.name + ".new")
        shutil.copy2(path, fresh)
        fresh.rename(path)
    elif op == "rmdir":
        shutil.rmtree(path, ignore_errors=True)


def _view(root: Path) -> tuple:
    """What discovery compares for each source (its stat), what it refuses, and the manifest's stat."""
    try:
        sources = tuple(
            (s.source_id, s.kind, s.size, s.mtime_ns, s.ctime_ns, s.inode, s.unreadable, s.outside_root)
            for s in discover_sources(root, None, {})  # every readable file hashed: its stat is what is compared
        )
    except ValueError as exc:  # a manifest that is not one: the refresh stops with it, every time alike
        sources = ("manifest refused", str(exc))
    manifest = root / MANIFEST_NAME
    try:
        stat = manifest.stat()
        manifest_view = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    except OSError:
        manifest_view = None
    return sources, manifest_view


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=12))
def test_an_unchanged_digest_means_discovery_sees_the_same_tree(ops: list[tuple[str, str, str]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="korpus-digest-"))
    try:
        (root / "a.txt").write_text("письмо", encoding="utf-8")
        (root / MANIFEST_NAME).write_text("defaults:\n  access: public\n", encoding="utf-8")
        before_digest, before_view = tree_digest(root), _view(root)
        for op in ops:
            _apply(root, *op)
            digest, view = tree_digest(root), _view(root)
            if digest == before_digest:
                assert view == before_view, op
            before_digest, before_view = digest, view
    finally:
        for path in root.rglob("*"):
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(root)


def test_the_digest_counts_what_discovery_sees_and_skips_hidden_names(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("письмо", encoding="utf-8")
    (tmp_path / "папка").mkdir()
    (tmp_path / "папка" / "b.txt").write_text("приказ", encoding="utf-8")
    entries, digest = tree_digest(tmp_path)
    assert entries == 2
    (tmp_path / ".DS_Store").write_text("мусор", encoding="utf-8")
    (tmp_path / "папка" / ".~lock.b.txt#").write_text("замок", encoding="utf-8")
    assert tree_digest(tmp_path) == (2, digest)  # discovery never reads them either
    (tmp_path / "папка" / "b.txt").write_text("приказ о ремонте", encoding="utf-8")
    assert tree_digest(tmp_path)[1] != digest
