"""The run store: a run is a directory of `manifest.json` plus one hive-partitioned Parquet
dataset per canonical table (`<table>/rank=<r>/device=<d>/part-*.parquet`, the step a column).

Its modules are imported by name (`prof_engine.store.builder`, `.manifest`, `.live`): reading a
manifest, as every CLI command does, then never loads the builder's numpy and Arrow compute."""
