"""The importer protocol: what every foreign format's module exposes, as one `Format` value.

A format is found, listed and converted in three steps: a folder's `units` (or a file's `files`
name and `sniff` of its first bytes) say which paths are its units, and `convert` streams one
unit into the run builder's sink. `registry.FORMATS` lists the formats in priority order; the
import (`prof_engine.importers`) asks them in that order and knows no format by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prof_engine.store.builder import SourceFile

Progress = Callable[[int], None]
Convert = Callable[[Path, int, Any, Progress], SourceFile]  # (unit, file index, sink, progress)


@dataclass(frozen=True)
class Format:
    """One foreign format.

    `units(folder)`: its units at or under a folder, sorted; [] when the folder holds none of this
    format; a one-line InputError when the folder is this format's but holds nothing to import.
    The first format (or `layout`: formats found together, as msprof's PROF_* folder holds its
    merged output and legacy device timelines side by side) to find units owns the folder.
    `files`: names of its files (a folder scan reads no others); with no `sniff`, the name alone
    claims a file. `sniff(path, head)`: whether a file is this format's by its first 64 KiB.
    `family`: "kineto" or "ascend"; sources of two families are two jobs.
    """

    name: str  # the unit's format, as the manifest's sources name it
    family: str
    convert: Convert
    units: Callable[[Path], list[Path]] | None = None
    layout: str = ""
    files: re.Pattern[str] | None = None
    sniff: Callable[[Path, bytes], bool] | None = None


def lead(head: bytes) -> bytes:
    """A file's first bytes without a UTF-8 byte order mark and leading whitespace."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


TRACE_ARRAY = re.compile(rb"\[\s*(\{|\])")  # a Chrome trace's JSON array form, at the `lead` of a file
