"""Which values of a program stay sparse, and why (sparse follows the data).

An input stored ``sparse`` or ``stochastic`` (a pragma, or given as ``scipy.sparse`` at
``load()``: :func:`linview.specialize.follow_sparse`) stays sparse through the operations
where GNU Octave keeps a sparse matrix sparse; :data:`KEEPS_SPARSE` is that table, read by
the module's printer (``backends/numpy/solve_codegen.py``), by ``explain`` and by ``cost``,
so the three agree.  Everything else of a sparse operand is computed densely: a product
with a dense operand gives a dense result without densifying the sparse one; the other
operations (``inv``, elementwise functions, ...) densify it, which the program asked for
and :func:`densified` reports.
"""

from __future__ import annotations

from linview.compiler import ir
from linview.compiler.ir import Node, Op

#: op -> when the result is sparse: "all" non-1x1 operands sparse, or "any" of them
KEEPS_SPARSE = {Op.ADD: "all", Op.SUB: "all", Op.MUL: "all", Op.NEG: "any", Op.T: "any",
                Op.SCALE: "any", Op.EMUL: "any"}

#: ops that take a sparse operand as it is and give a dense result of their own size
#: (a product with a dense matrix, sums, a sum with a dense matrix)
SPARSE_OPERAND = frozenset({Op.MUL, Op.ADD, Op.SUB, Op.SUM, Op.SOLVE})

#: why an input is stored sparse when ``compile``'s ``sparse=`` does not say
DECLARED = {"sparse": "declared '%#linview sparse'",
            "stochastic": "declared '%#linview stochastic'"}


def sparse_nodes(root: Node, sparse_leaves: set[str]) -> set[int]:
    """The ids of the nodes of ``root`` whose value is sparse, given the names of the
    sparse inputs and views (``eye(n)`` is sparse, as in Octave)."""
    out: set[int] = set()
    for n in root.walk():
        if n.op in (Op.INPUT, Op.VIEW):
            sparse = n.attr in sparse_leaves
        elif n.op is Op.EYE:
            sparse = n.rows == n.cols
        else:
            rule = KEEPS_SPARSE.get(n.op)
            kids = [c for c in n.children if not c.is_scalar]
            flags = [id(c) in out for c in kids]
            sparse = bool(kids) and rule is not None and (
                all(flags) if rule == "all" else any(flags))
        if sparse:
            out.add(id(n))
    return out


def input_reasons(program: ir.Program, given: dict | None) -> dict[str, str]:
    """``{input: why it is sparse}`` for every input not stored densely."""
    given = given or {}
    return {d.name: given.get(d.name) or DECLARED[d.storage]
            for d in program.inputs if d.storage != "dense"}


def sparse_views(program: ir.Program, given: dict | None = None) -> dict[str, str]:
    """``{view: why it is sparse}``: the statements whose value stays sparse, each with the
    sparse inputs it reads (e.g. ``reads sparse input M (given as scipy.sparse at load)``)."""
    reasons = input_reasons(program, given)
    sparse: set[str] = set(reasons)
    reads: dict[str, set[str]] = {n: {n} for n in reasons}
    out: dict[str, str] = {}
    for st in program.statements:
        srcs = set().union(*(reads.get(leaf.attr, set())
                             for leaf in ir.leaves(st.expr, Op.INPUT, Op.VIEW)))
        reads[st.name] = srcs
        if st.expr.op is not Op.SOLVE and id(st.expr) in sparse_nodes(st.expr, sparse):
            sparse.add(st.name)
            out[st.name] = "; ".join(f"reads sparse input {m} ({reasons[m]})"
                                     for m in sorted(srcs)) or "eye"
    return out


def densified(program: ir.Program, given: dict | None = None) -> list[tuple[str, str]]:
    """``(view, operation)`` for every operation that makes a sparse operand dense (the
    program asks for a dense value there, e.g. ``inv`` of a sparse matrix)."""
    from linview.compiler.printer import fmt

    sparse = set(input_reasons(program, given)) | set(sparse_views(program, given))
    out = []
    for st in program.statements:
        ids = sparse_nodes(st.expr, sparse)
        for n in st.expr.walk():
            if id(n) in ids or n.op in SPARSE_OPERAND or n.op in ir.LEAVES:
                continue
            if any(id(c) in ids for c in n.children):
                out.append((st.name, fmt(n)))
    return out
