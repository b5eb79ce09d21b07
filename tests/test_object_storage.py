"""Runs on object storage (`s3://bucket/run`) read in place, against a local S3 server (moto):
the same rows and the same exported bytes as the run on local disk, by plain and grouped execution."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path
from prof_engine.engine.export import export_views
from prof_engine.errors import InputError, RunError

# a rank-scope view, a cluster-scope one, and data_quality's run-wide rows (each read costs requests
# to the test's server: ~0.1 s a file)
VIEWS = ["op_statistic", "cluster_step_trace", "data_quality"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A local S3 server with the 2-rank NCCL fixture's run at s3://runs/nccl; yields the local run."""
    moto_server = pytest.importorskip("moto.server", reason="moto is not installed (pip install 'prof-engine[dev]')")
    pytest.importorskip("fsspec", reason="fsspec is not installed (pip install 'prof-engine[storage]')")
    import pyarrow.fs as pafs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        local = prof_engine.import_trace(
            [fixture_path("kineto", "hta_sampled_2rank_nccl")], tmp_path_factory.mktemp("s3") / "run"
        )
        fs = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True)
        fs.create_dir("runs")
        pafs.copy_files(str(local), "runs/nccl", destination_filesystem=fs)
        yield local
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_a_run_on_s3_gives_the_local_runs_rows(s3):
    with prof_engine.open(s3) as local, prof_engine.open("s3://runs/nccl") as remote:
        assert str(remote.path) == "s3://runs/nccl" and remote.manifest["id"] == local.manifest["id"]
        for view in VIEWS:
            assert remote.view(view).rows() == local.view(view).rows(), view
    with prof_engine.open(s3, ranks=[1]) as local, prof_engine.open("s3://runs/nccl", ranks=[1]) as remote:
        assert remote.view("op_statistic").rows() == local.view("op_statistic").rows()
        assert remote.manifest["tables"] == local.manifest["tables"]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prof_engine", *args], cwd=cwd, capture_output=True, text=True)


def test_export_from_s3_by_groups_writes_the_local_runs_bytes(s3, tmp_path):
    """The CLI, its tasks each reading their rank's files on S3; and --safe SQL there."""
    with prof_engine.open(s3) as local:
        expected = {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in export_views(local, tmp_path / "local")}
    proc = _cli(tmp_path, "export", "s3://runs/nccl", "-o", "grouped", "--executor", "local", "--ranks-per-task", "1")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in (tmp_path / "grouped").iterdir()} == expected
    safe = _cli(tmp_path, "query", "s3://runs/nccl", "select count(*) from slices", "--safe", "-f", "csv")
    assert safe.returncode == 0 and safe.stdout.split() == ['"count_star()"', "9485"], safe.stderr


def test_what_is_not_there_is_one_line(s3, tmp_path):
    with pytest.raises(RunError, match=r"^s3://runs/none: no prof-engine run there \(no manifest.json\)$"):
        prof_engine.open("s3://runs/none")
    with pytest.raises(InputError, match="written to a local or shared directory"):
        prof_engine.import_trace([fixture_path("kineto", "hta_sampled_2rank_nccl")], "s3://runs/new")
    proc = _cli(tmp_path, "show", "s3://runs/none")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "Error: s3://runs/none: no prof-engine run there (no manifest.json)"
    ]


def test_compare_reads_runs_on_s3_and_upgrade_refuses_them(s3, tmp_path):
    """compare reads a run on S3 in place (here against its own local copy: the same numbers);
    upgrade, which rewrites a run, says in one line to upgrade a local copy."""
    remote = prof_engine.compare(s3, "s3://runs/nccl", levels=["step", "op_type"]).arrow().drop(["Run"])
    local = prof_engine.compare(s3, s3, levels=["step", "op_type"]).arrow().drop(["Run"])
    assert remote.num_rows > 3 and remote.to_pylist() == local.to_pylist()
    proc = _cli(tmp_path, "compare", str(s3), "s3://runs/nccl", "-l", "step", "-f", "csv")
    assert proc.returncode == 0 and "Step Time" in proc.stdout, proc.stderr
    proc = _cli(tmp_path, "upgrade", "s3://runs/nccl")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "Error: s3://runs/nccl: runs on object storage are read in place, not rewritten; "
        "upgrade a local copy (and upload that)"
    ]
