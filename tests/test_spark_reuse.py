"""Views by key on the Spark backend: ``load(reuse=...)`` and a checkpoint of ``linview run
--backend spark`` resumed with an edited program reuse every view whose key survived and
compute the others with Spark; the results equal a fresh load of the edited program, and
the views go on being maintained (and probed) as after a fresh load.  One local session
for the whole file (starting Spark costs seconds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import linview

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

OLS = "function beta = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\nend\n"
OLS_R = ("function [beta, r] = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\n"
         "  yhat = X * beta;\n  r = Y - yhat;\nend\n")
M, N = 40, 12
#: small views distributed in 2×2 blocks, so that reused views are placed in blocks
OPTS = {"distribute_min": 2, "partitions": 2}


def updated(views, rng, count: int = 4) -> None:
    for _ in range(count):
        views.update("X", np.eye(M)[rng.integers(M)], 0.1 * rng.standard_normal(N))


def same(a, b) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_load_reuse_and_restore_an_edited_program_on_spark(spark, tmp_path):
    rng = np.random.default_rng(11)
    old = linview.compile(OLS, name="ols", backend="spark").load(
        X=rng.standard_normal((M, N)), Y=rng.standard_normal((M, 1)), spark=spark, **OPTS)
    updated(old, rng)
    edited = linview.compile(OLS_R, name="ols", backend="spark")
    X, Y = old["X"], old["Y"]
    fresh = linview.compile(OLS_R, name="ols").load(X=X, Y=Y)  # NumPy, from the same data
    live = edited.load(X=X, Y=Y, reuse=old, spark=spark, **OPTS)
    old.save(tmp_path / "s.npz")
    saved = linview.restore(tmp_path / "s.npz", program=edited, spark=spark, **OPTS)
    for views in (live, saved):
        assert sorted(views.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
        assert sorted(views.reuse_report.recomputed) == ["r", "yhat"]
        assert set(views.distributed()) >= {"X", "beta_inv"}  # placed in blocks again
        for name in ("beta", "r"):
            same(views[name], fresh[name])
    assert live._prober.seeds.keys() == old._prober.seeds.keys()
    assert saved.updates == old.updates
    # both go on maintaining; both brought their probe state (live, or saved in the state
    # file): probed at their first update as after a fresh load, and passing (a stale
    # seed would fail it and fall back)
    for views in (live, saved):
        views.update("X", np.eye(M)[3], 0.1 * np.ones(N))
        assert "beta_inv" in views.probes
        assert views.stats["fallbacks"] == 0
        assert views.verify() < 1e-9


def test_changed_constant_on_spark_is_recomputed(spark):
    rng = np.random.default_rng(12)
    X, Y = rng.standard_normal((M, N)), rng.standard_normal((M, 1))
    old = linview.compile(OLS_R, name="ols", backend="spark").load(X=X, Y=Y, spark=spark,
                                                                    **OPTS)
    edited = linview.compile(OLS_R.replace("r = Y - yhat", "r = Y - 2 * yhat"), name="ols",
                             backend="spark")
    views = edited.load(X=X, Y=Y, reuse=old, spark=spark, **OPTS)
    assert list(views.reuse_report.recomputed) == ["r"]
    same(views["r"], Y - 2 * X @ np.linalg.solve(X.T @ X, X.T @ Y))


def test_run_spark_checkpoint_resumes_an_edited_program(spark, tmp_path, capsys):
    """``linview run --backend spark --checkpoint``: a run of OLS, then the edited program
    on the same checkpoint with more update files: the views with surviving keys are
    reused (said on stderr with times), and the outputs equal NumPy on all the records."""
    from linview.app.cli import main

    rng = np.random.default_rng(13)
    X, Y = rng.standard_normal((M, N)), rng.standard_normal((M, 1))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "ols.m").write_text(OLS)
    (tmp_path / "ed.m").write_text(OLS_R)
    (tmp_path / "upd").mkdir()

    def more(f: int) -> None:
        lines = []
        for _ in range(3):
            r, d = int(rng.integers(M)), (0.1 * rng.standard_normal(N)).tolist()
            lines.append({"input": "X", "row": r + 1, "add": d})
            X[r] += d
        (tmp_path / "upd" / f"u{f}.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines))

    args = ["--backend", "spark", "--partitions", "2", "--input", f"X={tmp_path / 'X.npy'}",
            "--input", f"Y={tmp_path / 'Y.npy'}", "--updates", str(tmp_path / "upd"),
            "--checkpoint", str(tmp_path / "ck"), "--once", "--spark-driver-mib", "0"]
    more(0)
    assert main(["run", str(tmp_path / "ols.m"), *args]) == 0
    capsys.readouterr()
    more(1)
    assert main(["run", str(tmp_path / "ed.m"), *args, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "the program changed since checkpoint" in err
    assert "reused: beta_inv, beta_p1, beta; recomputed: yhat (" in err and " ms)" in err
    got = np.load(tmp_path / "out" / "latest.npz")
    beta = np.linalg.solve(X.T @ X, X.T @ Y)
    same(got["beta"], beta)
    same(got["r"], Y - X @ beta)


def test_fresh_probe_vectors_keep_those_of_inverses_of_unkept_views(spark):
    """Every ``RENEW_EVERY`` updates the probe vectors are drawn afresh, except those of an
    inverse whose argument is not kept (OLS's ``X'X``): its ``A z`` can only be carried,
    and the vector seeded at load is stale by then (a spurious probe failure and partial
    refresh every RENEW_EVERY updates on Spark before)."""
    from linview.backends.numpy import probe

    rng = np.random.default_rng(14)
    views = linview.compile(OLS, name="ols", backend="spark").load(
        X=rng.standard_normal((M, N)), Y=rng.standard_normal((M, 1)), spark=spark, **OPTS)
    updated(views, rng, 2)
    views.updates = probe.RENEW_EVERY  # as after that many updates
    updated(views, rng, 2)
    assert views.stats["probe_failures"] == 0 and "beta_inv" in views.probes
