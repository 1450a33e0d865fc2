"""What ``explain`` adds for a program with solve views or sparse inputs: each solve view's
A, its form, method and tolerance; which inputs and views are sparse and why; where the
program asks for a dense value of a sparse operand."""

from __future__ import annotations

from linview.compiler import ir
from linview.compiler.ir import Op
from linview.solve.evaluate import pagerank_form
from linview.solve.sparsity import densified, input_reasons, sparse_views

METHODS = {"auto": "push when A = I - s·M with 0 ≤ s < 1 and M stochastic, or sparse, "
                   "non-negative with column sums ≤ 1 at load; else krylov",
           "push": "Gauss–Southwell push, certified L1 bound",
           "krylov": "warm-started GMRES, certified 2-norm bound where A's conditioning is "
                     "certified (see docs/solve_views.md)",
           "cholesky": "Cholesky factor of FᵀF by rank-1 updates and downdates, corrected "
                        "seminormal equations"}


def explain_solves(program: ir.Program, given: dict | None = None) -> str:
    """The solve views and sparse values of ``program`` (``given``: the inputs made sparse
    by ``compile(sparse=...)``, with their reasons)."""
    from linview.compiler.printer import fmt

    lines = ["", "solve views and sparse values (kept by the module's solve side, through "
             "the solvers of linview/solve/):"]
    for st in program.statements:
        if st.expr.op is Op.SOLVE:
            method, tol = st.expr.attr
            a = st.expr.children[0]
            shape = "I - s·M" if pagerank_form(a, program, ("stochastic", "sparse")) \
                else "general"
            lines.append(f"  {st.name}: solve view, A = {fmt(a)} ({shape}), method {method}"
                         f" ({METHODS[method]}), tolerance {tol:g}")
    for name, why in input_reasons(program, given).items():
        storage = program.input(name).storage
        lines.append(f"  input {name}: {storage} ({why})")
    for name, why in sparse_views(program, given).items():
        lines.append(f"  {name}: sparse: {why}")
    for name, what in densified(program, given):
        lines.append(f"  {name}: dense: '{what}' needs a dense value of a sparse operand "
                     "(the program asks for it)")
    return "\n".join(lines) + "\n"
