"""Where a run is read from: a local directory, or a URI of object storage (`s3://bucket/run`,
`gs://bucket/run`, any scheme pyarrow's file systems read).

A run on object storage is read in place: its manifest and file listings through
`pyarrow.fs` (credentials and endpoint from the environment: `AWS_ENDPOINT_URL`, ...), its Parquet
files by DuckDB through fsspec's wrapper of that file system (DuckDB's own httpfs would be
downloaded at run time). `RemotePath` is a `Path` whose listing and reading go there, so the code
that lists and reads a run's files is the same for both. Runs are written locally only.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Generator, Iterator
from pathlib import Path, PosixPath
from typing import Any, Self

from prof_engine.errors import RunError

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.+)$")
STORAGE_MISSING = "pip install 'prof-engine[storage]'"


def _split(path: str | Path) -> tuple[str, str] | None:
    """(scheme, rest) of a URI of object storage (`file://` is local), else None."""
    m = None if isinstance(path, Path) else _URI.match(str(path))
    return (m.group(1), m.group(2)) if m is not None and m.group(1) != "file" else None


def is_uri(path: str | Path) -> bool:
    """Whether `path` names object storage (`scheme://...`, but `file://`)."""
    return _split(path) is not None


def run_path(path: str | Path) -> Path:
    """`path` as a `Path`: a `RemotePath` for a URI (but `file://`), else a local path."""
    if isinstance(path, Path):
        return path
    if (split := _split(path)) is None:
        return Path(str(path).removeprefix("file://"))
    scheme, rest = split
    return _remote_class(scheme)(rest.rstrip("/"))


@functools.cache
def _remote_class(scheme: str) -> type[RemotePath]:
    return type(f"RemotePath_{scheme}", (RemotePath,), {"scheme": scheme})


@functools.cache
def _filesystem(scheme: str, bucket: str) -> Any:
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(f"{scheme}://{bucket}")[0]
    except (OSError, ValueError) as e:  # unknown scheme, no such bucket, no credentials
        raise RunError(f"{scheme}://{bucket}: cannot reach it ({str(e).splitlines()[0]})") from None


class RemotePath(PosixPath):
    """A path on object storage: `bucket/key` parts, shown (and given to DuckDB) as `scheme://bucket/key`.
    The methods a run's reader uses list and read through `pyarrow.fs`; the rest are not for it."""

    scheme = ""

    def __str__(self) -> str:
        return f"{self.scheme}://{super().__str__()}"

    def __fspath__(self) -> str:
        return str(self)

    @property
    def key(self) -> str:
        """`bucket/key`, as pyarrow's file system names it."""
        return PosixPath.__str__(self)

    def _fs(self) -> Any:
        return _filesystem(self.scheme, self.parts[0])

    def _info(self) -> Any:
        try:
            return self._fs().get_file_info(self.key)
        except OSError as e:
            raise RunError(f"{self}: cannot read it ({str(e).splitlines()[0]})") from None

    def exists(self, *, follow_symlinks: bool = True) -> bool:
        import pyarrow.fs as pafs

        return self._info().type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        import pyarrow.fs as pafs

        return self._info().type == pafs.FileType.Directory

    def is_file(self) -> bool:
        import pyarrow.fs as pafs

        return self._info().type == pafs.FileType.File

    def read_bytes(self) -> bytes:
        try:
            with self._fs().open_input_stream(self.key) as f:
                return f.read()
        except OSError as e:
            raise RunError(f"{self}: cannot read it ({str(e).splitlines()[0]})") from None

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        return self.read_bytes().decode(encoding or "utf-8", errors or "strict")

    def _listed(self, recursive: bool) -> Iterator[Any]:
        import pyarrow.fs as pafs

        try:
            yield from self._fs().get_file_info(pafs.FileSelector(self.key, recursive=recursive, allow_not_found=True))
        except OSError as e:
            raise RunError(f"{self}: cannot list it ({str(e).splitlines()[0]})") from None

    def iterdir(self) -> Generator[Self, None, None]:
        for info in self._listed(False):
            yield self / info.base_name

    def glob(self, pattern: str) -> Generator[Self, None, None]:  # type: ignore[override]
        for info in self._listed(False):
            if fnmatch.fnmatchcase(info.base_name, pattern):
                yield self / info.base_name

    def rglob(self, pattern: str) -> Generator[Self, None, None]:  # type: ignore[override]
        """Files and directories below this one whose name matches `pattern` (a name pattern only)."""
        for info in self._listed(True):
            if fnmatch.fnmatchcase(info.base_name, pattern):
                yield type(self)(info.path)

    def resolve(self, strict: bool = False) -> RemotePath:
        return self

    def absolute(self) -> RemotePath:
        return self


def is_remote(path: Path) -> bool:
    return isinstance(path, RemotePath)


def register(con: Any, path: Path) -> None:
    """Have DuckDB's connection `con` read `path`'s scheme through its pyarrow file system."""
    if not isinstance(path, RemotePath) or path.scheme in {fs for fs in con.list_filesystems()}:
        return
    try:
        from fsspec.implementations.arrow import ArrowFSWrapper  # type: ignore[import-untyped]
    except ImportError:
        raise RunError(f"{path}: reading a run on object storage needs fsspec: {STORAGE_MISSING}") from None

    wrapper = type(f"ArrowFS_{path.scheme}", (ArrowFSWrapper,), {"protocol": path.scheme})
    con.register_filesystem(wrapper(path._fs()))
