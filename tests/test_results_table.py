"""``linview run --out OUT``: the results table read straight from its Parquet files with
pyarrow (not through linview's reader), against the layout the README documents:
columns ``batch``, ``source_batch``, ``output``, ``rows``, ``cols``, ``values`` (column-
major, so ``reshape(values, rows, cols)``), one row per output and batch."""

import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linview.app.cli import main

GRAM = ("function [G, b] = gram(X, Y)\n %#linview dims X(m,n) Y(m,p)\n"
        " G = X' * X;\n b = X' * Y;\nend\n")
M, N, P = 6, 3, 2

val = st.floats(-2, 2, allow_nan=False).map(lambda x: round(x, 3))
change = st.tuples(st.sampled_from(["X", "Y"]), st.integers(1, M),
                   st.lists(val, min_size=N, max_size=N))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(change, min_size=1, max_size=3), min_size=1, max_size=4))
def test_matrix_outputs_read_from_the_parquet_table_with_pyarrow(batches):
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((M, N)), rng.standard_normal((M, P))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        np.save(tmp / "X.npy", X)
        np.save(tmp / "Y.npy", Y)
        (tmp / "gram.m").write_text(GRAM)
        lines, expected = [], []
        for b, changes in enumerate(batches):
            for name, row, values in changes:
                values = values[:P] if name == "Y" else values
                lines.append({"input": name, "row": row, "add": values, "batch": b})
                (X if name == "X" else Y)[row - 1] += values
            expected.append({"G": X.T @ X, "b": X.T @ Y})
        (tmp / "u.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        assert main(["run", str(tmp / "gram.m"), "--input", f"X={tmp / 'X.npy'}", "--input",
                     f"Y={tmp / 'Y.npy'}", "--updates", str(tmp / "u.jsonl"), "--out",
                     str(tmp / "out"), "--quiet"]) == 0
        table = pq.read_table(tmp / "out" / "results")
    assert table.column_names == ["batch", "source_batch", "output", "rows", "cols",
                                  "values"]
    types = dict(zip(table.column_names, table.schema.types, strict=True))
    assert types["values"] == pa.list_(pa.float64()) and types["output"] == pa.string()
    assert all(types[c] == pa.int64() for c in ("batch", "source_batch", "rows", "cols"))
    rows = table.to_pylist()
    assert sorted((r["batch"], r["output"]) for r in rows) == \
        [(b, o) for b in range(1, len(batches) + 1) for o in ("G", "b")]
    for r in rows:
        want = expected[r["batch"] - 1][r["output"]]
        assert r["source_batch"] == -1 and (r["rows"], r["cols"]) == want.shape
        got = np.reshape(r["values"], (r["rows"], r["cols"]), order="F")  # column-major
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
