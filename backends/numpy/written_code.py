"""The as-written evaluation of a generated NumPy module: ``_evaluate_written`` (the
program's own statements, loops step by step, in the order written, on the current inputs)
and ``AS_WRITTEN`` (the predicted seconds the runtime starts from).

An iterative model rewrites a program before it is maintained (``p = P' * p`` thirty times
becomes powers ``P'^2``, ``P'^4`` and a few products with them).  Re-evaluating the
rewritten program computes those powers, matrix products the program as written never
makes; so a module that finds maintenance slower than re-running the program needs the
program as written to switch to (``backends/numpy/adaptive.py``).  The method returns the
outputs only, keyed by the views that hold them; the runtime re-evaluates the other views
when something reads them.  Emitted only when the compiled program differs from the one
written (else ``_evaluate`` is that program).
"""

from __future__ import annotations

from linview.backends.common import Namer, shared_nodes
from linview.backends.numpy.reevaluation import statement_lines
from linview.compiler import passes
from linview.compiler.ir import Op
from linview.compiler.timemodel import solvable


def attribute_lines(plan) -> list[str]:
    """``AS_WRITTEN = {input: (maintain_s, written_s, threads)}``: the predictions of
    :func:`linview.compiler.cost.as_written`."""
    info = plan.written
    if info is None or not info.predicted:
        return []
    parts = ", ".join(f"{x!r}: ({m:.3g}, {w:.3g}, {t!r})"
                      for x, (m, w, t) in info.predicted.items())
    return ["    # predicted seconds: (maintaining, the program as written, its BLAS threads)",
            "    AS_WRITTEN = {" + parts + "}"]


def method_lines(gen) -> list[str]:
    """``_evaluate_written(d, inputs)`` for the generator ``gen``'s plan, or nothing when
    the compiled program is the one written."""
    info = gen.plan.written
    if info is None or info.program is None:
        return []
    prog = info.program
    names = Namer()
    for dcl in prog.inputs:
        names("view", dcl.name)
    for st in prog.statements:
        names("view", st.name)
    ind = " " * 8
    lines = ["",
             "    def _evaluate_written(self, d, inputs):",
             '        """The program as written (its statements in order, loops step by '
             'step): the',
             "        outputs, by the views that hold them (see "
             'backends/numpy/written_code.py)."""']
    sizes = _sizes_from_shapes(prog, gen.prog)
    if sizes is None:
        return []
    if sizes:  # sizes the compiled program names otherwise (n = rows(A) unified another way)
        lines.append(f"{ind}d = dict(d, " + ", ".join(f"{k}={v}" for k, v in sizes.items())
                     + ")")
    for dcl in prog.inputs:
        lines.append(f"{ind}{names('view', dcl.name)} = inputs[{dcl.name!r}]")
    order = passes.evaluation_order(prog, gen.plan.sizes)
    ex = gen.PRINTER(names, lines, ind, trigger=False,
                     shared=shared_nodes([e for _, e in order]))
    solved = {st.name: st.expr.children[0] for st in prog.statements
              if st.name in solvable(prog)}
    for (name, expr), st in zip(order, prog.statements, strict=True):
        statement_lines(ex, lines, ind, names, prog.filename, name, expr, st, solved)
    held = dict(gen.prog.outputs)  # output -> the compiled module's view or input
    lines.append(f"{ind}return {{")
    for out, node in prog.outputs:
        view = held[out]
        if view.op is Op.VIEW:  # an output that is an input needs nothing
            lines.append(f"{ind}    {view.attr!r}: {names('view', node.attr)},")
    lines.append(f"{ind}}}")
    return lines


def _sizes_from_shapes(written, compiled) -> dict[str, str] | None:
    """``{size: code}`` reading from an input's shape each size of the program as
    written that the compiled program does not bind (None when one is no input's rows or
    columns: then no as-written evaluation is emitted)."""
    known = {s.name for s in compiled.dim_symbols}
    out = {}
    for sym in sorted(written.dim_symbols, key=lambda s: s.name):
        if sym.name in known:
            continue
        where = next((f"inputs[{d.name!r}].shape[{i}]" for d in written.inputs
                      for i, e in enumerate(d.shape) if e == sym), None)
        if where is None or not sym.name.isidentifier():
            return None
        out[sym.name] = where
    return out
