"""Packaging metadata matches the code: Python floor, declared imports, the typed marker."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# import name -> distribution name, where they differ
DIST = {"msgspec": "msgspec", "yaml": "pyyaml"}


def _imports() -> set[str]:
    """Top-level modules imported anywhere in prof_engine (including inside functions)."""
    names: set[str] = set()
    for path in (REPO / "prof_engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def _declared() -> set[str]:
    project = PYPROJECT["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    return {re.split(r"[<>=!~;\[ ]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def test_every_third_party_import_is_declared():
    third_party = _imports() - set(sys.stdlib_module_names) - {"prof_engine", "__future__"}
    missing = sorted(m for m in third_party if DIST.get(m, m).lower().replace("_", "-") not in _declared())
    assert not missing, f"imported by prof_engine but not declared in pyproject.toml: {missing}"


def test_requires_python_covers_stdlib_used():
    # tomllib (imported by schema.py) is 3.11+
    assert "tomllib" in _imports()
    floor = re.search(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert floor and int(floor.group(1)) >= 11


def test_typed_marker_ships():
    # hatch puts every file under prof_engine/ in the wheel, so presence in the package is enough
    assert (REPO / "prof_engine" / "py.typed").is_file()


def test_optional_frames_say_what_to_install(monkeypatch):
    # polars and pandas are extras: without them `.pl()` / `.df()` say what to install, in one line
    import pyarrow as pa
    import pytest

    from prof_engine.engine.session import Result
    from prof_engine.errors import QueryError

    result = Result(pa.table({"x": [1, 2]}))
    monkeypatch.setitem(sys.modules, "polars", None)  # None in sys.modules: `import polars` fails
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(QueryError, match=r"^polars is not installed: pip install 'prof-engine\[polars\]'$"):
        result.pl()
    with pytest.raises(QueryError, match="^pandas is not installed"):
        result.df()


def test_the_engine_does_not_need_polars():
    # polars is not a dependency: no module of prof_engine imports it at module level
    for path in (REPO / "prof_engine").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in top if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(m.split(".")[0] == "polars" for m in names), path
    assert not any(s.startswith("polars") for s in PYPROJECT["project"]["dependencies"])
