"""Issue 39 item 3: one importer protocol. Every format is a `formats.Format` its module exposes;
`registry.FORMATS` lists them in priority order and is the one place the import asks: a format
registered there, and nowhere else, imports through the CLI, and a folder asks each format once."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine.cli import app
from prof_engine.errors import InputError
from prof_engine.importers import expand_sources, kineto, registry
from prof_engine.importers.formats import Format
from prof_engine.store.builder import SourceFile

MAGIC = b"TOY\n"  # a toy file: this line, then a Kineto trace


def _toy_file(path: Path, index: int, sink, progress) -> SourceFile:
    trace = path.with_name(path.name + ".json.tmp")
    trace.write_bytes(path.read_bytes()[len(MAGIC) :])
    try:
        return dataclasses.replace(kineto.convert(trace, index, sink, progress), path=str(path), format="toy")
    finally:
        trace.unlink()


def _toy_run(run_dir: Path, index: int, sink, progress) -> SourceFile:
    info = kineto.convert(run_dir / "trace.json", index, sink, progress)
    return dataclasses.replace(info, path=str(run_dir), format="toy")


# a folder format (`*.toyrun/` directories holding a trace.json) and a file format (MAGIC files)
TOY_RUN = Format(
    "toy_run",
    "kineto",
    _toy_run,
    units=lambda folder: sorted(p for p in folder.rglob("*.toyrun") if p.is_dir()),
)
TOY_FILE = Format(
    "toy_file", "kineto", _toy_file, files=re.compile(r".*\.toy"), sniff=lambda path, head: head.startswith(MAGIC)
)


def _trace(path: Path, rank: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_trace(
        path,
        [x("aten::mm", 1000.0 + rank, 5), x("aten::add", 1010.0, 3 + rank)],
        distributedInfo={"rank": rank, "world_size": 2},
    )


def _toy_folder(root: Path) -> Path:
    src = root / "job"
    _trace(src / "rank0.toyrun" / "trace.json", 0)
    (src / "rank1.toy").write_bytes(MAGIC + _trace(root / "rank1.json", 1).read_bytes())
    return src


def _cli(*args: str):
    """The CLI in this process, where the patched registry is (`--jobs 1`: no worker process)."""
    return CliRunner().invoke(app, [*args, "--jobs", "1"], env={"COLUMNS": "200"})


def test_a_format_registered_in_the_registry_alone_imports_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "FORMATS", (TOY_RUN, *registry.FORMATS, TOY_FILE))
    src = _toy_folder(tmp_path)
    res = _cli("import", str(src), "-o", str(tmp_path / "run"))
    assert res.exit_code == 0, res.output
    _trace(tmp_path / "ref" / "rank0.json", 0)
    shutil.copy(tmp_path / "rank1.json", tmp_path / "ref" / "rank1.json")
    ref = prof_engine.import_trace([tmp_path / "ref"], tmp_path / "ref_run", jobs=1)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [(Path(s["path"]).name, s["format"], s["rank"]) for s in manifest["sources"]] == [
        ("rank0.toyrun", "toy", 0),
        ("rank1.toy", "toy", 1),
    ]
    assert manifest["left_out"] == []  # the toyrun's trace.json is its unit's, not a loose trace
    with prof_engine.open(tmp_path / "run") as run, prof_engine.open(ref) as want:
        query = "SELECT rank, name, ts, dur FROM slices ORDER BY ALL"
        assert run.sql(query).rows() == want.sql(query).rows() != []


def test_without_its_registry_line_the_format_is_unknown(tmp_path):
    src = _toy_folder(tmp_path)
    units, left = expand_sources([src])
    assert [(u.path.name, u.format) for u in units] == [("trace.json", "chrome")]
    assert [(p.path.name, p.reason) for p in left] == [("rank1.toy", "not a trace: a format not read")]
    with pytest.raises(InputError, match="unknown file type"):
        expand_sources([src / "rank1.toy"])


def test_the_registry_lists_each_format_once_with_a_way_to_find_it():
    names = [f.name for f in registry.FORMATS]
    assert len(names) == len(set(names))
    assert names.index("ascend") < names.index("msprof_output") < names.index("msprof")  # a rank dir holds PROF_*
    assert names.index("ascend_trace") < names.index("chrome")  # an Ascend trace is a Chrome trace too
    for fmt in registry.FORMATS:
        assert fmt.family in ("kineto", "ascend")
        assert fmt.units is not None or fmt.files is not None, fmt.name
        assert registry.get(fmt.name) is fmt


def test_a_folder_asks_each_format_once_and_stops_at_the_first_layout_found(monkeypatch):
    """The legacy msprof fixture: the Ascend rank directories' format finds none, the PROF_* layout
    (merged output, then legacy device directories) finds its units; no format after it is asked."""
    asked: list[str] = []

    def counted(fmt: Format) -> Format:
        if fmt.units is None:
            return fmt
        units = fmt.units
        return dataclasses.replace(fmt, units=lambda p: asked.append(fmt.name) or units(p))

    monkeypatch.setattr(registry, "FORMATS", tuple(map(counted, registry.FORMATS)))
    units, _ = expand_sources([fixture_path("ascend", "msprof_cann7_2device_timeline_legacy")])
    assert [u.format for u in units] == ["msprof", "msprof"]
    assert asked == ["ascend", "msprof_output", "msprof"]


def _legacy_device(prof: Path, n: int) -> None:
    (prof / f"device_{n}" / "timeline").mkdir(parents=True)
    (prof / f"device_{n}" / "timeline" / f"msprof_{n}_1_1.json").write_text("[]", encoding="utf-8")


def test_one_prof_layout_holds_merged_output_and_legacy_device_directories(tmp_path):
    """msprof's merged output (CANN >= 8) and legacy device timelines beside it are one layout:
    the merged PROF_* directories first, then the legacy device directories outside them."""
    (tmp_path / "PROF_b" / "mindstudio_profiler_output").mkdir(parents=True)
    _legacy_device(tmp_path / "PROF_b", 0)  # inside a merged PROF_*: part of that unit
    _legacy_device(tmp_path / "PROF_a", 1)
    units, _ = expand_sources([tmp_path])
    assert [(str(u.path.relative_to(tmp_path)), u.format) for u in units] == [
        ("PROF_b", "msprof_output"),
        ("PROF_a/device_1", "msprof"),
    ]


def test_a_prof_folder_with_no_data_is_refused_by_its_layout(tmp_path):
    """A raw-only PROF_* folder is msprof's, refused in msprof's words, even where a later format
    (MindSpore's CPU ops) would find units in it."""
    (tmp_path / "PROF_1" / "device_0" / "data").mkdir(parents=True)
    (tmp_path / "cpu_op_execute_timestamp_0.txt").write_text("Default/MatMul-op0;MatMul;1,2\n", encoding="utf-8")
    with pytest.raises(InputError, match="a CANN msprof PROF_\\* directory with neither per-device timelines"):
        expand_sources([tmp_path])
