"""A run folder an earlier release wrote keeps working: its run files' stored column names (``variant``, the
block assembly, now ``mode`` as ``core.names`` calls it) are read under the table's names, so the folder is
resumed (every run skipped, its file untouched) and judged exactly as a fresh one."""

from __future__ import annotations

import hashlib
import json

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.store import collect_table
from rankcollapse.pipeline import ReproduceConfig, reproduce


def _as_an_earlier_release(out) -> list:
    """Rewrite every run file of ``out`` with the old column ``variant`` for ``mode``, its record's size and
    checksum with it (what the earlier release wrote); the paths of the rewritten files."""
    rewritten = []
    for record_path in sorted((out / "runs").glob("*/*.json")):
        record = json.loads(record_path.read_text())
        if not record.get("n_rows"):
            continue
        csv_path = record_path.with_suffix(".csv")
        header, _, body = csv_path.read_bytes().partition(b"\n")
        columns = header.decode().split(",")
        if "mode" not in columns:
            continue
        data = ",".join("variant" if c == "mode" else c for c in columns).encode() + b"\n" + body
        csv_path.write_bytes(data)
        record.update(csv_bytes=len(data), csv_sha256=hashlib.sha256(data).hexdigest())
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        rewritten.append(csv_path)
    return rewritten


def test_a_folder_whose_run_files_say_variant_is_resumed_not_recomputed_and_judged_the_same(tmp_path):
    out = tmp_path / "out"
    config = ReproduceConfig(out, profile="tiny", only=["theorem1"], workers=1, progress=False)
    first = reproduce(config)
    assert first.sweep.failed == 0 and first.sweep.finished == first.sweep.total > 0
    claims_csv, claims_json = (out / "claims.csv").read_bytes(), (out / "claims.json").read_bytes()
    old = _as_an_earlier_release(out)
    assert old, "the curve rows name the block assembly by the table's column, mode"
    stamps = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in old}

    again = reproduce(config)

    assert again.sweep.finished == 0 and again.sweep.skipped == again.sweep.total == first.sweep.total
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in old} == stamps  # not recomputed
    assert (out / "claims.csv").read_bytes() == claims_csv
    assert (out / "claims.json").read_bytes() == claims_json
    table = collect_table(out)
    assert "mode" in table.columns and "variant" not in table.columns
    assert set(table.loc[table["kind"] == "curve", "mode"]) == {"attn"}


def test_a_run_file_with_both_spellings_is_not_trusted(tmp_path):
    from rankcollapse.experiments.engine.store import _parse

    assert _parse(b"variant,mask\nattn,causal\n").columns.tolist() == ["mode", "mask"]
    assert _parse(b"variant,mode\nattn,attn\n") is None  # damaged: rerun, never a silent choice
    with pytest.raises(RankCollapseError, match="give mode or its stored name variant, not both"):
        from rankcollapse.core.names import stored_names

        stored_names(["variant", "mode"], ("mode",))
