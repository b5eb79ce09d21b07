"""The notebooks run top to bottom (on the real fixtures beside the repository)."""

from __future__ import annotations

import pytest

from conftest import REPO, fixture_path

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_notebook_runs(name, monkeypatch):
    monkeypatch.setenv("PROF_ENGINE_TRACE", str(fixture_path("kineto", "hta_sampled_2rank_nccl")))
    nb = nbformat.read(REPO / "notebooks" / name, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
