"""Replay every one of the 32 recorded pair chunks (134,217,728 pairs) of every div form and binary
spelling: ``python bench/sfu_pairs_all.py``."""

import time

from refmodel.verify import replay_sfu
from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

replay_sfu.EXHAUSTIVE = True
root = default_root() / "sfu"
entry = next(e for e in load_manifest(root)["entries"] if e["kind"] == "sfu_pairs")
t = time.time()
res = replay_sfu.replay_sfu_pairs(entry["meta"], load_arrays(root, entry))
print(f"{res.scope}: {res.cases} outputs, {res.mismatches} mismatches, complete={res.complete}; "
      f"{len(entry['meta']['pair_names'])} forms/spellings; {time.time() - t:.0f}s")
for d in res.details:
    print("  ", d)
