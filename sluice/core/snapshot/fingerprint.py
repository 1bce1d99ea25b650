"""Fingerprints: what a model computes (data) and what only describes it (metadata).

All hashes are sha256 hex. The data hash covers the canonical query and every property
that changes the rows a model produces; the metadata hash covers the rest. A model's
*data fingerprint* folds in its parents' data fingerprints (a Merkle chain), so a change
upstream is visible downstream without comparing queries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sluice.core.model.definition import Audit, Model

VERSION_LENGTH = 12


def _sha(parts: Iterable[Any]) -> str:
    payload = json.dumps(list(parts), separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    """The hashes that identify one model at one point in its history."""

    data_hash: str
    metadata_hash: str
    parent_data_hash: str

    @cached_property
    def data(self) -> str:
        """The data fingerprint: own data plus all ancestors' data (hashed once, as are
        the identifier and version: a plan reads them several times per model)."""
        return _sha([self.data_hash, self.parent_data_hash])

    @cached_property
    def identifier(self) -> str:
        """Changes with anything: data, metadata or parents."""
        return _sha([self.data_hash, self.metadata_hash, self.parent_data_hash])

    @cached_property
    def version(self) -> str:
        """The default physical version: stable across metadata-only changes."""
        return self.data[:VERSION_LENGTH]

    def to_dict(self) -> dict[str, str]:
        return {
            "data_hash": self.data_hash,
            "metadata_hash": self.metadata_hash,
            "parent_data_hash": self.parent_data_hash,
        }


def data_inputs(model: Model) -> list[Any]:
    """Everything about a model that changes the rows it produces."""
    kind = model.kind
    return [
        model.name,
        kind.name.value,
        kind.time_column,
        kind.time_column_format,
        list(kind.unique_key),
        [list(c) for c in kind.csv_settings],
        model.query_sql,
        [list(c) for c in model.columns],
        list(model.partitioned_by),
        model.seed_hash,
        model.stamp,
        *_present(
            {
                # As in SQLMesh: these change the physical table (or what fills it).
                "clustered_by": list(model.clustered_by),
                "table_format": model.table_format,
                "storage_format": model.storage_format,
                "physical_properties": [list(p) for p in model.physical_properties],
                "gateway": model.gateway,
                "optimize_query": model.optimize_query,
                "python": model.python_code,
                "python_variables": [list(v) for v in model.python_variables],
                "scd": _scd_data(model),
                # A custom materialization (and the built-in kind it is mapped to).
                "materialization": model.kind.materialization,
                # Pre- and post-statements run in its build (those refused too: an edit
                # of one is a change, reviewed and approved).
                "pre_statements": list(model.pre_statements),
                "post_statements": list(model.post_statements),
            }
        ),
    ]


def _scd_data(model: Model) -> dict[str, Any] | None:
    """What an SCD type 2 kind's settings change in its table (None for other kinds)."""
    scd = model.kind.scd
    if scd is None:
        return None
    return {
        "updated_at_name": scd.updated_at_name,
        "columns": list(scd.columns),
        "valid_from_name": scd.valid_from_name,
        "valid_to_name": scd.valid_to_name,
        "invalidate_hard_deletes": scd.invalidate_hard_deletes,
        "time_data_type": scd.time_data_type,
        "updated_at_as_valid_from": scd.updated_at_as_valid_from,
        "execution_time_as_valid_from": scd.execution_time_as_valid_from,
    }


def _present(values: dict[str, Any]) -> list[dict[str, Any]]:
    """``values`` without its unset entries, as one trailing item, or nothing when all are
    unset: models that use none of these properties keep the hashes they had before
    Sluice read them (and ``data_inputs()[6]`` stays the query)."""
    given = {k: v for k, v in values.items() if v is not None and v != []}
    return [given] if given else []


def _audit_definition(audit: Audit) -> list[Any]:
    """What of a project audit's file decides what it does to a model's build: its query,
    and (when not the defaults, so that audits without them keep their hashes) whether it
    blocks and its parameters' default values (red team, approval round: pushing
    `blocking false` after approval changed no key)."""
    own = _present({"blocking": None if audit.blocking else False,
                    "defaults": [list(d) for d in audit.defaults]})  # fmt: skip
    return [audit.query_sql, *own]


def metadata_inputs(model: Model, audits: Mapping[str, Audit]) -> list[Any]:
    """Everything about a model that describes or schedules it without changing its rows."""
    used = [
        [
            call.name,
            [list(a) for a in call.args],
            call.blocking,
            *_audit_definition(audits[call.name]),
        ]
        if call.name in audits
        else [call.name, [list(a) for a in call.args], call.blocking]
        for call in model.audits
    ]
    return [
        model.cron,
        # A relative start ("1 week ago") moves every day; what was written does not.
        model.start_relative if model.start_relative is not None else model.start,
        model.end,
        list(model.grain),
        model.owner,
        list(model.tags),
        model.description,
        [list(c) for c in model.column_descriptions],
        used,
        model.forward_only,
        model.on_destructive_change,
        model.kind.batch_size,
        model.kind.lookback,
        model.dialect,
        *_present(
            {
                # As in SQLMesh: these describe or schedule the model, its rows stay.
                "allow_partials": model.allow_partials or None,
                "session_properties": [list(p) for p in model.session_properties],
                "virtual_properties": [list(p) for p in model.virtual_properties],
                "references": list(model.column_references),
                "signals": list(model.signals),
                # SCD type 2: whether a restatement may recompute (and lose) the history.
                "disable_restatement": (
                    model.kind.scd.disable_restatement if model.kind.scd else None
                ),
            }
        ),
    ]


def fingerprint_models(
    models: Mapping[str, Model], audits: Mapping[str, Audit]
) -> dict[str, Fingerprint]:
    """Fingerprints of all models; ``models`` must be in topological order."""
    result: dict[str, Fingerprint] = {}
    for name, model in models.items():
        parents = sorted((dep, result[dep].data) for dep in model.depends_on)
        result[name] = Fingerprint(
            data_hash=_sha(data_inputs(model)),
            metadata_hash=_sha(metadata_inputs(model, audits)),
            parent_data_hash=_sha(parents),
        )
    return result
