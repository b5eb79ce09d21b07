"""The loader of schemas/*.toml: one layout for every stored table, and no key it does not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from prof_engine import _resources, schema


def test_every_stored_table_has_todays_layout():
    """Directories per rank and device, the step a column (schema 1.0's step directories are
    only read, by `prof-engine upgrade`)."""
    assert schema.PARTITION_KEYS == ("device",)
    assert not any(hasattr(t, "partition_keys") for t in schema.stored_tables().values())  # one layout for all
    assert all({"device", "step"} <= set(t.column_names) for t in schema.stored_tables().values())


def test_a_key_the_loader_does_not_read_is_refused(tmp_path, monkeypatch):
    """`partition_by` chose the old step directories; a schema file that still says it (or any key
    misspelt) is an error, not a setting silently ignored."""
    schemas = tmp_path / "schemas"
    shutil.copytree(_resources.data_dir("schemas"), schemas)
    marks = schemas / "marks.toml"
    marks.write_text(
        marks.read_text().replace('name = "marks"', 'name = "marks"\npartition_by = ["device", "step"]', 1)
    )
    monkeypatch.setattr(schema, "data_dir", lambda name: Path(tmp_path / name))
    with pytest.raises(ValueError, match=r"marks\.toml: unknown keys \['partition_by'\]"):
        schema.tables.__wrapped__()
