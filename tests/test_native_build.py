"""The native helpers as the build makes them: the extension module `prof_engine._native._ext`
checks its arguments (a wrong one is an exception, never a crash), `pip wheel .` gives a platform
wheel that carries it with the package's data, and a build without a C compiler finishes and says
so in one line (the two builds take ~10 s: they compile the extension)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from prof_engine import _native

REPO = Path(__file__).resolve().parents[1]
NO_COMPILER = (
    "prof-engine: no C compiler (cc/gcc/clang); installing without the native helpers: trace imports run ~3x slower"
)


@pytest.fixture
def ext():
    if _native.load() is None:
        pytest.skip("the native helpers are not built here")
    from prof_engine._native import _ext

    return _ext


def _i64(*values: int) -> bytes:
    return pa.array(values, pa.int64()).buffers()[1].to_pybytes()


def _lanes_out(room: int) -> list[bytearray]:
    return [bytearray(8 * room), bytearray(room), bytearray(8 * room), bytearray(8 * room)]


def test_the_extension_is_a_built_module(ext):
    assert Path(ext.__file__).suffix in (".so", ".pyd")
    assert _native.load() is ext


def test_lanes_through_the_extension(ext):
    state = ext.lanes_new()
    out = _lanes_out(6 * 2 + 6)
    assert ext.lanes(state, 2, _i64(1, 1), bytes([0, 1]), _i64(0, 5), _i64(10, 30), *out) == 0
    out = _lanes_out(6)
    assert ext.lanes_finish(state, *out) == 3  # computing [0, 10), communication [5, 30), not overlapped [10, 30)


@pytest.mark.parametrize(
    "call, error",
    [
        # a buffer that is not one, and an output that is read-only
        (lambda x: x.lanes(x.lanes_new(), 1, 1, b"\0", _i64(0), _i64(1), *_lanes_out(12)), TypeError),
        (
            lambda x: x.lanes(x.lanes_new(), 1, _i64(1), b"\0", _i64(0), _i64(1), bytes(96), *_lanes_out(12)[1:]),
            TypeError,
        ),
        # fewer bytes than the counts need: inputs and outputs
        (lambda x: x.lanes(x.lanes_new(), 2, _i64(1), b"\0\0", _i64(0, 1), _i64(1, 2), *_lanes_out(18)), ValueError),
        (lambda x: x.lanes(x.lanes_new(), 1, _i64(1), b"\0", _i64(0), _i64(1), *_lanes_out(11)), ValueError),
        (lambda x: x.lanes(x.lanes_new(), -1, b"", b"", b"", b"", *_lanes_out(0)), ValueError),
        # a state of another kind, or none
        (lambda x: x.lanes(x.host_new(0, b"", b"", b"", b"", b""), 0, b"", b"", b"", b"", *_lanes_out(6)), TypeError),
        (lambda x: x.step_at(None, 0, b"", b"", bytearray(), bytearray()), TypeError),
        (lambda x: x.host_new(2, _i64(0), _i64(0, 1), _i64(1, 2), _i64(1, 2), b"\1\1"), ValueError),
        (lambda x: x.lanes(x.lanes_new(), "1", _i64(1), b"\0", _i64(0), _i64(1), *_lanes_out(12)), TypeError),
        # rows out of order
        (lambda x: x.lanes(x.lanes_new(), 2, _i64(2, 1), b"\0\0", _i64(0, 0), _i64(1, 1), *_lanes_out(18)), ValueError),
        # spans outside the text, a row outside the spans, a mode that is none
        (lambda x: x.gather_size(b"12", _i64(1), pa.array([5], pa.int32()).buffers()[1], None, 1), ValueError),
        (lambda x: x.gather_size(b"12", _i64(0), pa.array([1], pa.int32()).buffers()[1], _i64(3), 1), ValueError),
        (
            lambda x: x.gather_i64(
                b"1", _i64(0), pa.array([1], pa.int32()).buffers()[1], None, 1, 7, bytearray(8), bytearray(1)
            ),
            ValueError,
        ),
        # names without their end, a range beyond the text, span tables too small for the keys
        (
            lambda x: x.scan(
                b"[{}]", 1, 3, 0, 4, b"ph", b"", bytearray(32), bytearray(16), bytearray(32), bytearray(16)
            ),
            ValueError,
        ),
        (
            lambda x: x.scan(
                b"[{}]", 1, 9, 0, 4, b"ph\0", b"", bytearray(32), bytearray(16), bytearray(32), bytearray(16)
            ),
            ValueError,
        ),
        (
            lambda x: x.scan(
                b"[{}]", 1, 3, 0, 4, b"ph\0ts\0", b"", bytearray(32), bytearray(16), bytearray(32), bytearray(16)
            ),
            ValueError,
        ),
    ],
    ids=[
        "not-a-buffer",
        "read-only-output",
        "short-input",
        "short-output",
        "negative-count",
        "wrong-state",
        "no-state",
        "short-steps",
        "count-not-int",
        "out-of-order",
        "span-outside-text",
        "row-outside-spans",
        "unknown-mode",
        "names-unterminated",
        "range-outside-text",
        "short-span-table",
    ],
)
def test_a_wrong_argument_is_an_exception(ext, call, error):
    with pytest.raises(error):
        call(ext)


def test_scan_and_gather_through_the_extension(ext):
    text = b'{"ph": "X", "ts": 1.5}, {"ph": "B", "ts": 2}]'
    cap, keys = 4, 2
    starts, lens = bytearray(8 * keys * cap), bytearray(4 * keys * cap)
    consumed, n, _, status, after = ext.scan(
        text, 0, len(text), 0, cap, b"ph\0ts\0", b"", starts, lens, bytearray(8 * cap), bytearray(4 * cap)
    )
    assert (consumed, n, status, after) == (len(text), 2, 1, 1)
    ts_starts, ts_lens = memoryview(starts)[8 * cap :], memoryview(lens)[4 * cap :]
    out, valid = bytearray(16), bytearray(1)
    assert ext.gather_i64(text, ts_starts, ts_lens, None, 2, 1, out, valid) == (0, 0)
    assert memoryview(out).cast("q").tolist() == [1500, 2000]
    size = ext.gather_size(text, starts, lens, None, 2)  # the values with their quotes: room enough
    data, offsets, special = bytearray(size), bytearray(12), bytearray(2)
    assert ext.gather(text, starts, lens, None, 2, 1, data, offsets, valid, special) == (0, 0)
    assert memoryview(offsets).cast("i").tolist() == [0, 1, 2] and data[:2] == b"XB"


@pytest.mark.parametrize("lead", range(8))
def test_a_strings_end_is_found_at_every_byte_of_a_word(ext, lead):
    """The scanner reads a string 8 bytes at a time and takes the first byte that ends its plain
    text: a closing quote, an escape, UTF-8 or a control character there, at every place in the
    word and across words, from every alignment (`lead` spaces before the event), gives the
    string's exact span, or the control character's offset."""
    for k in range(20):
        for tail, want in ((b'"', "a" * k), (b'\\"b"', "a" * k + '"b'), ('é"'.encode(), "a" * k + "é")):
            text = b" " * lead + b'{"name": "' + b"a" * k + tail + b"}]"
            starts, lens = bytearray(8), bytearray(4)
            consumed, n, _, status, _ = ext.scan(
                text, 0, len(text), 0, 1, b"name\0", b"", starts, lens, bytearray(8), bytearray(4)
            )
            assert (consumed, n, status) == (len(text), 1, 1), (k, tail)
            span = text.index(b'"', lead + 8)
            assert memoryview(starts).cast("q")[0] == span and memoryview(lens).cast("i")[0] == len(text) - 2 - span
            assert json.loads(text[span : len(text) - 2]) == want
        bad = b" " * lead + b'{"name": "' + b"a" * k + b'\x01"}]'
        _, n, err_pos, status, _ = ext.scan(
            bad, 0, len(bad), 0, 1, b"name\0", b"", bytearray(8), bytearray(4), bytearray(8), bytearray(4)
        )
        assert (n, status, err_pos) == (0, -2, bad.index(b"\x01")), k


def test_without_the_extension_one_warning(monkeypatch, caplog):
    """A missing extension is said once per process, at WARNING, with its fix; PROF_ENGINE_NATIVE=0
    is a choice, not said."""
    monkeypatch.setitem(sys.modules, "prof_engine._native._ext", None)  # import fails as if never built
    monkeypatch.delattr(_native, "_ext", raising=False)
    _native.load.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="prof_engine._native"):
            assert _native.load() is None and _native.load() is None
            warnings = [r for r in caplog.records if r.name == "prof_engine._native"]
            assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
            assert "slower" in warnings[0].getMessage() and "reinstall" in warnings[0].getMessage()
            caplog.clear()
            _native.load.cache_clear()
            monkeypatch.setenv("PROF_ENGINE_NATIVE", "0")
            assert _native.load() is None and not caplog.records
    finally:
        _native.load.cache_clear()


C_SOURCES = sorted((REPO / "prof_engine" / "_native").glob("*.[ch]"))
# what only some compilers take: GCC's builtins and attributes, statement expressions, typeof,
# 128-bit integers, case ranges (`case 1 ... 5:`), MSVC's own keywords
NOT_PORTABLE = re.compile(
    r"__builtin|__attribute__|__int128|\btypeof\b|__typeof__|\(\{|\bcase\b[^:\n]*\.\.\.|__declspec|__forceinline|\b_BitScan"
)


def test_the_c_sources_use_no_compiler_extensions():
    """scan.c, host_pass.c, lanes.c and module.c are standard C, which clang and MSVC build as gcc does."""
    assert C_SOURCES
    found = [
        f"{p.name}:{n}: {line.strip()}"
        for p in C_SOURCES
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if NOT_PORTABLE.search(line)
    ]
    assert not found, found


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_the_c_sources_are_iso_c11_to_each_compiler_here(compiler):
    """Each C file compiles as ISO C11 with every warning an error (`-pedantic-errors`: GNU
    extensions too), with each of gcc and clang installed here."""
    cc = shutil.which(compiler)
    if cc is None:
        pytest.skip(f"{compiler} is not installed here")
    include = sysconfig.get_paths()["include"]
    for source in (p for p in C_SOURCES if p.suffix == ".c"):
        proc = subprocess.run(
            [
                cc,
                "-std=c11",
                "-pedantic-errors",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-isystem",
                include,
                str(source),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr


def _source_tree(tmp_path: Path) -> Path:
    """The files a build reads, copied out of the checkout (its in-place build stays out)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("prof_engine", "schemas", "queries"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    return src


def _wheel(tmp_path: Path, **env: str) -> tuple[Path | None, subprocess.CompletedProcess]:
    """`pip wheel` of the source tree, offline (the build backend installed here, no isolation)."""
    pytest.importorskip("setuptools", minversion="77")
    out = tmp_path / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-v",
            "-w",
            str(out),
            str(_source_tree(tmp_path)),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheels = sorted(out.glob("*.whl")) if out.exists() else []
    return (wheels[0] if wheels else None), proc


def test_pip_wheel_is_a_platform_wheel_with_the_extension_and_data(tmp_path):
    wheel, proc = _wheel(tmp_path)
    assert wheel is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not wheel.name.endswith("-py3-none-any.whl") and "-cp3" in wheel.name, wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.startswith("prof_engine/_native/_ext.") and n.endswith((".so", ".pyd"))]
    assert "prof_engine/_native/_ext.pyi" in names and "prof_engine/py.typed" in names
    assert {n.rsplit("/", 1)[-1] for n in names if n.startswith("prof_engine/_data/queries/")} >= {
        p.name for p in (REPO / "queries").glob("*.sql")
    }
    assert "prof_engine/_data/queries/store/finalize.sql" in names
    assert {n.rsplit("/", 1)[-1] for n in names if n.startswith("prof_engine/_data/schemas/")} == {
        p.name for p in (REPO / "schemas").glob("*.toml")
    }
    # nothing compiled at run time, no sources beside the module
    assert not [n for n in names if n.endswith((".c", ".h")) or "/_native/_native_" in n or "/_native/_scan_" in n]


def test_a_build_without_a_compiler_finishes_and_says_so_once(tmp_path):
    wheel, proc = _wheel(tmp_path, CC="/nonexistent/cc")
    assert wheel is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).count(NO_COMPILER) == 1
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "/_ext." in n and not n.endswith(".pyi")]
    assert "prof_engine/_data/queries/store/finalize.sql" in names
