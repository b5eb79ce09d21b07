"""Start-up (issue 38, item 15): `--help` and usage errors load no heavy library.

`prof-engine --help` took 1-3 s because `cli.collect` (through the collector's launch, the run's
manifest) and `cli.compare` (through `engine.compare`) loaded pyarrow, numpy and DuckDB when the
CLI's modules loaded. Then typer's own extras cost 3-5x `import typer`: rich's help and error
formatting (`typer.rich_utils`: markdown, pygments) and pydantic (a validator typer builds for each
parameter it processes, its help flag and a missing argument among them). The oracle is
`sys.modules` of a fresh interpreter that runs the console entry point in-process (robust, unlike a
timing): a subprocess, since the test is about a fresh process. benchmarks/startup.py times them.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("duckdb", "pyarrow", "polars", "numpy", "pandas", "pydantic", "typer.rich_utils")

# Each command line in turn, in one interpreter: after each, the heavy modules loaded so far.
_SCRIPT = """
import json, sys
from prof_engine._entry import main
seen = {}
for argv in json.loads(sys.argv[1]):
    sys.argv = ["prof-engine", *argv]
    try:
        main()
    except SystemExit as e:
        code = e.code
    else:
        code = 0
    seen[" ".join(argv)] = [code, sorted(m for m in HEAVY if m in sys.modules)]
print(json.dumps(seen))
""".replace("HEAVY", repr(HEAVY))


def test_help_and_usage_errors_load_no_heavy_library() -> None:
    commands = [
        ["--help"],
        ["show"],
        ["compare", "--help"],
        ["collect", "--help"],
        ["compare"],
        ["import", "--help"],
        ["import"],
        ["collect"],
        ["views", "--help"],
        ["show", "run", "--bogus"],
        ["bogus"],
    ]
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(commands)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for argv in commands:
        code, loaded = seen[" ".join(argv)]
        assert code in (0, 2), (argv, code)  # help: 0; a usage error: 2
        assert loaded == [], f"`prof-engine {' '.join(argv)}` loaded {loaded}"


def test_compare_help_names_the_engines_levels() -> None:
    # the CLI spells the levels out so that --help need not load the engine: they must stay equal
    from prof_engine.cli.compare import LEVEL_HELP
    from prof_engine.engine.compare import LEVELS

    assert LEVEL_HELP == ", ".join(LEVELS)


def _invoke(argv: list[str]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from prof_engine.cli import app

    done = CliRunner().invoke(app, argv, env={"COLUMNS": "100"})
    return done.exit_code, done.output


def test_a_command_given_nothing_names_what_click_names_when_given_something() -> None:
    # given no arguments, the CLI names the missing one before typer processes any parameter
    # (cli/_command.py); given an option, typer's own path does: the same line, the same exit
    for command, option, missing in (
        ("show", ["--wide"], "run"),
        ("compare", ["--wide"], "runs"),
        ("import", ["--force"], "sources"),
        ("collect", ["--force"], "-- PROGRAM..."),
    ):
        fast, slow = _invoke([command]), _invoke([command, *option])
        assert fast == slow, command  # usage, hint and error line alike
        assert fast[0] == 2 and f"Error: Missing argument '{missing}'." in fast[1], (command, fast)


def test_help_is_plain_text_with_its_examples_on_lines_of_their_own() -> None:
    # plain click help (no rich): rich markup would print as is, and click rewraps paragraphs but `\b` ones
    import typer.main

    from prof_engine.cli import app

    code, top = _invoke(["--help"])
    assert code == 0
    names = list(typer.main.get_group(app).commands)
    assert len(names) >= 11, names
    assert all(f"  {name} " in top for name in names), top
    for name in names:
        code, text = _invoke([name, "--help"])
        assert code == 0 and "[bold]" not in text and "[/" not in text and "\\[" not in text, (name, text)
        examples = [line.strip() for line in text.splitlines() if line.strip().startswith("prof-engine ")]
        if name in ("import", "export", "query", "report", "check", "upgrade", "collect", "compare"):
            assert examples and all(line.startswith(f"prof-engine {name} ") for line in examples), (name, text)


def test_opening_a_run_loads_no_arrow_compute() -> None:
    # `show` opens a run (engine), prints through engine.tables and reads through store.partitions:
    # pyarrow.compute and pyarrow.csv (~0.1 s) load only where CSV is written or a trace imported
    modules = "prof_engine.engine, prof_engine.engine.tables, prof_engine.store.partitions"
    code = f"import json, sys, {modules}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert {"pyarrow", "duckdb", "prof_engine.store.partitions", "prof_engine.engine.tables"} <= loaded
    assert not loaded & {"pyarrow.compute", "pyarrow.csv", "pandas"}
