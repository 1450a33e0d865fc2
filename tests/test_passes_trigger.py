"""Unit tests of the trigger passes, one pass at a time.

Each pass is checked for (a) semantic preservation: the expression before and after
evaluates to the same matrix on the reference interpreter (``linview.compiler.interp``)
with random data, and (b) the structural property it promises:

* ``push_transposes``: no transpose above a product, sum, negation, scaling or inverse,
  nor above a view known to be symmetric;
* ``distribute``: no sum, negation or scaling multiplied by a thin factor;
* ``ChainPlanner.order``: the flop count of the chosen association of a product chain is
  the minimum over every parenthesisation (brute force), scalings and signs float out of
  chains, and subchains already built by the same planner are reused;
* ``merge_common_factors``: terms sharing a factor are merged, ``Σ P Qᵀ`` unchanged;
* ``woodbury_terms``: ``W + ΔW = inv(A + P Qᵀ)`` with one rank-r term and an r×r core.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from oracle.irgen import ONE, World, brute_force_min, expressions, k, m, n, p, worlds

from linview.compiler import interp, ir
from linview.compiler.delta import Strategy, Term, ViewDelta, merge_common_factors, woodbury_terms
from linview.compiler.ir import Node, Op
from linview.compiler.optimize import ChainPlanner, Sizes, distribute, push_transposes
from linview.compiler.shapes import dim

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-9


def value(e: Node, world: World) -> np.ndarray:
    return interp.eval_node(e, world.env(e), world.bindings)


def assert_close(got, want, what: str = "") -> None:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    assert err <= TOL, f"{what}: relative error {err:.3g}"


def has_factor(e: Node) -> bool:
    return any(x.op is Op.FACTOR for x in e.walk())


def floats_out(e: Node) -> bool:
    """A negation or a (non-1x1) scaling, which passes should move out of products."""
    return e.op in (Op.NEG, Op.SCALE) and not e.is_scalar


# ------------------------------------------------------------------ push_transposes
PUSHED = (Op.MUL, Op.ADD, Op.SUB, Op.NEG, Op.SCALE, Op.INV)


def assert_transposes_at_leaves(e: Node, symmetric: set[str]) -> None:
    for x in e.walk():
        if x.op is Op.T:
            child = x.children[0]
            assert child.op not in PUSHED, f"transpose above {child.op.value}: {e}"
            assert not (child.op in (Op.VIEW, Op.INPUT) and child.attr in symmetric), \
                f"transpose of symmetric {child.attr} kept: {e}"


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_push_transposes_preserves_value_and_leaves_no_transpose_above_a_product(data):
    world = data.draw(worlds())
    e = data.draw(expressions(world))
    if data.draw(st.booleans()):
        e = ir.transpose(e)
    note(repr(e))
    out = push_transposes(e, set(world.symmetric))
    note(repr(out))
    assert_close(value(out, world), value(e, world), "push_transposes")
    assert_transposes_at_leaves(out, world.symmetric)


def test_push_transposes_through_a_block_matrix():
    world = World({"n": 3, "m": 2, "p": 4, "k": 1}, seed=7)
    A = ir.Node(Op.INPUT, (), "A0_n_m", (n, m))
    B = ir.Node(Op.INPUT, (), "A0_m_n", (m, n))
    C = ir.Node(Op.INPUT, (), "A1_n_n", (n, n))
    blocks = ir.Node(Op.CONCAT, (ir.matmul(A, B), C, ir.neg(C), ir.matmul(C, C)), (2, 2))
    e = ir.transpose(blocks)
    out = push_transposes(e)
    assert_close(value(out, world), value(e, world), "T([AB, C; -C, CC])")
    assert_transposes_at_leaves(out, set())
    assert out.op is Op.CONCAT


def test_push_transposes_drops_the_transpose_of_a_symmetric_view():
    S = ir.view("S", (n, n))
    x = ir.view("x", (n, ONE))
    out = push_transposes(ir.transpose(ir.matmul(S, x)), {"S"})
    assert out is ir.matmul(ir.transpose(x), S)


# ------------------------------------------------------------------ distribute
def assert_distributed(e: Node) -> None:
    for x in e.walk():
        if x.op is not Op.MUL:
            continue
        a, b = x.children
        if has_factor(b):
            assert a.op not in (Op.ADD, Op.SUB), f"sum times a thin factor: {x}"
        if has_factor(a):
            assert b.op not in (Op.ADD, Op.SUB), f"thin factor times a sum: {x}"
        if has_factor(a) or has_factor(b):
            assert not floats_out(a) and not floats_out(b), f"sign or scaling kept in: {x}"


@st.composite
def thin_products(draw, world: World) -> Node:
    """A sum, negation or scaling times an expression holding a thin factor (either side),
    inside a random context; or just a random expression."""
    if draw(st.integers(0, 3)) == 0:
        return draw(expressions(world))
    r, j = draw(st.sampled_from([n, m, p])), draw(st.sampled_from([n, m]))
    form = draw(st.sampled_from(["add", "sub", "neg", "scale"]))
    a = draw(expressions(world, max_depth=2, shape=(r, j)))
    if form in ("add", "sub"):
        b = draw(expressions(world, max_depth=2, shape=(r, j)))
        x = ir.node(Op.ADD if form == "add" else Op.SUB, a, b)
    elif form == "neg":
        x = ir.node(Op.NEG, a)
    else:
        x = ir.node(Op.SCALE, draw(expressions(world, max_depth=1, shape=(ONE, ONE))), a)
    thin = ir.factor(f"F_{j}", (j, k))
    if draw(st.booleans()):
        thin = ir.matmul(draw(expressions(world, max_depth=1, shape=(j, j))), thin)
    e = ir.matmul(x, thin)
    if draw(st.booleans()):
        e = ir.matmul(ir.transpose(thin), ir.transpose(x))
    if draw(st.booleans()):
        e = ir.add(e, draw(expressions(world, max_depth=2, shape=e.shape)))
    return e


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_distribute_preserves_value_and_never_multiplies_a_sum_by_a_thin_factor(data):
    world = data.draw(worlds())
    e = data.draw(thin_products(world))
    note(repr(e))
    out = distribute(e)
    note(repr(out))
    assert_close(value(out, world), value(e, world), "distribute")
    assert_distributed(out)


def test_distribute_keeps_the_n_by_n_sum_out_of_a_trigger():
    """``(A + U Vᵀ) P`` becomes ``A P + U (Vᵀ P)``-shaped: no sum of n×n matrices."""
    A = ir.view("A", (n, n))
    U, V, P = (ir.factor(x, (n, k)) for x in ("U", "V", "P"))
    e = ir.matmul(ir.add(A, ir.matmul(U, ir.transpose(V))), P)
    out = distribute(e)
    assert out.op is Op.ADD
    assert out.children[0] is ir.matmul(A, P)
    world = World({"n": 4, "m": 1, "p": 1, "k": 2}, seed=3)
    assert_close(value(out, world), value(e, world), "distribute")


# ------------------------------------------------------------------ ChainPlanner.order
def chain_cost(e: Node, sizes: Sizes) -> float:
    """Flops of a product tree, counting every product node (no sharing)."""
    if e.op is not Op.MUL:
        return 0.0
    a, b = e.children
    r, inner = sizes.value(a.rows), sizes.value(a.cols)
    c = sizes.value(b.cols)
    return chain_cost(a, sizes) + chain_cost(b, sizes) + 2 * r * inner * c




def inorder(e: Node) -> list[Node]:
    return inorder(e.children[0]) + inorder(e.children[1]) if e.op is Op.MUL else [e]


@settings(max_examples=200, **SETTINGS)
@given(d=st.lists(st.integers(1, 12), min_size=3, max_size=7), seed=st.integers(0, 2**16),
       left=st.booleans())
def test_chain_order_is_the_brute_force_minimum(d, seed, left):
    syms = [dim(f"c{i}") for i in range(len(d))]
    bindings = {s.name: v for s, v in zip(syms, d, strict=True)}
    fs = [ir.Node(Op.INPUT, (), f"M{i}", (syms[i], syms[i + 1])) for i in range(len(d) - 1)]
    chain = fs[0]
    if left:  # ((M0 M1) M2) ...
        for f in fs[1:]:
            chain = ir.matmul(chain, f)
    else:  # M0 (M1 (M2 ...))
        chain = fs[-1]
        for f in reversed(fs[:-1]):
            chain = ir.matmul(f, chain)
    sizes = Sizes(bindings)
    out = ChainPlanner(sizes).order(chain)
    assert inorder(out) == fs, "the factors must keep their order"
    assert math.isclose(chain_cost(out, sizes), brute_force_min(d), rel_tol=1e-12)
    world = World({**bindings, "k": 1}, seed)
    assert_close(value(out, world), value(chain, world), "ordered chain")


def assert_signs_out_of_chains(e: Node) -> None:
    for x in e.walk():
        if x.op is Op.MUL:
            assert not any(floats_out(c) for c in x.children), f"scaling inside a chain: {x}"


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_chain_order_preserves_value_and_floats_scalings_out(data):
    world = data.draw(worlds())
    e = data.draw(expressions(world))
    note(repr(e))
    out = ChainPlanner(Sizes(world.bindings)).order(e)
    note(repr(out))
    assert_close(value(out, world), value(e, world), "order")
    assert_signs_out_of_chains(out)


def test_chain_planner_reuses_a_subchain_it_built_before():
    """Without sharing, ``C B x`` (1×n, n×n, n×2) is cheapest as ``(C B) x``; once the
    same planner has built ``B x`` for another expression, it is free and reused."""
    C = ir.Node(Op.INPUT, (), "C", (ONE, n))
    B = ir.Node(Op.INPUT, (), "B", (n, n))
    x = ir.Node(Op.INPUT, (), "x", (n, dim("two")))
    sizes = Sizes({"n": 50, "two": 2})
    chain = ir.matmul(ir.matmul(C, B), x)
    assert ChainPlanner(sizes).order(chain).children[0] is ir.matmul(C, B)
    planner = ChainPlanner(sizes)
    bx = planner.order(ir.matmul(B, x))
    assert planner.order(chain) is ir.matmul(C, bx)


# ------------------------------------------------------------------ merge_common_factors
P_POOL = ["F_n", "G_n", "AF_n", "-F_n"]
Q_POOL = ["F_m", "G_m", "AF_m", "-G_m"]


def factor_expr(name: str, rows) -> Node:
    if name.startswith("-"):
        return ir.neg(factor_expr(name[1:], rows))
    if name.startswith("A"):
        return ir.matmul(ir.Node(Op.INPUT, (), f"A0_{rows}_{rows}", (rows, rows)),
                         factor_expr(name[1:], rows))
    return ir.factor(name, (rows, k))


def outer_sum(terms: list[Term], world: World) -> np.ndarray:
    return sum(value(t.P, world) @ value(t.Q, world).T for t in terms)


@settings(max_examples=150, **SETTINGS)
@given(world=worlds(), shared=st.sampled_from(["none", "P", "Q"]),
       pairs=st.lists(st.tuples(st.sampled_from(P_POOL), st.sampled_from(Q_POOL)),
                      min_size=1, max_size=6))
def test_merge_common_factors_preserves_the_sum_and_merges_shared_factors(world, shared,
                                                                          pairs):
    if shared == "P":  # every term has the same left factor and distinct right factors,
        # signed or not (Q and -Q both would cancel: merged by Q first, to P - P)
        qs = {q.lstrip("-"): q for _, q in pairs}
        pairs = [(pairs[0][0], q) for q in qs.values()]
    elif shared == "Q":
        pairs = [(p, pairs[0][1]) for p, _ in pairs]
    terms = [Term(factor_expr(a, n), factor_expr(b, m)) for a, b in pairs]
    out = merge_common_factors(terms)
    note(f"{terms} -> {out}")
    assert_close(outer_sum(out, world), outer_sum(terms, world), "Σ P Qᵀ")
    assert 1 <= len(out) <= len(terms)
    unsigned = [t.P.children[0] if t.P.op is Op.NEG else t.P for t in out]
    assert len({id(p) for p in unsigned}) == len(out), "two terms with the same left factor"
    assert all(t.Q.op is not Op.NEG for t in out), "signs belong to the left factor"
    if shared in ("P", "Q"):
        assert len(out) == 1, "terms sharing a factor must be merged into one"


def test_merge_common_factors_merges_a_shared_left_factor_with_a_negated_right_one():
    terms = [Term(factor_expr("F_n", n), factor_expr("F_m", m)),
             Term(factor_expr("F_n", n), factor_expr("-G_m", m))]
    out = merge_common_factors(terms)
    world = World({"n": 3, "m": 2, "p": 1, "k": 1}, seed=5)
    assert_close(outer_sum(out, world), outer_sum(terms, world), "Σ P Qᵀ")
    assert len(out) == 1


def test_merge_common_factors_keeps_distinct_terms():
    terms = [Term(factor_expr("F_n", n), factor_expr("F_m", m)),
             Term(factor_expr("G_n", n), factor_expr("G_m", m))]
    assert merge_common_factors(terms) == terms


# ------------------------------------------------------------------ woodbury_terms
def woodbury_case(world: World, dense: bool) -> tuple[list[Term], dict, np.ndarray]:
    size, r = world.bindings["n"], world.bindings["k"]
    rng = np.random.default_rng(world.seed)
    A = np.eye(size) + 0.3 * rng.standard_normal((size, size)) / np.sqrt(size)
    target = ir.Node(Op.INPUT, (), "A", (n, n))
    if dense:  # a HYBRID / re-evaluated argument: ΔA = D · I
        left, right = ir.factor("D_A", (n, n)), ir.eye(n)
        P, Q = 0.3 * rng.standard_normal((size, size)) / size, np.eye(size)
    else:
        left, right = ir.factor("U_A", (n, k)), ir.factor("V_A", (n, k))
        P = 0.3 * rng.standard_normal((size, r)) / np.sqrt(size)
        Q = 0.3 * rng.standard_normal((size, r)) / np.sqrt(size)
    arg = ViewDelta("A", target, Strategy.INCR, (Term(left, right),), left, right)
    terms = woodbury_terms(ir.view("W", (n, n)), arg)
    env = {"W": np.linalg.inv(A), left.attr: P}
    if right.op is Op.FACTOR:
        env[right.attr] = Q
    return terms, env, np.linalg.inv(A + P @ Q.T)


@settings(max_examples=100, **SETTINGS)
@given(world=worlds(), dense=st.booleans())
def test_woodbury_terms_give_the_inverse_of_the_updated_matrix(world, dense):
    terms, env, want = woodbury_case(world, dense)
    delta = sum(interp.eval_node(t.P, env, world.bindings)
                @ interp.eval_node(t.Q, env, world.bindings).T for t in terms)
    assert_close(env["W"] + delta, want, "W + ΔW vs inv(A + P Qᵀ)")


def test_woodbury_terms_have_the_rank_of_the_update_and_an_r_by_r_core():
    terms, _, _ = woodbury_case(World({"n": 4, "m": 1, "p": 1, "k": 2}, 0), dense=False)
    assert len(terms) == 1
    assert sp.simplify(terms[0].rank - k) == 0
    cores = [x for t in terms for e in (t.P, t.Q) for x in e.walk() if x.op is Op.INV]
    assert len(cores) == 1
    assert cores[0].shape == (k, k), "the inverted core must be r×r, never n×n"


@pytest.mark.parametrize("r", [1, 3])
def test_woodbury_terms_for_rank_one_and_higher(r):
    world = World({"n": 5, "m": 1, "p": 1, "k": r}, seed=11)
    terms, env, want = woodbury_case(world, dense=False)
    delta = sum(interp.eval_node(t.P, env, world.bindings)
                @ interp.eval_node(t.Q, env, world.bindings).T for t in terms)
    assert_close(env["W"] + delta, want, f"rank {r}")


def test_brute_force_reference_on_the_textbook_example():
    """The reference itself, on the textbook example (10×30, 30×5, 5×60)."""
    assert brute_force_min([10, 30, 5, 60]) == 2 * (10 * 30 * 5 + 10 * 5 * 60)


def test_a_dense_delta_multiplies_views_by_vectors_only():
    """markov's p = (P^8)ᵀ p0 is kept by a dense delta: every product with the n×n view
    P_pow4 in it is a matrix-vector product (its factor expressions, which no backend
    evaluates, once lent it the thin product P_pow4ᵀ V as if already computed, and the
    sum (Uᵀ P_pow4ᵀ + ...) p0 was multiplied out as a 4-column product)."""
    import linview
    from linview.compiler.delta import Strategy
    from linview.compiler.ir import Op

    prog = linview.compile_file("examples/markov.m", dims={"n": 2000})
    vd = next(d for d in prog.plan.triggers["P"].deltas if d.name == "p")
    assert vd.strategy is Strategy.HYBRID
    products = [m for m in vd.dense.walk() if m.op is Op.MUL]
    with_view = [m for m in products if any(
        (c.children[0] if c.op is Op.T else c).op is Op.VIEW
        and (c.children[0] if c.op is Op.T else c).attr == "P_pow4" for c in m.children)]
    assert len(with_view) == 2
    assert all(m.cols == 1 for m in with_view)
