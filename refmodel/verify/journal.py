"""Fuzz-campaign journals: reading one (``wgref fuzz --resume``) and merging the journals of
a sharded campaign into one report (``wgref merge``).

A campaign is ``(target, seed, options)``; batch ``b`` always draws its cases from seed
``(seed, b)``.  Shard ``i/n`` runs the batches ``b = i, i + n, i + 2n, ...``, so shards are
disjoint and together they are the unsharded campaign.  Each shard writes its own journal:
a header line ``{"header": {..., "shard": [i, n]}}``, then one line per batch, each appended
and fsynced by :func:`append_record` (a crash loses at most the line being written).

Every reader checks every line against the format (:data:`HEADER`, :data:`BATCH`).  Readers
never change a journal (:func:`scan_journal`; ``wgref merge`` reports a torn last line and
leaves it); only the writer that resumes its own journal cuts a torn last line
(:func:`read_journal` with ``repair=True``, from :func:`open_journal`).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from ..errors import InputError
from .case import Field, JSONSyntaxError, check_fields, parse_json

MAX_COUNT = 1 << 62          # the largest batch number or count a journal record may hold
MAX_LINE_BYTES = 1 << 20     # a journal line (records are well under 1 KB)


def _shard_rule(v: list[int]) -> Optional[str]:
    i, n = v
    return None if n >= 1 and 0 <= i < n else "must be [i, n] with n >= 1 and 0 <= i < n"


# the journal format, as data: the header (the campaign: target, seed, options, shard) and one
# record per batch.  Every line is checked against one of these, by every reader.
HEADER: dict[str, Field] = {
    "target": Field("str", hi=4096),
    "seed": Field("int", 0, MAX_COUNT),
    "engine": Field("str", hi=64),
    "families": Field("strings", hi=256, null=True),
    "rs": Field("flag", null=True),
    "chain": Field("int", 1, 1 << 20, null=True),
    "scale_d": Field("flag", null=True),
    "batch_tiles": Field("int", 1, MAX_COUNT),
    "shard": Field("ints", length=2, rule=_shard_rule),
}
BATCH: dict[str, Field] = {
    "batch": Field("int", 0, MAX_COUNT, required=True),
    "job": Field("str", hi=4096),
    "tiles": Field("int", 0, MAX_COUNT, required=True),
    "outputs": Field("int", 0, MAX_COUNT, required=True),
    "mismatches": Field("int", 0, MAX_COUNT, required=True),
    "seconds": Field("real", 0, None, required=True),
    "port_disagreements": Field("int", 0, MAX_COUNT),
    "instr_outputs": Field("int", 0, MAX_COUNT),      # outputs times chain length (the GPU engine)
    "tiles_copied_back": Field("int", 0, MAX_COUNT),
    "repro": Field("str", hi=4096),
    "mismatch_file": Field("str", hi=4096),
    "kernels": Field("strings", hi=256),
    "skipped": Field("flag"),
    "why": Field("str", hi=4096),
}


def check_record(rec, where: str, *, first: bool) -> dict:
    """One journal line's value, checked: ``{"header": HEADER}`` on the first line, a
    :data:`BATCH` record on every other; counts are integers >= 0, mismatches at most the
    outputs compared."""
    if first:
        if not isinstance(rec, dict) or set(rec) != {"header"}:
            raise InputError(f"{where} must be the journal header {{\"header\": {{...}}}}")
        return {"header": check_fields(f"{where} (header)", rec["header"], HEADER)}
    if isinstance(rec, dict) and "header" in rec:
        raise InputError(f"{where} is a second header: a journal has one, on its first line")
    r = check_fields(where, rec, BATCH)
    for k in ("mismatches", "port_disagreements"):
        if r.get(k, 0) > r["outputs"]:
            raise InputError(f"{where}: {k} ({r[k]}) must not exceed outputs ({r['outputs']})")
    return r


@dataclass(frozen=True)
class JournalScan:
    """What reading a journal found: its checked records, a torn last line (its number and the
    byte offset where it starts) and whether the last whole record lacks its newline."""

    records: list[dict]
    torn_line: Optional[int] = None
    torn_offset: Optional[int] = None
    missing_newline: bool = False


def scan_journal(journal: str | Path) -> JournalScan:
    """Read a journal without changing it (every reader but a resuming writer uses this).

    Every line is checked by :func:`check_record`; a batch number twice is refused.  A last
    line that is not JSON at all is a torn write (the campaign was killed, or is still writing
    it) and is reported in the result, not cut; any other bad line is one InputError."""
    journal = Path(journal)
    try:
        fh = open(journal, "rb")
    except OSError as e:
        raise InputError(f"cannot read {journal}: {e.strerror or e}") from None
    with fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise InputError(f"cannot read {journal}: not a regular file")
        recs: list[dict] = []
        seen: dict[int, int] = {}
        offset = lineno = 0
        pending: Optional[tuple[int, int, str]] = None   # a non-JSON line: torn if nothing follows
        last = b""
        while True:
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            lineno += 1
            start, offset, last = offset, offset + len(line), line
            if len(line) > MAX_LINE_BYTES:
                raise InputError(f"{journal} line {lineno} is longer than {MAX_LINE_BYTES} bytes: "
                                 "not a journal record; the journal is corrupt")
            if not line.strip():
                continue
            if pending is not None:
                raise InputError(f"{journal} line {pending[0]} is not a journal record ({pending[2]}); the journal "
                                 "is corrupt (use another --out or drop --resume)")
            where = f"{journal} line {lineno}"
            try:
                value = parse_json(line.decode("utf-8"), where)
            except (JSONSyntaxError, UnicodeDecodeError) as e:
                pending = (lineno, start, "not JSON" if isinstance(e, UnicodeDecodeError) else
                           str(e).split(" is not valid JSON ", 1)[-1].strip("()"))
                continue
            rec = check_record(value, where, first=not recs)
            if "batch" in rec:
                b = rec["batch"]
                if b in seen:
                    raise InputError(f"{journal}: batch {b} appears twice (lines {seen[b]} and {lineno}); "
                                     "a batch is journaled once")
                seen[b] = lineno
            recs.append(rec)
    if pending is not None:
        if not recs:
            raise InputError(f"{journal} line {pending[0]} is not a journal header ({pending[2]}); the journal "
                             "is corrupt (use another --out or drop --resume)")
        return JournalScan(recs, torn_line=pending[0], torn_offset=pending[1])
    return JournalScan(recs, missing_newline=bool(last) and not last.endswith(b"\n"))


def read_journal(journal: str | Path, *, repair: bool = True) -> list[dict]:
    """The journal's checked records (:func:`scan_journal`).  A torn last line (the campaign
    was killed while writing it) is dropped with a warning; with ``repair`` (the writer that
    resumes this journal, and only it) the file is also cut back to its last whole line, or
    its last record gets its newline, and fsynced, so the resumed campaign appends cleanly.
    Readers that must not change the file pass ``repair=False``, or use :func:`scan_journal`."""
    import warnings

    journal = Path(journal)
    scan = scan_journal(journal)
    if scan.torn_line is not None:
        warnings.warn(f"{journal}: dropping a torn last line (an interrupted write)", stacklevel=2)
    if repair and (scan.torn_line is not None or scan.missing_newline):
        try:
            with open(journal, "r+b") as fh:
                if scan.torn_line is not None:
                    fh.truncate(scan.torn_offset)
                else:
                    fh.seek(0, os.SEEK_END)
                    fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as e:
            raise InputError(f"cannot repair {journal}: {e.strerror or e}") from None
    return scan.records


def append_record(journal: str | Path, rec: dict) -> None:
    """Append one batch record to a journal and fsync it, so a crash loses at most the line
    being written.  The record is checked first: a writer never journals what its readers refuse."""
    check_record(rec, f"a record for {journal}", first=False)
    line = json.dumps(rec, allow_nan=False) + "\n"
    try:
        with open(journal, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        raise InputError(f"cannot append to {journal}: {e.strerror or e}") from None


def open_journal(journal: Path, header: dict, resume: bool) -> list[dict]:
    """Start a campaign's journal: with ``resume`` and an existing journal, check that it belongs to
    the campaign ``header`` describes and return its batch records (to continue after them);
    otherwise write a fresh journal holding only the header and return ``[]``."""
    from ..fileio import atomic_write_text

    header = check_record({"header": header}, f"the header of {journal}", first=True)["header"]
    if resume and journal.exists():
        lines = read_journal(journal, repair=True)
        if not lines or lines[0].get("header") != header:
            raise InputError(f"{journal} belongs to another campaign (target, seed or options differ); "
                             "use another --out or drop --resume")
        return [r for r in lines[1:] if "batch" in r]
    atomic_write_text(journal, json.dumps({"header": header}, allow_nan=False) + "\n")
    return []


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n`` (ASCII digits only)."""
    import re

    m = re.fullmatch(r"\s*([0-9]{1,18})/([0-9]{1,18})\s*", str(text))
    shown = repr(str(text)) if len(str(text)) <= 40 else repr(str(text)[:37]) + "..."
    if not m:
        raise InputError(f"a shard must look like i/n (e.g. 3/16), got {shown}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise InputError(f"a shard i/n needs n >= 1 and 0 <= i < n, got {shown}")
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
    torn: list[str] = field(default_factory=list)   # torn last lines seen (left in the files as they are)

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
        elif p.exists():
            raise InputError(f"{p} is not a journal file or a folder")
        else:
            raise InputError(f"{p} does not exist")
    return out


def merge_journals(paths: Iterable[str | Path]) -> MergedReport:
    """Merge the journals of one sharded campaign (files, or folders holding ``journal.jsonl`` or
    ``*/journal.jsonl``).  Refused: journals of different campaigns, different shard counts, the
    same shard twice, a batch that falls outside its shard, and any line the journal format
    (:data:`HEADER`, :data:`BATCH`) refuses: negative, NaN or fractional counts, a batch twice.
    Shards not given are listed in ``missing`` (the report is then partial).  The journals are
    only read: a torn last line (a worker killed, or still writing) is listed in ``torn`` and left
    in the file as it is."""
    files = _journals(paths)
    if not files:
        raise InputError("merge needs at least one journal")
    base: Optional[dict] = None
    rep: Optional[MergedReport] = None
    seen: dict[int, Path] = {}
    per_worker: list[float] = []
    torn: list[str] = []
    for f in files:
        scan = scan_journal(f)
        recs = scan.records
        if not recs:
            raise InputError(f"{f} has no header line: not a fuzz journal")
        if scan.torn_line is not None:
            torn.append(f"{f} line {scan.torn_line}")
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
    rep.torn = torn
    rep.shards.sort()
    rep.mismatching_batches.sort()
    rep.slowest_worker_seconds = max(per_worker)
    return rep
