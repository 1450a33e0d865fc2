"""What ``linview run --out OUT`` writes after every micro-batch (both backends).

* ``OUT/results/batch-NNNNNNNN.parquet``: the results table, one file per batch, one row
  per output: ``batch`` (int64, 1, 2, ...), ``source_batch`` (int64: Spark's batchId, -1
  on NumPy), ``output`` (string), ``rows``, ``cols`` (int64) and ``values``
  (list<double>, column-major as in Octave: ``reshape(values, rows, cols)``).  Read it
  with ``pyarrow.parquet.read_table("OUT/results")`` or ``spark.read.parquet``.
* ``OUT/latest.npz``: the outputs after the last batch, for NumPy users.
* ``OUT/log.jsonl``: one line per applied batch (batch, records consumed, records applied,
  updates so far, the outputs' norms), exactly once even across crashes and resumes.

Every file is written to a temporary name and renamed, so readers never see half a file;
a batch re-applied after a crash rewrites the same names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from linview import faults


class Outputs:
    def __init__(self, root: Path):
        self.root = root
        self.results = root / "results"
        self.results.mkdir(parents=True, exist_ok=True)

    def clear(self) -> None:
        for p in [*self.results.glob("batch-*.parquet"), self.root / "log.jsonl",
                  self.root / "latest.npz"]:
            p.unlink(missing_ok=True)

    def resume(self, batch: int) -> None:
        """Forget what batches after ``batch`` wrote (they are applied again)."""
        for p in self.results.glob("batch-*.parquet"):
            if int(p.stem.split("-")[1]) > batch:
                p.unlink()
        log = self.root / "log.jsonl"
        if log.exists():
            keep = []
            for line in log.read_text().splitlines():
                try:
                    if json.loads(line)["batch"] <= batch:
                        keep.append(line)
                except (ValueError, KeyError, TypeError):
                    pass  # a line torn by a crash
            _atomic(log, "".join(x + "\n" for x in keep).encode())

    def write(self, views, batch: int, offset: int, applied: int, source_batch: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        outs = {k: np.atleast_2d(np.asarray(v, dtype=float)) for k, v in views.outputs.items()}
        names = list(outs)
        table = pa.table({
            "batch": pa.array([batch] * len(names), pa.int64()),
            "source_batch": pa.array([source_batch] * len(names), pa.int64()),
            "output": pa.array(names, pa.string()),
            "rows": pa.array([outs[n].shape[0] for n in names], pa.int64()),
            "cols": pa.array([outs[n].shape[1] for n in names], pa.int64()),
            "values": pa.array([outs[n].ravel(order="F").tolist() for n in names],
                               pa.list_(pa.float64())),
        })
        faults.point("out.results")
        path = self.results / f"batch-{batch:08d}.parquet"
        tmp = path.with_name("." + path.name + ".tmp")  # hidden: readers skip it
        with open(tmp, "wb") as f:  # a file, not a name pyarrow could take for a URI
            pq.write_table(table, f)
        os.replace(tmp, path)
        with open(self.root / "latest.npz.tmp", "wb") as f:
            np.savez(f, **outs)
        os.replace(self.root / "latest.npz.tmp", self.root / "latest.npz")
        faults.point("out.position")
        line = {"batch": batch, "offset": offset, "applied": applied,
                "source_batch": source_batch, "updates": views.updates,
                "norms": {k: float(np.linalg.norm(v)) for k, v in outs.items()}}
        with open(self.root / "log.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_results(root) -> dict[int, dict[str, np.ndarray]]:
    """``{batch: {output: array}}`` from ``OUT/results`` (for tests and users)."""
    import pyarrow.parquet as pq

    out: dict[int, dict[str, np.ndarray]] = {}
    for p in sorted(Path(root, "results").glob("batch-*.parquet")):
        with open(p, "rb") as f:
            rows = pq.read_table(f).to_pylist()
        for r in rows:
            out.setdefault(r["batch"], {})[r["output"]] = np.reshape(
                r["values"], (r["rows"], r["cols"]), order="F")
    return out
