"""What linview's copy of the keys costs at 10^6 links (``linview/app/postgres/keys.py``):
the keys before a micro-batch as a copy of the set (what runner.py did per batch) or as
the journal's view (what it does now), and the checkpoint's keys as sorted JSON (before)
or int64 ``.npz`` (now), saved and loaded.

    python bench/db_keys.py [--links 1000000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from linview.app.postgres.keys import Keys  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=100_000)
    args = ap.parse_args()
    pairs = np.random.default_rng(0).integers(1, args.nodes + 1, (args.links, 2))
    keys = Keys({"public.links": set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(),
                                         strict=True))})
    with tempfile.TemporaryDirectory() as tmp:
        out = measure(keys, Path(tmp))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()},
                     indent=2))


def measure(keys: Keys, folder: Path) -> dict:

    def journal():
        keys.begin_batch()
        keys.before()

    return {"links": len(keys.present["public.links"]),
           "copy_of_the_set_ms": 1e3 * timed(lambda: {t: set(k) for t, k in
                                                      keys.present.items()}),
           "journal_view_ms": 1e3 * timed(journal),
           "sorted_json_save_s": timed(lambda: (folder / "keys.json").write_text(json.dumps(
               {t: sorted(k) for t, k in keys.present.items()}))),
           "npz_save_s": timed(lambda: keys.save(folder, 1)),
           "sorted_json_load_s": timed(lambda: Keys.load(folder / "keys.json")),
           "npz_load_s": timed(lambda: Keys.load(folder / "keys-1.npz"))}


if __name__ == "__main__":
    main()
