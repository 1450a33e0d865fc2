"""The seconds model's decisions: whole-trigger re-evaluation, the as-written baseline,
BLAS threads per trigger, and the runtime paths they select."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import runtime
from linview.compiler import timemodel
from linview.compiler.calibrate import REFERENCE
from linview.compiler.cost import cost_report

EMUL = "function [B, C] = f(A)\n %#linview dims A(n,n)\n B = A .* A;\n C = B * B;\nend\n"
GENERAL = ("function T = g(A, B, T0)\n %#linview dims A(n,n) B(n,p) T0(n,p)\n"
           " %#linview dynamic A\n T = T0;\n for i = 1:16\n  T = A*T + B;\n end\nend\n")
CASES = [("pagerank.m", {"n": 1000}), ("gradient_descent.m", {"m": 1000, "n": 500}),
         ("general_form.m", {"n": 500, "p": 1}), ("ols.m", {"m": 1000, "n": 500, "p": 1}),
         ("powers.m", {"n": 300})]


def test_cost_chooses_whole_trigger_reeval_when_its_estimate_says_maintenance_is_slower():
    # B = A .* A is re-evaluated inside the trigger from A + U Vᵀ (n×n temporaries), and C
    # from B + D: slower than running the program again after A += U Vᵀ in place
    prog = linview.compile(EMUL, name="f", dims={"n": 1000})
    trig = cost_report(prog)["triggers"][0]
    w = trig["whole_trigger"]
    assert w["maintain_s"] > w["reeval_s"] and w["strategy"] == "reeval"
    assert prog.plan.triggers["A"].reevaluate
    assert "re-evaluation" in prog.plan.triggers["A"].reevaluate
    assert "REEVALUATED" in prog.source and "_reevaluate_trigger('A', U, V)" in prog.source
    assert any("whole trigger re-evaluates" in n for n in prog.plan.notes)


@pytest.mark.parametrize("example,dims", CASES)
def test_whole_trigger_choice_follows_the_estimates(examples, example, dims):
    prog = linview.compile_file(examples / example, dims=dims)
    for trig in cost_report(prog)["triggers"]:
        w = trig["whole_trigger"]
        # the chosen strategy is within the all-threads margin of the cheaper one
        chosen = w["maintain_s"] if w["strategy"] == "maintain" else w["reeval_s"]
        assert chosen <= timemodel.THREADS_GAIN * min(w["maintain_s"], w["reeval_s"])
        assert trig["trigger"]["seconds"] <= timemodel.THREADS_GAIN * chosen
        assert trig["reeval"]["model"] == "written" and trig["reeval"]["seconds"] > 0


def test_forced_strategies_never_reevaluate_whole_triggers():
    prog = linview.compile(EMUL, name="f", dims={"n": 1000}, strategy="incr")
    assert not prog.plan.triggers["A"].reevaluate


def test_forced_strategies_are_priced_as_the_trigger_runs_them(examples):
    # OLS with every view INCR: the trigger reads inv(XᵀX) once for all of its products
    # (Woodbury's factors, beta's U_beta_p1 and the probe), so its prediction must not
    # charge beta's product a matrix-vector pass of its own, as the per-view rows do
    n = 2000
    dims = {"m": 4000, "n": n, "p": 1}
    forced = cost_report(linview.compile_file(examples / "ols.m", dims=dims,
                                              strategy="incr"))["triggers"][0]
    assert forced["input"] == "X"
    per_view = sum(v["incr"]["seconds"] for v in forced["views"])
    gemv = timemodel.thin_seconds(n, n, 1, timemodel._rates(REFERENCE, True))
    assert forced["trigger"]["seconds"] < per_view - gemv
    # and it costs what the chosen plan's trigger costs on the same threads (forced
    # strategies run on one): both make one pass over the inverse
    auto = linview.compile_file(examples / "ols.m", dims=dims)
    same = timemodel.maintenance_seconds(auto.program, "X", auto.options["trigger_options"],
                                         auto.plan.sizes, one_thread=True)
    assert forced["whole_trigger"]["blas_threads"] == 1
    assert forced["trigger"]["seconds"] == pytest.approx(same, rel=0.2)


def test_written_model_keeps_loops_and_squares_powers():
    names = [s.name for s in linview.compile(GENERAL, name="g", model="written").program
             .statements]
    assert names == [f"T_{i}" for i in range(1, 17)]
    power = "function D = f(A)\n D = A^13;\nend\n"
    names = [s.name for s in linview.compile(power, name="f", model="written").program
             .statements]
    # 13 = 8 + 4 + 1: squarings to A^8, then two products, as Octave computes it
    assert len(names) == 5 and names[:3] == ["A_pow2", "A_pow4", "A_pow8"]


def test_auto_is_never_predicted_slower_than_the_program_as_written(examples):
    for example, dims in CASES + [("sums_of_powers.m", {"n": 300}),
                                  ("markov.m", {"n": 500})]:
        prog = linview.compile_file(examples / example, dims=dims)
        for trig in cost_report(prog)["triggers"]:
            assert trig["trigger"]["seconds"] <= trig["reeval"]["seconds"], (example, trig)


def _run(prog, inputs, updates, x):
    views = prog.load(**inputs)
    for U, V in updates:
        views.update(x, U, V)
    return views


def test_whole_trigger_reeval_matches_reevaluation_and_restores_on_error():
    rng = np.random.default_rng(1)
    n = 40
    prog = linview.compile(EMUL, name="f", dims={"n": n})
    assert prog.plan.triggers["A"].reevaluate
    A = rng.standard_normal((n, n))
    ups = []
    for j in range(4):
        U = np.zeros((n, 1))
        U[(7 * j) % n] = 1.0
        ups.append((U, rng.standard_normal((n, 1))))
    ups.append((rng.standard_normal((n, 2)), rng.standard_normal((n, 2))))  # dense rank 2
    views = _run(prog, {"A": A}, ups, "A")
    A_new = A + sum(U @ V.T for U, V in ups)
    np.testing.assert_allclose(views["A"], A_new, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(views["C"], (A_new * A_new) @ (A_new * A_new), rtol=1e-12,
                               atol=1e-9)
    assert views.verify() < 1e-12
    # an update that makes a view non-finite is refused and A is restored exactly
    before = {k: v.copy() for k, v in views._views.items()}
    U = np.zeros((n, 1))
    U[3] = 1.0
    with pytest.raises(linview.LinviewError), np.errstate(over="ignore", invalid="ignore"):
        views.update("A", U, np.full((n, 1), 1e300))
    for k, v in before.items():
        assert np.array_equal(views._views[k], v), k


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.integers(2, 30), st.integers(1, 3), st.sampled_from(
    ["rows", "cols", "dense"]), st.integers(0, 2 ** 31 - 1))
def test_add_outer_one_hot_paths_equal_the_dense_update(r, c, k, kind, seed):
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.standard_normal((r, c)))
    P, Q = rng.standard_normal((r, k)), rng.standard_normal((c, k))
    if kind == "rows":
        P[rng.permutation(r)[: max(0, r - 1)]] = 0.0
    elif kind == "cols":
        Q[rng.permutation(c)[: max(0, c - 1)]] = 0.0
    want = A + P @ Q.T
    runtime.add_outer(A, P, Q)
    np.testing.assert_allclose(A, want, rtol=1e-14, atol=1e-14)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.text("NT", min_size=4,
       max_size=4), st.booleans(), st.integers(0, 2 ** 31 - 1))
def test_fused_dot_equals_the_separate_products(widths, ops, large, seed):
    """Every path of ``fused_dot`` (matrix-vector products for thin groups, one ``dgemm``
    for wider ones, on every core for a large view) gives the plain products."""
    from linview.backends.numpy import kernels

    rng = np.random.default_rng(seed)
    n = 1024 if large else 40  # 1024² elements reach kernels.WIDE_MIN
    A = np.asfortranarray(rng.standard_normal((n, n)))
    blocks = [rng.standard_normal((n, w)) for w in widths]
    blocks.append(blocks[0].copy())  # a repeated block (its columns are computed once)
    ops = (ops + ops[0])[: len(blocks)]
    with kernels.wide_products(True):
        got = runtime.fused_dot(A, *blocks, ops=ops)
    for g, B, o in zip(got, blocks, ops, strict=True):
        np.testing.assert_allclose(g, (A.T if o == "T" else A) @ B, rtol=1e-12, atol=1e-10)


def test_wide_products_leave_the_users_threads_alone(monkeypatch):
    from linview.backends.numpy import threads as kernels

    assert kernels.others_running() >= 0
    big = np.zeros((1024, 1024))
    monkeypatch.setattr(kernels, "others_running", lambda: 0)
    monkeypatch.setattr(kernels.os, "cpu_count", lambda: 2)
    monkeypatch.setitem(kernels._WIDE, "at", -1.0)
    with kernels.wide_products(False):
        assert isinstance(kernels.wide(big), contextlib.nullcontext)
    with kernels.wide_products(True):
        assert not isinstance(kernels.wide(big), contextlib.nullcontext)
        assert isinstance(kernels.wide(np.zeros((10, 10))), contextlib.nullcontext)
        monkeypatch.setattr(kernels, "others_running", lambda: 1)  # the other core is busy
        monkeypatch.setitem(kernels._WIDE, "at", -1.0)  # look again now
        assert isinstance(kernels.wide(big), contextlib.nullcontext)


def test_a_trigger_on_every_thread_takes_only_the_idle_cores(monkeypatch):
    """``blas_threads=None`` (all threads) gives a maintaining trigger's passes the cores no
    other process keeps busy (a thread on a busy core would make the others wait for it),
    and keeps every BLAS library on one thread: no BLAS worker wakes (and must be parked
    and started again) at every update."""
    from linview.backends.numpy import threads

    mine = threads.pools()[0]
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    parked = []
    monkeypatch.setattr(threads, "park", lambda which="kernels": parked.append(which))
    for others, want in ((0, 2), (1, 1), (5, 1)):
        monkeypatch.setattr(threads, "others_running", lambda o=others: o)
        monkeypatch.setitem(threads._WIDE, "at", -1.0)
        with threads.trigger_limit(None, reevaluates=False):
            assert threads.pass_threads() == want
            assert {i["num_threads"] for i in mine.info()} == {1}
    assert parked == []  # no BLAS worker was woken


def test_triggers_run_with_their_blas_threads(monkeypatch, examples):
    prog = linview.compile_file(examples / "powers.m", dims={"n": 300})
    assert not prog.plan.triggers["A"].reevaluate
    assert prog.plan.triggers["A"].blas_threads == 1  # thin products: one thread
    A = 0.5 * np.eye(300)
    u, v = np.zeros(300), np.full(300, 0.01)
    u[2] = 1.0
    seen = []
    cls = prog.module_class
    orig = cls.on_update_A

    def spy(self, U, V):
        seen.append(runtime.blas_threads())
        return orig(self, U, V)

    monkeypatch.setattr(cls, "on_update_A", spy)
    for env in runtime.THREAD_ENV:
        monkeypatch.delenv(env, raising=False)
    prog.load(A=A).update("A", u, v)
    prog.load(A=A, blas_threads=2).update("A", u, v)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # the user's setting wins
    views = prog.load(A=A)
    assert views._threads == {}
    assert seen[0] == 1
    with pytest.raises(linview.InputError, match="blas_threads"):
        prog.load(A=A, blas_threads=0)


def test_seconds_model_is_a_roofline_of_the_rates():
    import sympy as sp

    from linview.compiler import ir
    from linview.compiler.optimize import Sizes

    n = sp.Symbol("n", positive=True, integer=True)
    A = ir.input_("A", (n, n)) if hasattr(ir, "input_") else ir.view("A", (n, n))
    x = ir.view("x", (n, 1))
    sizes = Sizes({"n": 2000}, 1)
    t = timemodel.expr_seconds(ir.matmul(A, x), sizes.value, timemodel._rates(REFERENCE, True),
                               set())
    assert t == pytest.approx(8 * (2000 * 2000 + 2 * 2000) / REFERENCE.stream1_bytes
                              + REFERENCE.call_s)
    B = ir.view("B", (n, n))
    t = timemodel.expr_seconds(ir.matmul(A, B), sizes.value, timemodel._rates(REFERENCE, False),
                               set())
    assert t == pytest.approx(2 * 2000 ** 3 / REFERENCE.gemm_flops + REFERENCE.call_s)


OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.sampled_from(["incr", None]))
def test_gram_matrix_read_only_by_its_inverse_is_not_kept(seed, strategy):
    rng = np.random.default_rng(seed)
    m, n = 30, 6
    prog = linview.compile(OLS, name="ols", dims={"m": m, "n": n, "p": 1}, strategy=strategy)
    trig = prog.plan.triggers["X"]
    if trig.reevaluate:  # a whole re-evaluation keeps nothing to maintain by Woodbury
        return
    assert prog.plan.transient == {"beta_arg"}
    assert "beta_arg" not in prog.module_class.VIEWS
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    views = prog.load(X=X, Y=Y)
    assert "beta_arg" not in views
    for _ in range(6):
        i = rng.integers(m)
        u = np.zeros(m)
        u[i] = 1.0
        v = 0.3 * rng.standard_normal(n)
        views.update("X", u, v)
        X[i] += v
        views.update("Y", u, rng.standard_normal(1))
        Y[i] = views["Y"][i]
    np.testing.assert_allclose(views["beta"][:, 0], np.linalg.lstsq(X, Y, rcond=None)[0][:, 0],
                               rtol=1e-8, atol=1e-10)
    assert views.verify() < 1e-9


def test_a_gram_matrix_read_elsewhere_is_kept():
    src = "function [beta, G] = f(X, Y)\n G = X' * X;\n beta = G \\ (X' * Y);\nend\n"
    prog = linview.compile(src, name="f", strategy="incr")
    assert prog.plan.transient == frozenset() and "G" in prog.module_class.VIEWS


def test_each_product_with_a_view_is_computed_once(examples):
    """A product computed on its own (its factor was not ready for the fused pass) is not
    computed again by a later fused pass over the same view (PageRank: 9 passes over M)."""
    import re

    src = linview.compile_file(examples / "pagerank.m", dims={"n": 1000},
                               strategy="hybrid").source
    trig = src[src.index("def on_update_M"):]
    alone = re.findall(r"M @ (D_r_\d+)", trig)
    fused = [f for call in re.findall(r"rt\.fused_dot\(M, ([^)]*?), ops=", trig)
             for f in call.split(", ")]
    products = alone + fused
    assert len(products) == len(set(products)) == 9, products


def test_reevaluation_solves_instead_of_inverting_when_no_trigger_needs_the_inverse():
    prog = linview.compile(OLS, name="ols", strategy="reeval", model="written")
    assert {"beta_arg", "beta_inv"} <= prog.plan.transient
    assert "rt.solve(beta_arg, beta_p1" in prog.source and "rt.inv(" not in prog.source
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((12, 4)), rng.standard_normal((12, 1))
    views = prog.load(X=X, Y=Y)
    np.testing.assert_allclose(views["beta"], np.linalg.lstsq(X, Y, rcond=None)[0],
                               rtol=1e-10)
    u = np.zeros(12)
    u[5] = 1.0
    views.update("X", u, rng.standard_normal(4))
    assert views.verify() == 0.0
    with pytest.raises(linview.NumericalError, match="singular"):
        prog.load(X=np.ones((12, 4)), Y=Y)
    # the auto module keeps the inverse: its trigger maintains it by Woodbury
    auto = linview.compile(OLS, name="ols", dims={"m": 400, "n": 200, "p": 1})
    assert "beta_inv" not in auto.plan.transient and "beta_inv" in auto.module_class.VIEWS


def test_cost_cli_prints_seconds_and_the_whole_trigger_choice(examples, capsys):
    from linview.app import cli

    assert cli.main(["cost", str(examples / "pagerank.m"), "--dims", "n=1000"]) == 0
    out = capsys.readouterr().out
    assert "whole trigger: maintain" in out and "re-evaluate as written:" in out
    assert " ms" in out or " µs" in out
    assert cli.main(["cost", str(examples / "ols.m"), "--dims", "m=400,n=200,p=1",
                     "--json"]) == 0
    import json

    rep = json.loads(capsys.readouterr().out)
    trig = rep["triggers"][0]
    assert trig["reeval"]["seconds"] > trig["trigger"]["seconds"] > 0
    assert all("seconds" in v["reeval"] for v in trig["views"])
    assert trig["predicted_speedup"] == pytest.approx(trig["reeval"]["seconds"]
                                                      / trig["trigger"]["seconds"])


def test_one_hot_update_factor_bytes_count_the_columns_read():
    import sympy as sp

    from linview.compiler import ir

    m_, n_, k_ = (sp.Symbol(s, positive=True, integer=True) for s in ("m", "n", "k"))
    X = ir.view("X", (m_, n_))
    U = ir.factor("U", (m_, k_))
    W = ir.factor("W", (m_, k_))
    size = {m_: 4000, n_: 2000, k_: 1}.get
    prod = ir.matmul(ir.transpose(X), U)
    fl, by = timemodel.node_counts(prod, size)
    assert (fl, by) == (2 * 2000, 8 * (2000 + 4000 + 2000))  # Xᵀ U reads one row of X
    fl, by = timemodel.node_counts(prod, size, one_hot=frozenset())
    assert by == 8 * (4000 * 2000 + 4000 + 2000)  # dense U: the whole of X
    fl, by = timemodel.node_counts(ir.matmul(ir.transpose(X), W), size)
    assert by == 8 * (4000 * 2000 + 4000 + 2000)  # a derived factor is not one-hot


def test_an_inverse_read_only_by_another_inverse_is_evaluated_not_solved():
    src = "function D = f(A)\n %#linview dims A(n,n)\n D = inv(inv(A));\nend\n"
    for strategy in ("incr", "reeval", None):
        prog = linview.compile(src, name="f", dims={"n": 30}, strategy=strategy)
        A = np.eye(30) + 0.1 * np.random.default_rng(0).standard_normal((30, 30))
        views = prog.load(A=A)
        u = np.zeros(30)
        u[4] = 1.0
        views.update("A", u, 0.05 * np.ones(30))
        assert views.verify() < 1e-10, strategy
        np.testing.assert_allclose(views["D"], views["A"], atol=1e-10)


def test_runtime_kernels_and_the_seconds_model_agree_on_thin_products():
    """The model mirrors the NumPy kernels' thresholds (a changed kernel must change both)."""
    from linview.backends.numpy import kernels, lowrank

    assert (kernels.GEMV_MAX, kernels.WIDE_MIN, kernels.WIDE_RANK, kernels.ONE_PASS_MAX,
            lowrank.FOLD_RANK, lowrank.MIN_ELEMENTS) == (
        timemodel.GEMV_MAX, timemodel.WIDE_MIN, timemodel.WIDE_RANK, timemodel.ONE_PASS_MAX,
        timemodel.FOLD_RANK, timemodel.WIDE_MIN)


def test_thin_products_of_one_view_are_charged_one_fused_pass():
    import sympy as sp

    from linview.compiler import ir
    from linview.compiler.optimize import Sizes

    n = sp.Symbol("n", positive=True, integer=True)
    W = ir.view("W", (n, n))
    F1, F2 = ir.factor("F1", (n, 2)), ir.factor("F2", (n, 3))
    sizes = Sizes({"n": 3000}, 1)
    roof = timemodel._rates(REFERENCE, True)
    both = ir.add(ir.matmul(W, F1), ir.matmul(W, ir.matmul(F2, ir.factor("S", (3, 2)))))
    reads: dict = {}
    t = sum(timemodel.expr_seconds(e, sizes.value, roof, set(), frozenset(), reads)
            for e in (both, ir.matmul(W, F2)))
    # W F1 and W F2 (factor blocks, ready together) in one group; W (F2 S) on its own
    assert reads == {("W", "N", 0): [3000, 3000, 5]}
    fused = timemodel.fused_seconds(reads, roof)
    # one pass over W (memory), the 5 columns multiplied in cache at half the gemm rate
    assert fused == pytest.approx(8 * 3000 ** 2 / roof.stream
                                  + 5 * 2 * 3000 ** 2 / (0.5 * roof.gemm) + roof.call)
    # products of both kinds at one level share the pass; beyond ONE_PASS_MAX columns in all,
    # one packing dgemm per kind (the thin rate)
    both_kinds = {("W", "N", 0): [3000, 3000, 3], ("W", "T", 0): [3000, 3000, 2]}
    assert timemodel.fused_seconds(both_kinds, roof) == pytest.approx(fused)
    wide = {("W", "N", 0): [3000, 3000, 9], ("W", "T", 0): [3000, 3000, 9]}
    assert timemodel.fused_seconds(wide, roof) == pytest.approx(2 * (max(
        2 * 3000 ** 2 * 9 / roof.gemm, 8 * 3000 ** 2 / roof.thin) + roof.call))
    separate = timemodel.expr_seconds(ir.matmul(W, F1), sizes.value, roof, set(), frozenset()) \
        + timemodel.expr_seconds(ir.matmul(W, F2), sizes.value, roof, set(), frozenset())
    assert fused < separate
    assert t == pytest.approx(timemodel.thin_seconds(3000, 3000, 2, roof), rel=0.05)
    # at most GEMV_MAX columns: matrix-vector passes, one per column
    one = timemodel.thin_seconds(3000, 3000, 1, roof)
    assert timemodel.thin_seconds(3000, 3000, 2, roof) == pytest.approx(2 * one)
    # a block computed from a product over W is ready one level later: not fused with it
    levels = {"F2": timemodel.factor_level([ir.matmul(W, F1)], {}, sizes.value, frozenset())}
    assert levels == {"F2": 1}
    reads = {}
    for e in (ir.matmul(W, F1), ir.matmul(W, F2)):
        timemodel.expr_seconds(e, sizes.value, roof, set(), frozenset(), reads, levels)
    assert reads == {("W", "N", 0): [3000, 3000, 2], ("W", "N", 1): [3000, 3000, 3]}


def test_bench_ranking_counts_only_clear_disagreements():
    from linview.app.bench import ranking_disagreements

    def row(med, spread, pred):
        return {"median_s": med, "p10_s": med - spread, "p90_s": med + spread,
                "predicted_s": pred}

    # measured apart, predicted the other way: a disagreement
    assert ranking_disagreements({"incr": row(1.0, 0.1, 2.0), "reeval": row(3.0, 0.1, 1.0)}) \
        == [["incr", "reeval"]]
    # measured spreads overlap: a tie, whatever the prediction
    assert ranking_disagreements({"incr": row(1.0, 0.5, 2.0), "reeval": row(1.2, 0.5, 1.0)}) \
        == []
    # predictions within 10%: a tie
    assert ranking_disagreements({"incr": row(1.0, 0.1, 1.05), "reeval": row(3.0, 0.1, 1.0)}) \
        == []
