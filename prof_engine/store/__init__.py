"""The run store: a run is a directory of `manifest.json` plus one hive-partitioned Parquet
dataset per canonical table (`<table>/rank=<r>/device=<d>/part-*.parquet`, the step a column)."""

from prof_engine.store.builder import RunBuilder, SourceFile, StagingSink
from prof_engine.store.live import LiveRun
from prof_engine.store.manifest import MANIFEST, read_manifest

__all__ = ["MANIFEST", "LiveRun", "RunBuilder", "SourceFile", "StagingSink", "read_manifest"]
