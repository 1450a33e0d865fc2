"""Unit tests of the program passes and the symmetry analysis, one pass at a time.

Programs come from the differential suite's generator (:mod:`oracle.programs`), lowered
without any pass; each pass is checked for (a) semantic preservation on the reference
interpreter (``linview.compiler.interp``) with the generator's inputs, and (b) what it
promises:

* ``propagate_copies``: no statement copies a leaf or repeats an earlier expression;
* ``eliminate_dead_views``: exactly the statements some output depends on are kept;
* ``materialize_products``: no product chain of three or more factors is left, and the
  views it adds follow the cheapest order (brute force over every parenthesisation);
* ``symmetric_views`` / ``is_symmetric``: whatever is reported symmetric evaluates to a
  symmetric matrix, and the forms the compiler relies on (``XᵀX``, its inverse, ``Fᵀ S F``)
  are recognised.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from oracle import GenProgram, programs
from oracle.irgen import brute_force_min, expressions, worlds
from oracle.program import bindings

from linview.compiler import check, interp, ir
from linview.compiler.ir import Node, Op
from linview.compiler.lower import lower
from linview.compiler.optimize import (
    Sizes,
    eliminate_dead_views,
    is_symmetric,
    materialize_products,
    propagate_copies,
    symmetric_views,
)
from linview.compiler.shapes import dim
from linview.frontend.parser import parse

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.filter_too_much])
BOUND = 1e4  # programs whose intermediates grow beyond this are rejected
TOL = 1e-9


def lowered(source: str) -> ir.Program:
    return lower(parse(source, "prog.m"), source, "prog.m")



def assert_close(got, want, what: str) -> None:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.size:
        err = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
        assert err <= TOL, f"{what}: relative error {err:.3g}"


@st.composite
def lowered_programs(draw):
    """(generated program, its lowered IR, inputs, size bindings)."""
    p: GenProgram = draw(programs(max_statements=5))
    inputs = p.make_inputs(draw(st.integers(0, 2**32 - 1)))
    assume(p.max_magnitude(inputs) < BOUND)
    prog = lowered(p.source)
    note(p.source)
    return p, prog, inputs, bindings(prog, inputs)


def outputs_of(program: ir.Program, inputs, sizes) -> dict[str, np.ndarray]:
    values = interp.evaluate(program, inputs, sizes)
    return {name: values[name] for name, _ in program.outputs}


def assert_same_outputs(before: ir.Program, after: ir.Program, inputs, sizes, what):
    want, got = outputs_of(before, inputs, sizes), outputs_of(after, inputs, sizes)
    assert list(got) == list(want)
    for name in want:
        assert_close(got[name], want[name], f"{what}: output {name}")


def view_refs(n: Node) -> set[str]:
    return {leaf.attr for leaf in ir.leaves(n, Op.VIEW)}


# ------------------------------------------------------------------ propagate_copies
@settings(max_examples=60, **SETTINGS)
@given(case=lowered_programs())
def test_propagate_copies_preserves_outputs_and_leaves_no_copy(case):
    _, prog, inputs, sizes = case
    out = propagate_copies(prog)
    check.check_program(out, "propagate_copies")
    assert_same_outputs(prog, out, inputs, sizes, "propagate_copies")
    assert all(stmt.expr.op not in ir.LEAVES for stmt in out.statements), "a copy is left"
    exprs = [id(stmt.expr) for stmt in out.statements]
    assert len(set(exprs)) == len(exprs), "two statements compute the same expression"
    again = propagate_copies(out)
    assert again.statements == out.statements and again.outputs == out.outputs


def test_propagate_copies_merges_a_repeated_expression():
    prog = lowered("function [C, D] = f(A)\n  %#linview dims A(n,n)\n  B = A;\n"
                   "  C = B * B;\n  D = A * A;\nend\n")
    out = propagate_copies(prog)
    assert [stmt.name for stmt in out.statements] == ["C"]
    assert dict(out.outputs)["D"] is dict(out.outputs)["C"]
    A = np.random.default_rng(0).standard_normal((3, 3))
    assert_same_outputs(prog, out, {"A": A}, {"n": 3}, "propagate_copies")


# ------------------------------------------------------------------ eliminate_dead_views
def live_statements(program: ir.Program) -> list[str]:
    """Names of the statements some output depends on (transitive closure)."""
    defs = {stmt.name: stmt for stmt in program.statements}
    live: set[str] = set()
    todo = [name for _, node in program.outputs for name in view_refs(node)]
    while todo:
        name = todo.pop()
        if name in live or name not in defs:
            continue
        live.add(name)
        todo.extend(view_refs(defs[name].expr))
    return [stmt.name for stmt in program.statements if stmt.name in live]


@settings(max_examples=60, **SETTINGS)
@given(case=lowered_programs())
def test_eliminate_dead_views_keeps_exactly_the_live_statements(case):
    _, prog, inputs, sizes = case
    out = eliminate_dead_views(prog)
    check.check_program(out, "eliminate_dead_views")
    assert [stmt.name for stmt in out.statements] == live_statements(prog)
    kept = {stmt.name: stmt.expr for stmt in out.statements}
    assert all(stmt.expr is kept[stmt.name] for stmt in prog.statements if stmt.name in kept)
    assert_same_outputs(prog, out, inputs, sizes, "eliminate_dead_views")


def test_eliminate_dead_views_drops_an_unused_chain():
    prog = lowered("function C = f(A)\n  %#linview dims A(n,n)\n  Z = A * A;\n  W = Z + A;\n"
                   "  C = A';\nend\n")
    assert {stmt.name for stmt in prog.statements} >= {"Z", "W"}
    out = eliminate_dead_views(prog)
    assert not {"Z", "W"} & {stmt.name for stmt in out.statements}


# ------------------------------------------------------------------ materialize_products
def chains(n: Node) -> list[list[Node]]:
    """The maximal product chains under ``n`` (as factor lists)."""
    out, parents = [], {}
    for x in n.walk():
        for c in x.children:
            parents.setdefault(id(c), []).append(x)
    for x in n.walk():
        if x.op is Op.MUL and not any(q.op is Op.MUL for q in parents.get(id(x), [])):
            fs, todo = [], [x]
            while todo:
                y = todo.pop()
                if y.op is Op.MUL:
                    todo.extend(reversed(y.children))
                else:
                    fs.append(y)
            out.append(fs)
    return out


@settings(max_examples=60, **SETTINGS)
@given(case=lowered_programs())
def test_materialize_products_preserves_every_view_and_splits_long_chains(case):
    _, prog, inputs, sizes = case
    out = materialize_products(prog, Sizes(sizes))
    check.check_program(out, "materialize_products")
    before, after = interp.evaluate(prog, inputs, sizes), interp.evaluate(out, inputs, sizes)
    for stmt in prog.statements:
        assert_close(after[stmt.name], before[stmt.name], f"view {stmt.name}")
    assert_same_outputs(prog, out, inputs, sizes, "materialize_products")
    for stmt in out.statements:  # scalings and signs inside a chain included
        for c in chains(stmt.expr):
            assert len(c) <= 2, f"{stmt.name}: a chain of {len(c)} factors is left"


@pytest.mark.parametrize("body", [
    "E = A * (2 * X) * Y * A;",
    "E = -A * X * (0.5 * Y);",
    # the scaling floats out of a chain whose product is 1x1
    "E = eye(1, size(A, 1)) * A * (0.5 * eye(size(A, 1), 1));",
    "E = 3 * A * (X * 2 * Y);",  # two scalings float out, one around the other
])
def test_materialize_products_splits_a_chain_with_a_scaling_inside(body):
    prog = lowered("function E = f(A, X, Y)\n  %#linview dims A(n,n) X(n,n) Y(n,n)\n"
                   f"  {body}\nend\n")
    out = materialize_products(prog, Sizes({"n": 10}))
    assert all(len(c) <= 2 for stmt in out.statements for c in chains(stmt.expr))
    rng = np.random.default_rng(0)
    inputs = {x: rng.standard_normal((10, 10)) for x in "AXY"}
    before = interp.evaluate(prog, inputs, {"n": 10})
    after = interp.evaluate(out, inputs, {"n": 10})
    assert_close(after["E"], before["E"], "E")




def product_flops(program: ir.Program, sizes: Sizes) -> float:
    total = 0.0
    for stmt in program.statements:
        for x in stmt.expr.walk():
            if x.op is Op.MUL:
                a, b = x.children
                total += 2 * sizes.value(a.rows) * sizes.value(a.cols) * sizes.value(b.cols)
    return total


@settings(max_examples=100, **SETTINGS)
@given(d=st.lists(st.integers(1, 12), min_size=4, max_size=7), seed=st.integers(0, 2**16))
def test_materialize_products_views_follow_the_cheapest_order(d, seed):
    syms = [dim(f"c{i}") for i in range(len(d))]
    inputs = tuple(ir.InputDecl(f"M{i}", (syms[i], syms[i + 1]), dynamic=True)
                   for i in range(len(d) - 1))
    chain = inputs[0].ref
    for decl in inputs[1:]:
        chain = ir.matmul(chain, decl.ref)
    prog = ir.Program("chain", inputs, (ir.Statement("C", chain),),
                      (("C", ir.view("C", chain.shape)),))
    sizes = {s.name: v for s, v in zip(syms, d, strict=True)}
    out = materialize_products(prog, Sizes(sizes))
    check.check_program(out, "materialize_products")
    names = [stmt.name for stmt in out.statements]
    assert names[-1] == "C" and len(names) == len(inputs) - 1, names  # L-2 auxiliary views
    assert math.isclose(product_flops(out, Sizes(sizes)), brute_force_min(d), rel_tol=1e-12)
    rng = np.random.default_rng(seed)
    data = {decl.name: rng.standard_normal((d[i], d[i + 1])) / np.sqrt(d[i])
            for i, decl in enumerate(inputs)}
    assert_same_outputs(prog, out, data, sizes, "materialize_products")


def test_materialize_products_keeps_x_transpose_y_in_ols():
    """``inv(X'X) X' Y`` with m > n and p = 1 materializes the n×p product ``X'Y``."""
    prog = lowered("function beta = ols(X, Y)\n  %#linview dims X(m,n) Y(m,p)\n"
                   "  beta = (X' * X) \\ (X' * Y);\nend\n")
    out = materialize_products(prog, Sizes({"m": 400, "n": 200, "p": 1}))
    aux = [stmt for stmt in out.statements if stmt.name not in {s.name for s in prog.statements}]
    assert len(aux) == 1
    X = ir.Node(Op.INPUT, (), "X", prog.input("X").shape)
    Y = ir.Node(Op.INPUT, (), "Y", prog.input("Y").shape)
    assert aux[0].expr is ir.matmul(ir.transpose(X), Y)


# ------------------------------------------------------------------ symmetry
def is_numerically_symmetric(a: np.ndarray) -> bool:
    return a.shape[0] == a.shape[1] and bool(
        np.max(np.abs(a - a.T), initial=0.0) <= TOL * max(1.0, np.max(np.abs(a), initial=0)))


@settings(max_examples=60, **SETTINGS)
@given(case=lowered_programs())
def test_symmetric_views_are_symmetric(case):
    _, prog, inputs, sizes = case
    values = interp.evaluate(prog, inputs, sizes)
    for name in symmetric_views(prog):
        assert is_numerically_symmetric(values[name]), f"{name} is not symmetric"


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_is_symmetric_is_sound_on_random_expressions(data):
    world = data.draw(worlds())
    e = data.draw(expressions(world, factors=False))
    if is_symmetric(e, set(world.symmetric)):
        note(repr(e))
        value = interp.eval_node(e, world.env(e), world.bindings)
        assert is_numerically_symmetric(value), f"{e} is not symmetric"


SYMMETRIC_SOURCE = """function [G, H, K, L, N, Q, E, P] = f(X, A, s)
  %#linview dims X(m,n) A(n,n)
  %#linview scalar s
  G = X' * X;
  H = inv(G);
  K = X * H * X';
  L = G + s * H;
  N = -(X' * K * X);
  Q = A' * G * A;
  E = eye(size(X, 2));
  P = A' * G;
end
"""


def test_symmetric_views_recognises_the_forms_the_compiler_relies_on():
    prog = lowered(SYMMETRIC_SOURCE)
    found = symmetric_views(prog)
    assert {"G", "K", "L", "N", "Q"} <= found
    inverse = [stmt.name for stmt in prog.statements if stmt.expr.op is Op.INV]
    assert inverse and set(inverse) <= found
    assert "P" not in found
    rng = np.random.default_rng(2)
    inputs = {"X": rng.standard_normal((5, 3)), "A": rng.standard_normal((3, 3)),
              "s": np.array([[0.7]])}
    values = interp.evaluate(prog, inputs, {"m": 5, "n": 3})
    for name in found:
        assert is_numerically_symmetric(values[name]), name
    assert not is_numerically_symmetric(values["P"])
