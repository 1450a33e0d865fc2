"""Cost model: symbolic flop counts against hand-derived leading terms (thesis Table 6.2),
strategy choice, and iterative models that all compute the same thing."""

import math

import numpy as np
import pytest
import sympy as sp

import linview
from linview.compiler.cost import cost_report, program_counts, strategy_counts, symbolic
from linview.compiler.delta import build_trigger
from linview.compiler.shapes import RANK, dim

n, m, p = dim("n"), dim("m"), dim("p")
POWER = "function D = f(A)\n %#linview dims A(n,n)\n D = A^{k};\nend\n"
GENERAL = ("function T = g(A, B, T0)\n %#linview dims A(n,n) B(n,p) T0(n,p)\n"
           " %#linview dynamic A\n T = T0;\n for i = 1:{k}\n  T = A*T + B;\n end\nend\n")
OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


def trigger_flops(src, model="exp", strategy="incr", x="A", dims=None):
    """Symbolic flops of one rank-k update of ``x`` under the compiled strategies."""
    prog = linview.compile(src, name="t", model=model, strategy=strategy, dims=dims)
    prog_ir = prog.plan.program
    raw = build_trigger(prog_ir, x, prog.options["trigger_options"])
    decl = prog_ir.input(x)
    total = 2 * decl.shape[0] * decl.shape[1] * RANK  # x += U Vᵀ
    changed = {x}
    for vd, chosen in zip(raw.deltas[1:], prog.plan.triggers[x].deltas[1:], strict=True):
        st = prog_ir.statement(vd.name)
        c = strategy_counts(st, list(vd.terms) if vd.terms else None, prog.plan.sizes,
                            changed, size=symbolic)
        changed.add(vd.name)
        total += c[chosen.strategy][0]
    return sp.expand(total), sp.expand(program_counts(prog_ir, symbolic)[0])


def coeff(expr, var, power):
    return sp.Poly(expr.subs(RANK, 1), var).coeff_monomial(var ** power)


@pytest.mark.parametrize("k", [4, 8, 16])
def test_matrix_powers_leading_terms_all_models(k):
    # exponential: log2 k squarings; level j carries rank 2^j and costs 8·2^j n² (two
    # products with the view, the update of the view); plus A += u vᵀ
    incr, reeval = trigger_flops(POWER.format(k=k), "exp")
    assert coeff(incr, n, 2) == 8 * (k - 1) + 2
    assert coeff(incr, n, 3) == 0
    assert coeff(reeval, n, 3) == 2 * int(math.log2(k))
    # linear: P_i = P_{i-1} A has rank i and costs 4 i n²: Θ(n² k²)
    incr, reeval = trigger_flops(POWER.format(k=k), "linear")
    assert coeff(incr, n, 2) == 4 * (k * (k + 1) // 2 - 1) + 2
    assert coeff(reeval, n, 3) == 2 * (k - 1)
    # skip-4: squarings up to A^4, then steps of A^4: n³ (log s + k/s) re-evaluation
    incr, reeval = trigger_flops(POWER.format(k=k), "skip=4")
    assert coeff(reeval, n, 3) == 2 * (2 + k // 4 - 1)
    assert coeff(incr, n, 2) < coeff(trigger_flops(POWER.format(k=k), "linear")[0], n, 2)
    assert coeff(incr, n, 3) == 0


@pytest.mark.parametrize("k", [4, 16])
def test_general_form_leading_terms(k):
    incr, reeval = trigger_flops(GENERAL.format(k=k), "linear")
    # T_i = A T_{i-1} + B: ΔT_i has rank i; A·U_T costs 2 n² (i-1): n² k(k-1) + 2 n²
    assert coeff(incr, n, 2) == k * (k - 1) + 2
    # re-evaluation: k products A T of 2 n² p flops each
    assert sp.Poly(reeval, n, p).coeff_monomial(n ** 2 * p) == 2 * k


def test_general_form_exp_model_is_linear_in_k():
    # Table 6.2: INCR is Θ((n² + pn) k²) in the linear model and Θ((n² + pn) k) in the
    # exponential one (T_2i = P_i T_i + S_i B with P_i = A^i and S_i = Σ_{j<i} A^j)
    lin = [coeff(trigger_flops(GENERAL.format(k=k), "linear")[0], n, 2) for k in (8, 16)]
    exp = [coeff(trigger_flops(GENERAL.format(k=k), "exp")[0], n, 2) for k in (8, 16)]
    assert lin[1] / lin[0] > 3.5 and exp[1] / exp[0] < 3 and exp[1] < lin[1]
    reeval = trigger_flops(GENERAL.format(k=16), "exp")[1]
    assert coeff(reeval, n, 3) == 2 * (3 + 2)  # log2(16) - 1 squarings of P and S each


def test_ols_leading_terms():
    incr, reeval = trigger_flops(OLS, x="X")
    # re-evaluation: X'X (2 m n²), inverse (2 n³), X'Y (2 m n p), W X'Y (2 n² p)
    assert sp.expand(reeval) == 2 * m * n ** 2 + 2 * n ** 3 + 2 * m * n * p + 2 * n ** 2 * p
    # incremental: no n³, no m n² term
    poly = sp.Poly(incr.subs(RANK, 1), m, n, p)
    assert poly.coeff_monomial(n ** 3) == 0 and poly.coeff_monomial(m * n ** 2) == 0
    assert poly.total_degree() <= 3  # e.g. n² p, m n p: one factor is the small dim


def test_auto_picks_hybrid_for_thin_iterates_and_incr_for_square():
    src = GENERAL.format(k=16)
    thin = linview.compile(src, name="g", dims={"n": 2000, "p": 1})
    square = linview.compile(src, name="g", dims={"n": 2000, "p": 2000})
    ts = [vd for vd in thin.plan.triggers["A"].deltas if vd.name.startswith("T_")]
    tq = [vd for vd in square.plan.triggers["A"].deltas if vd.name.startswith("T_")]
    assert {vd.strategy.value for vd in ts} == {"hybrid"}
    assert {vd.strategy.value for vd in tq} == {"incr"}


@pytest.mark.parametrize("model", ["exp", "linear", "skip=2", "skip=4", "auto"])
def test_models_agree_after_updates(model):
    prog = linview.compile(GENERAL.format(k=6), name="g", model=model, dims={"n": 7, "p": 2})
    rng = np.random.default_rng(5)
    A = 0.6 * np.eye(7) + 0.2 * rng.standard_normal((7, 7)) / np.sqrt(7)
    B, T0 = rng.standard_normal((7, 2)), rng.standard_normal((7, 2))
    v = prog.load(A=A, B=B, T0=T0)
    for _ in range(4):
        u, w = rng.standard_normal(7) * 0.05, rng.standard_normal(7) * 0.05
        v.update("A", u, w)
        A = A + np.outer(u, w)
    T = T0
    for _ in range(6):
        T = A @ T + B
    np.testing.assert_allclose(v["T"], T, rtol=1e-9, atol=1e-12)
    assert v.verify() < 1e-9


def test_models_change_the_program_shape():
    src = POWER.format(k=16)
    views = {mdl: [s.name for s in linview.compile(src, name="t", model=mdl).program.statements]
             for mdl in ("exp", "linear", "skip=4")}
    assert len(views["exp"]) == 4 and len(views["linear"]) == 15 and len(views["skip=4"]) == 5


def test_cost_report_needs_dims_and_lists_them():
    prog = linview.compile(OLS, name="ols", dims={"n": 10})
    with pytest.raises(linview.CompileError, match="missing: m, p"):
        cost_report(prog)


def test_auto_model_is_chosen_by_cost():
    def views(p_):
        prog = linview.compile(GENERAL.format(k=16), name="g", model="auto",
                               dims={"n": 2000, "p": p_})
        return {s.name for s in prog.program.statements}
    # square iterates: jumps T_2i = P_i T_i + S_i B (exp or skip model, thesis Fig. 6.8)
    assert {"A_pow2", "A_sum2"} <= views(2000)
    # thin iterates: steps of at most two with dense deltas (thesis Fig. 6.7: linear
    # HYBRID); no n×n squarings beyond A² (whose maintenance is rank 2)
    assert not {"A_pow4", "A_pow8", "A_sum4"} & views(1)
