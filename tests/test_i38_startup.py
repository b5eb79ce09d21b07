"""Start-up (issue 38, item 15): `--help` and usage errors load no heavy library.

`prof-engine --help` took 1-3 s because `cli.collect` (through the collector's launch, the run's
manifest) and `cli.compare` (through `engine.compare`) loaded pyarrow, numpy and DuckDB when the
CLI's modules loaded. The oracle is `sys.modules` of a fresh interpreter that runs the console entry
point in-process (robust, unlike a timing): a subprocess, since the test is about a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("duckdb", "pyarrow", "polars", "numpy", "pandas")

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
    commands = [["--help"], ["show"], ["compare", "--help"], ["collect", "--help"], ["compare"], ["import", "--help"]]
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
