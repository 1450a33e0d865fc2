"""Products and sums reused inside a recomputed view (NumPy backend, ``reuse.py``).

A view a load must compute may contain a sub-expression that another program computed
and stored under its own key: ridge's ``X'*X + λI`` contains OLS's ``X'*X``.  The load
takes the largest such parts on offer (:func:`stored_parts`) and computes the rest of the
definition around them with the code the generated module would run (:func:`evaluate`:
the statement printed by the module's own printer, with each part a variable).
"""

from __future__ import annotations

import numpy as np

from linview.backends.common import Namer, shared_nodes
from linview.backends.numpy.render import ExprPrinter
from linview.compiler import interp, ir
from linview.compiler import keys as _keys
from linview.compiler.ir import Node, Op


def stored_parts(module, program, name: str, known: dict, offer) -> dict:
    """``{id(node): array}``: the largest products and sums inside view ``name``'s
    definition whose keys (:func:`keys.largest_parts`) are on offer, of the shape the
    module's sizes give them."""
    st = next(st for st in program.statements if st.name == name)
    memo: dict[int, np.ndarray] = {}

    def found(n: Node, key: str) -> bool:
        got = offer.take(key)
        want = tuple(interp.size_value(e, module.dims) for e in n.shape)
        if got is not None and got.shape == want:
            memo[id(n)] = got.to_numpy() if hasattr(got, "to_numpy") else got
        return id(n) in memo

    _keys.largest_parts(st.expr, known, program, found)
    return memo


def evaluate(module, expr: Node, views: dict, parts: dict[int, np.ndarray]):
    """``expr`` evaluated with each node whose id is in ``parts`` replaced by that array:
    the expression with those parts as views of their own, printed as the generated
    module prints statements (``ExprPrinter``) and run in the module's namespace."""
    nodes = {n_id: node for node in expr.walk() if (n_id := id(node)) in parts}
    names = {f"reused_part{i}": parts[n_id] for i, n_id in enumerate(nodes)}
    root = ir.substitute(expr, {n_id: ir.view(f"reused_part{i}", nodes[n_id].shape)
                                for i, n_id in enumerate(nodes)})
    namer, lines = Namer(), []
    ex = ExprPrinter(namer, lines, "    ", trigger=False, shared=shared_nodes([root]))
    ex.label = "reused"
    code = ex.code(root)
    leaves = sorted({n.attr for n in root.walk() if n.op in (Op.VIEW, Op.INPUT)})
    head = [f"    {namer('view', nm)} = views[{nm!r}]" for nm in leaves]
    src = "\n".join(["def part(self, d, views):", *head, *lines, f"    return {code}", ""])
    scope = dict(type(module)._evaluate_some.__globals__)
    exec(compile(src, f"<linview:{module.PROGRAM}:reuse>", "exec"), scope)  # noqa: S102
    return scope["part"](module, module.dims, {**views, **names})
