"""Issue 38 item 6(a): communication_matrix keeps links to ranks the run does not hold (the job's other
ranks, not imported), as the vendor's communication_matrix.json does, and `data_quality` says so with
the note `links_to_absent_ranks`: per rank, the links (src→dst pairs) with an absent end, of all its
links, naming those ranks and the MB moved over such links.

Oracles: the vendor's own communication_matrix.json beside each rank of the torch_npu fixture (its
link keys "src-dst" and `-total` buckets, read with json), and the links a hand-built trace plants."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_communication import HCCL, _meta, _op, _task

import prof_engine

RULE = "links_to_absent_ranks"


def _rule_rows(run) -> list[tuple]:
    return run.sql(
        'SELECT "Rank", "Device", "Count", "Total", "Detail", "Level" FROM data_quality WHERE "Rule" = ? ORDER BY 1',
        [RULE],
    ).rows()


def _vendor_links(src: Path) -> tuple[set[int], dict[int, tuple[set[tuple[int, int]], float]]]:
    """The fixture's ranks, and per rank its matrix's links and the MB its `-total` buckets give."""
    ranks = {
        int(m[1])
        for p in src.glob("*/profiler_info_*.json")
        if (m := re.fullmatch(r"profiler_info_(\d+)\.json", p.name))
    }
    out = {}
    for path in src.glob("*/ASCEND_PROFILER_OUTPUT/communication_matrix.json"):
        links: set[tuple[int, int]] = set()
        mb = {}
        for kinds in json.loads(path.read_text(encoding="utf-8")).values():
            for buckets in kinds.values():
                for bucket, by_link in buckets.items():
                    for key, entry in by_link.items():
                        link = tuple(int(r) for r in key.split("-"))
                        links.add(link)  # type: ignore[arg-type]
                        if bucket.split("@")[0].endswith("-total"):
                            mb[bucket, key] = entry["Transit Size(MB)"]
        (rank,) = {s for s, _ in links} & ranks  # every link of a rank's file starts at that rank
        absent_mb = sum(v for (_, key), v in mb.items() if not {int(r) for r in key.split("-")} <= ranks)
        out[rank] = (links, absent_mb)
    return ranks, out


def test_links_to_ranks_not_imported_are_a_note_of_data_quality(torch_npu_text_run):
    """2 ranks of an 8-rank group: each rank's matrix links to ranks 2-7, which the run lacks."""
    src, run = torch_npu_text_run
    ranks, vendor = _vendor_links(src)
    assert ranks == {0, 1} and vendor.keys() == ranks
    expected = []
    for rank, (links, mb) in sorted(vendor.items()):
        absent = sorted({r for link in links for r in link} - ranks)
        assert absent == [2, 3, 4, 5, 6, 7]
        n = sum(1 for link in links if not set(link) <= ranks)
        expected.append(
            (rank, f"npu{rank}", n, len(links), f"ranks 2-7, not in the run: {round(mb, 3)} MB over these links")
        )
    rows = _rule_rows(run)
    assert [(r, d, n, t, detail.split(" (")[0]) for r, d, n, t, detail, _ in rows] == expected
    assert {level for *_, level in rows} == {"note"}  # the vendor's own rows: not a warning


def _hccl_rank(root: Path, rank: int, peers: list[int]) -> Path:
    """A rank of a hand-built job: one allreduce with an on-chip copy and a 4 MB HCCS transfer to each of `peers`."""
    d = root / f"rank{rank}_ascend_pt"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}), encoding="utf-8")
    trace = [
        _meta("process_name", HCCL, name="HCCL"),
        _meta("process_labels", HCCL, labels="NPU"),
        _meta("thread_name", HCCL, 0, name="Group 0 Communication"),
        *[_meta("thread_name", HCCL, p + 1, name=f"Plane {p}") for p in range(len(peers) + 1)],
        _op("hcom_allReduce__001_0_1", 0, 100),
        _task("Memcpy", 0, 0, 10, "SDMA", rank, rank, 1_000_000, "ON_CHIP"),
        *[_task("Memcpy", p + 1, 20, 40, "SDMA", rank, peer, 4_000_000, "HCCS") for p, peer in enumerate(peers)],
    ]
    (out / "trace_view.json").write_text(json.dumps(trace), encoding="utf-8")
    return d


def test_a_note_only_for_the_rank_with_a_peer_the_run_lacks(tmp_path):
    """Ranks 0 and 1 linking each other, rank 1 also to rank 5 (not imported): rank 0, every peer
    held, has no note; rank 1's link to rank 5 (4 MB planted) is one of its 3 links."""
    ranks = [_hccl_rank(tmp_path / "job", 0, [1]), _hccl_rank(tmp_path / "job", 1, [0, 5])]
    with prof_engine.open(prof_engine.import_trace(ranks, tmp_path / "run", jobs=1)) as run:
        links = run.sql('SELECT DISTINCT "Rank", "Src Rank", "Dst Rank" FROM communication_matrix ORDER BY ALL').rows()
        rows = _rule_rows(run)
    assert links == [(0, 0, 0), (0, 0, 1), (1, 1, 0), (1, 1, 1), (1, 1, 5)]
    assert rows == [(1, "npu0", 1, 3, "rank 5, not in the run: 4.0 MB over these links (communication_matrix)", "note")]
