"""Entry point of the collector's writer process: `python -m prof_engine.collect.writer_process`.

A module of its own, imported by nothing, so that `-m` runs `writer.main` with the hand-off
classes under their one importable name (pickles name `prof_engine.collect.writer.StepDone`).
"""

from prof_engine._process import tune_owned_process

tune_owned_process(converts=True)  # before the writer's modules load pyarrow; it converts batch after batch

from prof_engine.collect.writer import main  # noqa: E402 - after the tuning, on purpose

main()
