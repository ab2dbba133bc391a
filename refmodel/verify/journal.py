"""Fuzz-campaign journals: reading one (``wgref fuzz --resume``) and merging the journals of
a sharded campaign into one report (``wgref merge``).

A campaign is ``(target, seed, options)``; batch ``b`` always draws its cases from seed
``(seed, b)``.  Shard ``i/n`` runs the batches ``b = i, i + n, i + 2n, ...``, so shards are
disjoint and together they are the unsharded campaign.  Each shard writes its own journal:
a header line ``{"header": {..., "shard": [i, n]}}``, then one line per batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from ..errors import InputError


def read_journal(journal: Path) -> list[dict]:
    """The journal's records.  A torn last line (the campaign was killed while writing
    it) is dropped with a warning, and the file is cut back to its last whole line so the
    resumed campaign appends cleanly; a corrupt line before the last is an InputError."""
    import warnings

    try:
        raw = journal.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {journal}: {e.strerror or e}") from None
    lines = raw.split(b"\n")
    recs, good_bytes = [], 0
    for i, line in enumerate(lines):
        if not line.strip():
            good_bytes += len(line) + 1
            continue
        try:
            rec = json.loads(line.decode())
            if not isinstance(rec, dict):
                raise ValueError("not an object")
            if "batch" in rec and not all(isinstance(rec.get(k), (int, float)) and not isinstance(rec.get(k), bool)
                                          for k in ("batch", "tiles", "outputs", "mismatches", "seconds")):
                raise ValueError("incomplete batch record")
        except (ValueError, UnicodeDecodeError):
            if all(not x.strip() for x in lines[i + 1:]) and i > 0:
                warnings.warn(f"{journal}: dropping a torn last line (an interrupted write)", stacklevel=2)
                with open(journal, "r+b") as fh:
                    fh.truncate(good_bytes)
                break
            raise InputError(f"{journal} line {i + 1} is not a journal record; the journal is corrupt "
                             "(use another --out or drop --resume)") from None
        recs.append(rec)
        good_bytes += len(line) + 1
    return recs



def open_journal(journal: Path, header: dict, resume: bool) -> list[dict]:
    """Start a campaign's journal: with ``resume`` and an existing journal, check that it belongs to
    the campaign ``header`` describes and return its batch records (to continue after them);
    otherwise write a fresh journal holding only the header and return ``[]``."""
    from ..fileio import atomic_write_text

    if resume and journal.exists():
        lines = read_journal(journal)
        if not lines or lines[0].get("header") != header:
            raise InputError(f"{journal} belongs to another campaign (target, seed or options differ); "
                             "use another --out or drop --resume")
        return [r for r in lines[1:] if "batch" in r]
    atomic_write_text(journal, json.dumps({"header": header}) + "\n")
    return []


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``."""
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise InputError(f"a shard must look like i/n (e.g. 3/16), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise InputError(f"a shard i/n needs n >= 1 and 0 <= i < n, got {text!r}")
    return i, n


def split_shard(shard: tuple[int, int], workers: int) -> list[tuple[int, int]]:
    """Shard ``i/n`` split among ``workers`` processes: worker ``k`` runs shard ``(i + n*k)/(n*workers)``
    (the batches ``b ≡ i (mod n)`` dealt round-robin), so a Slurm array task with several GPUs
    still covers exactly its own batches."""
    i, n = shard
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    return [(i + n * k, n * workers) for k in range(workers)]


@dataclass
class MergedReport:
    """The totals of a sharded campaign."""

    header: dict
    shards: list[list[int]]
    missing: list[str]
    batches: int = 0
    tiles: int = 0
    outputs: int = 0
    mismatches: int = 0
    port_disagreements: int = 0   # GPU engine: the GPU port of the model wrong where the CPU refmodel is not
    worker_seconds: float = 0.0
    slowest_worker_seconds: float = 0.0
    repros: list[str] = field(default_factory=list)
    mismatching_batches: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def rate(self) -> float:
        """Outputs per second of the campaign with its workers running side by side."""
        return self.outputs / self.slowest_worker_seconds if self.slowest_worker_seconds else 0.0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["complete"] = self.complete
        d["outputs_per_second"] = self.rate
        return d


def _journals(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("journal.jsonl")) + sorted(p.glob("*/journal.jsonl"))
            if not found:
                raise InputError(f"{p} holds no journal.jsonl (nor */journal.jsonl)")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(f"{p} does not exist")
    return out


def merge_journals(paths: Iterable[str | Path]) -> MergedReport:
    """Merge the journals of one sharded campaign (files, or folders holding ``journal.jsonl`` or
    ``*/journal.jsonl``).  Refused: journals of different campaigns, different shard counts, the
    same shard twice, or a batch that falls outside its shard.  Shards not given are listed in
    ``missing`` (the report is then partial)."""
    files = _journals(paths)
    if not files:
        raise InputError("merge needs at least one journal")
    base: Optional[dict] = None
    rep: Optional[MergedReport] = None
    seen: dict[int, Path] = {}
    per_worker: list[float] = []
    for f in files:
        recs = read_journal(f)
        if not recs or "header" not in recs[0]:
            raise InputError(f"{f} has no header line: not a fuzz journal")
        head = dict(recs[0]["header"])
        i, n = head.pop("shard", [0, 1])
        if base is None:
            base = head
            rep = MergedReport(header=head, shards=[], missing=[])
        elif head != base:
            diff = sorted(k for k in set(head) | set(base) if head.get(k) != base.get(k))
            raise InputError(f"{f} belongs to another campaign ({', '.join(diff)} differ from {files[0]})")
        if rep.shards and n != rep.shards[0][1]:
            raise InputError(f"{f} is shard {i}/{n} but {files[0]} splits the campaign into {rep.shards[0][1]}")
        if i in seen:
            raise InputError(f"shard {i}/{n} appears twice: {seen[i]} and {f}")
        seen[i] = f
        rep.shards.append([i, n])
        secs = 0.0
        for r in recs[1:]:
            if "batch" not in r:
                continue
            if r["batch"] % n != i:
                raise InputError(f"{f}: batch {r['batch']} does not belong to shard {i}/{n}")
            rep.batches += 1
            rep.tiles += r["tiles"]
            rep.outputs += r["outputs"]
            rep.mismatches += r["mismatches"]
            rep.port_disagreements += r.get("port_disagreements", 0)
            secs += r["seconds"]
            if r["mismatches"] or r.get("port_disagreements", 0):
                rep.mismatching_batches.append(r["batch"])
            if r.get("repro"):  # a worker's scratch path (Ray) is found again next to its journal
                rp = Path(r["repro"])
                near = f.parent / rp.name
                rep.repros.append(str(near if not rp.exists() and near.exists() else rp))
        rep.worker_seconds += secs
        per_worker.append(secs)
    n = rep.shards[0][1]
    rep.missing = [f"{k}/{n}" for k in range(n) if k not in seen]
    rep.shards.sort()
    rep.mismatching_batches.sort()
    rep.slowest_worker_seconds = max(per_worker)
    return rep
