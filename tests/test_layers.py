"""Dependencies point one way, sources → store → engine → faces (DESIGN.md's house).

The collector once imported `prof_engine.cli` for the printer `Profiler.analyse()` uses: the CLI is
a face nothing else builds on, and printing (`prof_engine.render`, rich) belongs to the faces. The
static checks read every `import` in the source, those inside functions too, which an import at
run time would only meet when that function runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import prof_engine

PACKAGE = Path(prof_engine.__file__).parent
# The modules besides the CLI's own that may import it: the console entry point, and the
# generator of docs/cli.md (it reads the commands' help).
CLI_USERS = {"prof_engine._entry", "prof_engine.docs"}
# Layers below the faces: they return data and never print (the library never imports rich).
BELOW_THE_FACES = ("prof_engine.importers", "prof_engine.store", "prof_engine.engine", "prof_engine._native")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, package: str) -> set[str]:
    """Every module `source` (a module of `package`) imports, anywhere in it; `from a import b`
    counts `a` and `a.b` (b may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def _sources() -> dict[str, set[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found[module] = _imports(path.read_text(encoding="utf-8"), package)
    return found


def _within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_import_reader_sees_what_the_old_collector_imported():
    """An import inside a function, in each spelling, relative ones resolved."""
    source = "def analyse():\n    from prof_engine.cli import render\n    import prof_engine.cli.render\n"
    assert {"prof_engine.cli", "prof_engine.cli.render"} <= _imports(source, "prof_engine.collect")
    assert "prof_engine.cli.render" in _imports("from ..cli import render", "prof_engine.collect")
    assert "prof_engine.render" in _imports("from .. import render", "prof_engine.collect")


def test_only_the_faces_import_the_cli():
    wrong = {
        module: sorted(n for n in names if _within(n, "prof_engine.cli"))
        for module, names in _sources().items()
        if not _within(module, "prof_engine.cli") and module not in CLI_USERS
    }
    assert {m: n for m, n in wrong.items() if n} == {}


def test_nothing_below_the_faces_prints():
    wrong = {
        module: sorted(n for n in names if _within(n, "prof_engine.render", "prof_engine.cli", "rich", "typer"))
        for module, names in _sources().items()
        if _within(module, *BELOW_THE_FACES)
    }
    assert {m: n for m, n in wrong.items() if n} == {}


def test_importing_the_collector_loads_no_face():
    """Every module of prof_engine.collect, imported in a fresh interpreter, loads neither the CLI
    nor the printer (writer_process is left out: it is the writer's `-m` entry, its import runs it)."""
    code = """
import importlib, pkgutil, sys
import prof_engine.collect as collect
for m in pkgutil.iter_modules(collect.__path__, "prof_engine.collect."):
    if m.name != "prof_engine.collect.writer_process":
        importlib.import_module(m.name)
faces = ("prof_engine.cli", "prof_engine.render", "rich", "typer")
print(sorted(n for n in sys.modules if n in faces or n.startswith(tuple(f + "." for f in faces))))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["[]"]
