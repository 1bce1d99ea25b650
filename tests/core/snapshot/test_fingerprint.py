from pathlib import Path

from sluice.core.snapshot.fingerprint import Fingerprint, fingerprint_models
from sluice.core.snapshot.naming import physical_table, view_name
from tests.core.helpers import BASIC, load


def prints(tmp_path: Path, **files: str) -> dict[str, Fingerprint]:
    project = load(tmp_path, {**BASIC, **{f"models/{k}.sql": v for k, v in files.items()}})
    return fingerprint_models(project.models, project.audits)


def test_comments_whitespace_and_keyword_case_change_nothing(tmp_path: Path) -> None:
    base = prints(tmp_path / "1")
    noisy = prints(
        tmp_path / "2",
        b="-- a comment\nmodel (NAME s.b, KIND full);\n\n  select   ID,\n  /* why */ NAME\nfrom S.A\n",
    )
    assert noisy["s.b"] == base["s.b"]
    assert noisy["s.c"] == base["s.c"]


def test_a_changed_where_changes_the_data_hash_and_flows_downstream(tmp_path: Path) -> None:
    base = prints(tmp_path / "1")
    changed = prints(
        tmp_path / "2", b="MODEL (name s.b, kind FULL);\nSELECT id, name FROM s.a WHERE id > 0"
    )
    assert changed["s.b"].data_hash != base["s.b"].data_hash
    assert changed["s.b"].version != base["s.b"].version
    assert changed["s.a"] == base["s.a"]
    # s.c's own query did not change, but its parent's data did (Merkle).
    assert changed["s.c"].data_hash == base["s.c"].data_hash
    assert changed["s.c"].parent_data_hash != base["s.c"].parent_data_hash
    assert changed["s.c"].version != base["s.c"].version


def test_a_changed_projection_changes_the_data_hash(tmp_path: Path) -> None:
    base = prints(tmp_path / "1")
    changed = prints(
        tmp_path / "2", b="MODEL (name s.b, kind FULL);\nSELECT id, UPPER(name) AS name FROM s.a"
    )
    assert changed["s.b"].data_hash != base["s.b"].data_hash


def test_metadata_changes_only_the_metadata_hash(tmp_path: Path) -> None:
    base = prints(tmp_path / "1")
    changed = prints(
        tmp_path / "2",
        b="MODEL (name s.b, kind FULL, owner bob, description 'x', tags [t], cron '@hourly');\nSELECT id, name FROM s.a",
    )
    assert changed["s.b"].metadata_hash != base["s.b"].metadata_hash
    assert changed["s.b"].data_hash == base["s.b"].data_hash
    assert changed["s.b"].version == base["s.b"].version
    assert changed["s.b"].identifier != base["s.b"].identifier
    assert changed["s.c"] == base["s.c"]


def test_hashes_are_sha256(tmp_path: Path) -> None:
    fp = prints(tmp_path)["s.a"]
    assert len(fp.data_hash) == 64 and len(fp.metadata_hash) == 64
    assert len(fp.version) == 12


def test_names_follow_the_architecture() -> None:
    assert physical_table("jaffle.orders", "abc123") == "sluice__jaffle.jaffle__orders__abc123"
    assert view_name("jaffle.orders", "prod") == "jaffle.orders"
    assert view_name("jaffle.orders", "pr_12") == "jaffle__pr_12.orders"
