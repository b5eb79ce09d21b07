"""`manifest.json`: what a run is (sources, ranks, devices, steps, lanes, row counts, schema version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prof_engine import schema
from prof_engine.errors import RunError
from prof_engine.schema import schema_version
from prof_engine.store.location import is_remote

MANIFEST = "manifest.json"


def load_manifest(run: Path) -> dict[str, Any]:
    """The manifest of run directory `run` as written, of any schema version (`upgrade` reads
    older runs' through this; everything else through `read_manifest`)."""
    path = run / MANIFEST
    if is_remote(run) and not path.is_file():
        raise RunError(f"{run}: no prof-engine run there (no {MANIFEST})")
    if not run.is_dir():
        raise RunError(f"{run}: no such run directory (create one with `prof-engine import TRACE -o {run}`)")
    if not path.is_file():
        raise RunError(f"{run}: not a prof-engine run (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"{path}: corrupt manifest ({e})") from None
    if not isinstance(manifest, dict):
        raise RunError(f"{path}: corrupt manifest (not a JSON object)")
    return manifest


def is_run(path: Path) -> bool:
    """Whether `path` holds a prof-engine run: a manifest that is a JSON object with the keys every
    run's has (a `manifest.json` alone is common: a web app's, a user's own)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and {"id", "schema_version", "sources", "tables"} <= manifest.keys()


def check_replaceable(out: Path, force: bool, hint: str = "pass --force to replace it") -> None:
    """RunError unless a new run may take `out`'s place: nothing is there, or `force` is given and
    it is a prof-engine run (`is_run`) or an empty directory. A `manifest.json` alone (a web app's,
    a user's own) does not make a directory a run a replacing write may delete."""
    if not out.exists():
        return
    if not force:
        raise RunError(f"{out}: already exists ({hint})")
    if not (out.is_dir() and not out.is_symlink() and (is_run(out) or not any(out.iterdir()))):
        raise RunError(f"{out}: exists and is not a prof-engine run; refusing to replace it")


def read_manifest(run: Path) -> dict[str, Any]:
    """The manifest of run directory `run`, checked for a schema version this build reads.

    A run the collector is still writing (or was killed while writing) has its summary (rows,
    devices, steps, span) recomputed from its partition files, which may be ahead of the file."""
    manifest = load_manifest(run)
    version = str(manifest.get("schema_version", ""))
    major = version.split(".")[0]
    if major == "1":  # runs without every derived column: re-finalised once, not computed by every view
        raise RunError(f"{run}: schema {version}; run `prof-engine upgrade {run}` (or re-import the source)")
    if major != schema_version().split(".")[0]:
        raise RunError(
            f"{run}: schema version {version or '?'} is not readable by this prof-engine "
            f"(reads {schema_version()}); re-import the source"
        )
    # Written live and not closed cleanly (its program runs on, or it or its writer was killed):
    # the partition files, published one by one, are the truth; the manifest may lag behind them.
    # (Once finalised whole, by its close or an upgrade, its manifest sums up every file.)
    if manifest.get("state") in ("recording", "interrupted") and not finalised(manifest) and not is_remote(run):
        from prof_engine.store.live import refresh

        manifest = refresh(run, manifest)
    return manifest


def restrict(manifest: dict[str, Any], ranks: list[int] | None) -> dict[str, Any]:
    """`manifest` as it would read for the ranks `ranks` alone (None: every rank): their sources,
    devices, steps, findings and rows per table. The run's own findings that name no rank are left out: they are
    about the run whole, and views over groups of ranks would each repeat them. RunError for a rank
    the run lacks, listing its ranks."""
    if ranks is None:
        return manifest
    have = manifest.get("ranks") or []
    if missing := sorted(set(ranks) - set(have)):
        raise RunError(
            f"no rank{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} in this run (its ranks: {brief_ranks(have)})"
        )
    keep = set(ranks)
    out = dict(manifest, ranks=[r for r in have if r in keep])
    for key in ("sources", "devices", "steps", "findings"):
        if key in manifest:
            out[key] = [e for e in manifest[key] or [] if isinstance(e, dict) and e.get("rank") in keep]
    counts = [src.get("rows") for src in out.get("sources", [])]
    if all(isinstance(c, dict) for c in counts):  # each source's rows: written by every import since 2.0
        out["tables"] = {t: sum(c.get(t, 0) for c in counts) for t in manifest.get("tables", {})}
    return out


def share_process_groups(sources: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """`sources` (manifest entries) with each `info.distributedInfo.pg_config` (Kineto: every process
    group the rank knew, each listing its member ranks) moved to one list for the run, the source
    keeping indices into it; and that list (the manifest's `process_groups`). Why: every rank of a
    job lists the same groups of up to all its ranks, so N ranks wrote N^2 values (3,000 ranks: 57 MB
    of a 130 MB manifest, and a minute to write it)."""
    groups: list[Any] = []
    seen: dict[str, int] = {}
    out = []
    for src in sources:
        info = src.get("info")
        dist = info.get("distributedInfo") if isinstance(info, dict) else None
        if isinstance(info, dict) and isinstance(dist, dict) and isinstance(dist.get("pg_config"), list):
            refs = []
            for group in dist["pg_config"]:
                key = repr(group)  # equal groups print alike (one trace format writes them all)
                if key not in seen:
                    seen[key] = len(groups)
                    groups.append(group)
                refs.append(seen[key])
            src = dict(src, info=dict(info, distributedInfo=dict(dist, pg_config=refs)))
        out.append(src)
    return out, groups


def own_process_groups(entry: dict[str, Any], groups: list[Any]) -> dict[str, Any]:
    """A manifest source `entry` with its `pg_config` indices (`share_process_groups`) replaced by
    the groups of the manifest's `process_groups` (an entry written before them has its own)."""
    info = entry.get("info")
    dist = info.get("distributedInfo") if isinstance(info, dict) else None
    refs = dist.get("pg_config") if isinstance(dist, dict) else None
    if not isinstance(info, dict) or not isinstance(dist, dict) or not isinstance(refs, list):
        return entry
    if not all(isinstance(i, int) and 0 <= i < len(groups) for i in refs):
        return entry
    return dict(entry, info=dict(info, distributedInfo=dict(dist, pg_config=[groups[i] for i in refs])))


def brief_ranks(ranks: list[int]) -> str:
    """A run's ranks for a message: all of them, or their count and range where there are many (a
    job of thousands of ranks in one line)."""
    return ", ".join(map(str, ranks)) if len(ranks) <= 16 else f"{len(ranks):,} from {min(ranks)} to {max(ranks)}"


def _group_index(groups: dict[str, Any], rank: int, names: tuple[str, ...]) -> int | None:
    """Position of `rank` in its group named one of `names` (torch_npu `parallel_group_info`)."""
    for g in groups.values() if isinstance(groups, dict) else ():
        ranks = g.get("global_ranks") if isinstance(g, dict) else None
        if isinstance(g, dict) and g.get("group_name") in names and isinstance(ranks, list) and rank in ranks:
            return sorted(ranks).index(rank)
    return None


def run_ranks(manifest: dict[str, Any]) -> list[tuple]:
    """The rows of the `run_ranks` table (schemas/run_ranks.toml) of a manifest, in its column order.
    (Plain rows: building Arrow from Python values would import pandas, 0.2 s of opening a run.)"""
    rows = []
    for src in manifest.get("sources", []):
        groups = (src.get("info") or {}).get("parallel_group_info") or {}
        rank = src["rank"]
        rows.append(
            (
                rank,
                src.get("host"),
                src["path"],
                src["format"],
                _group_index(groups, rank, ("pp",)),
                _group_index(groups, rank, ("dp",)),
                _group_index(groups, rank, ("tp",)),
            )
        )
    return rows


def run_findings(manifest: dict[str, Any]) -> list[tuple]:
    """The rows of the `run_findings` table (schemas/run_findings.toml): what each source's
    importer recorded in its `info["findings"]` (`store.quality.add_finding`), of the source's
    events, then the run's own findings (rank NULL unless one is named)."""
    rows: list[tuple] = []
    for src in manifest.get("sources", []):
        info = src.get("info") or {}
        if n := info.get("negative_durations"):  # recorded before findings existed, and still by chrome.anomalies
            rows.append((src["rank"], None, "negative_durations", int(n), src.get("events"), Path(src["path"]).name))
        for f in info.get("findings") or []:
            rows.append(
                (
                    src["rank"],
                    f.get("device"),
                    f["rule"],
                    int(f["count"]),
                    f.get("total", src.get("events")),
                    f.get("detail") or None,
                )
            )
    for f in manifest.get("findings") or []:
        rows.append(
            (f.get("rank"), f.get("device"), f["rule"], int(f["count"]), f.get("total"), f.get("detail") or None)
        )
    return rows


def quality_rules() -> list[tuple]:
    """The rows of the `quality_rules` table: every data-quality rule and its meaning."""
    from prof_engine.store.quality import RULES, level

    return [(rule, meaning, level(rule)) for rule, meaning in RULES.items()]


def run_devices(manifest: dict[str, Any]) -> list[tuple]:
    """The rows of the `run_devices` table (schemas/run_devices.toml): each device of the run that
    holds records, with what its source said about the hardware. Kineto lists every device the
    process could see (`deviceProperties`, `id` = the GPU events' pid, so the device `gpu<id>`);
    only those with records are rows. msprof sources name their devices `npu<id>` and say nothing
    of the chip, so theirs have no hardware columns."""
    props: dict[tuple[int, str], dict[str, Any]] = {}
    for src in manifest.get("sources", []):
        if src.get("format") not in ("kineto", "chrome", "collector"):
            continue
        for d in src.get("devices") or []:
            if isinstance(d, dict) and isinstance(d.get("id"), int):
                props[(src["rank"], f"gpu{d['id']}")] = d
    rows = []
    for d in manifest.get("devices", []):
        if d["device"] == "host":
            continue
        p = props.get((d["rank"], d["device"]), {})
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        rows.append(
            (
                d["rank"],
                d["device"],
                _text(p.get("name")),
                _int(p.get("totalGlobalMem")),
                f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
                _int(p.get("numSms")),
                d.get("records", 0),
                d.get("tasks", 0),
            )
        )
    return rows


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# Source formats whose records never hold CANN's keys in their args: Kineto (CUDA/HIP API args are
# External id, cbid, correlation) and the collector (which records through Kineto).
_FORMATS_WITHOUT_CANN_ARGS = frozenset({"kineto", "collector"})


def cann_args(manifest: dict[str, Any]) -> bool:
    """Whether any source of the run may have written CANN's keys into its records' args (an API
    call's level, a task's hardware type: CANN sources do); if none did, views need not read the
    args of millions of records to find out."""
    formats = {src.get("format") for src in manifest.get("sources", [])}
    return not formats or not formats <= _FORMATS_WITHOUT_CANN_ARGS


def host_only_ranks_possible(manifest: dict[str, Any]) -> bool:
    """Whether a rank of the run may have recorded no device task (kernel, comm, memcpy, memset),
    so that its reports fall back to its host ops. False only where the manifest counts each
    device's tasks (runs of schema 1.2 on) and every rank has some."""
    devices = manifest.get("devices") or []
    if any("tasks" not in d for d in devices):
        return True
    with_tasks = {d["rank"] for d in devices if d["tasks"]}
    return any(r not in with_tasks for r in manifest.get("ranks") or ())


def finalised(manifest: dict[str, Any]) -> bool:
    """Whether the run holds every derived table and column of `schema.derived()` (an import, an
    upgrade, a closed collector run). A live collector run, finalised batch by batch, does not:
    it is opened through a snapshot finalised whole (`store.upgrade.snapshot`)."""
    return set(schema.derived()) <= set(manifest.get("derived") or ())
