"""The `prof-engine` console script: the CLI, loaded under a Ctrl-C guard (an interrupt while its
modules load exits 130 without a traceback, as one while it runs does)."""

from __future__ import annotations

import sys


def tune(argv: list[str]) -> None:
    """Tune this process, the CLI's own, for the command in `argv` (see `_process.tune_owned_process`);
    before the CLI's modules load pyarrow. Under an address-space limit a 30 MB trace then imports
    under 600 MB, and under less the import fails with one line instead of an abort."""
    from prof_engine._process import tune_owned_process

    imports = argv[:1] == ["import"]  # no option precedes the command but --help and --version
    tune_owned_process(converts=imports, finalizes=imports)


def main() -> None:
    try:
        tune(sys.argv[1:])
        from prof_engine.cli import main as cli_main
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - only out of address space is answered here; the rest re-raise
        from prof_engine._process import memory_cause, out_of_memory

        if not out_of_memory(e):
            raise
        print(
            f"Error: out of memory while starting ({memory_cause(e)}); raise the address-space limit (`ulimit -v`)",
            file=sys.stderr,
        )
        sys.exit(1)
    try:
        cli_main()
    except SystemError as e:  # C code that failed to allocate without MemoryError, past the CLI's own handler
        from prof_engine._process import address_space_hint

        if (hint := address_space_hint()) is None:
            raise
        print(f"Error: out of memory ({e}); {hint}", file=sys.stderr)
        sys.exit(1)
