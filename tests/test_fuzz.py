"""A fixed-seed subset of the fuzz campaign (benchmarks/fuzz.py): one case per mutator, none may end
in a traceback, a hang, an unclear exit, a partial output or a file written outside `-o`."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz", REPO / "benchmarks" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_classifier_tells_clean_from_bad(fuzz):
    assert fuzz.classify(None, "") == "hang"
    assert fuzz.classify(1, "Traceback (most recent call last):\n  ...\nValueError: x") == "traceback"
    assert fuzz.classify(-6, "") == "traceback"  # SIGABRT
    assert fuzz.classify(1, "Error: one line") == "error"
    assert fuzz.classify(1, "Error: a\nError: b") == "unclear"
    assert fuzz.classify(1, "") == "unclear"
    assert fuzz.classify(0, "Warning: guessed\nimported") == "warned"
    assert fuzz.classify(0, "imported") == "ok"


def test_cases_and_mutations_are_deterministic(fuzz, tmp_path):
    """A reproducer names (seed, case id): the same pair gives the same source, file and bytes."""
    assert fuzz.make_cases(30, 7, fuzz.FIXTURES) == fuzz.make_cases(30, 7, fuzz.FIXTURES)
    src = tmp_path / "t.json"
    for name, (mutate, kinds) in fuzz.MUTATORS.items():
        if "json" not in kinds:
            continue
        outs = []
        for _ in range(2):
            src.write_text('{"traceEvents": [{"ph": "X", "ts": 1.5, "dur": 2, "name": "a", "args": {"k": 1}}]}')
            mutate(src, random.Random(f"7:{name}"))
            outs.append(src.read_bytes())
        assert outs[0] == outs[1], name


def test_fixed_seed_subset_has_no_bad_outcome(fuzz, tmp_path):
    """11 cases, one per mutator, over the formats present beside the repository (the MindSpore
    CPU profile in tests/data always is); ~60 s with two at a time."""
    cases = fuzz.make_cases(len(fuzz.MUTATORS), 1, fuzz.FIXTURES)
    results = fuzz.run_campaign(cases, jobs=2, timeout=60, out=tmp_path)
    bad = [
        f"case {r.case.id} {r.case.mutator} on {r.case.label} {r.case.target}: {r.outcome}: {r.detail}"
        for r in results
        if r.outcome in fuzz.BAD
    ]
    assert not bad, "\n".join(bad)
    assert len(results) == len(cases) and all(r.outcome in fuzz.OUTCOMES for r in results)
