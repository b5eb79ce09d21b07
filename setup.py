"""The build of prof-engine's native helpers, `prof_engine._native._ext` (everything else is in
pyproject.toml): one CPython extension of the trace scanner and the host and lane passes, and the
data files the package reads (`schemas/`, `queries/`), which a wheel carries as `prof_engine/_data/`.

Without a C compiler the install still finishes, without the extension: it says so in one line
(`pip install -v` shows it), and the package warns once at run time and uses its Python paths.
An editable install builds the extension in place: after editing the C files, run
`pip install -e .` again (or `python setup.py build_ext --inplace`).
"""

import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

NATIVE = Path("prof_engine", "_native")
SOURCES = ["module.c", "scan.c", "host_pass.c", "lanes.c"]
DATA = ("schemas", "queries")
NO_COMPILER = (
    "prof-engine: no C compiler (cc/gcc/clang); installing without the native helpers: trace imports run ~3x slower"
)


class BuildExt(build_ext):
    """Skips the extension, with one line, where there is no compiler to build it; a compiler that
    fails on the sources fails the build (that is a bug to see, not a slower install)."""

    def build_extension(self, ext: Extension) -> None:
        command = getattr(self.compiler, "compiler_so", None)  # Unix compilers; MSVC finds its own
        if command and not shutil.which(command[0]):
            print(NO_COMPILER, file=sys.stderr)
            return
        super().build_extension(ext)


class BuildPy(build_py):
    """Copies `schemas/` and `queries/` into the built package as `prof_engine/_data/`; an editable
    install reads them from the repository root instead (`prof_engine/_resources.py`)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            for name in DATA:
                self.copy_tree(name, str(Path(self.build_lib, "prof_engine", "_data", name)))


setup(
    ext_modules=[
        Extension("prof_engine._native._ext", [str(NATIVE / s) for s in SOURCES], depends=[str(NATIVE / "native.h")])
    ],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
