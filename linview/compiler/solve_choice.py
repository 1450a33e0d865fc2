"""Solve view or Woodbury inverse: the cost model's choice for ``A \\ B`` (in seconds).

A statement ``A \\ B`` whose A reads a sparse or stochastic input, written without a
``%#linview solve``/``tolerance`` pragma (which asks for a solve view), is kept by the
cheaper of

* a **Woodbury inverse**: ``W = inv(A)`` held dense (n×n); an update of rank k reads W
  once for its products and writes it once: ``8·n²·k`` flops over ``24·n²`` bytes;
* a **solve view**: the residual kept, the solver sweeping A: per sweep ``2·nnz(A)·p``
  flops over ``12·nnz(A) + 24·n·p`` bytes (CSR entries; the iterate, residual and
  right-hand side), :data:`PUSH_SWEEPS` sweeps' worth per update for push on ``I - s·M``
  (its work is local: an upper estimate) and :data:`KRYLOV_SWEEPS` for Krylov,

each a roofline ``max(flops / rate, bytes / rate) + a call`` at the machine's calibrated
one-thread rates (:mod:`.calibrate`).  Sizes not bound are :data:`DEFAULT_SIZE`, as
elsewhere in the cost model, except the right-hand side's columns ``p``: one (a vector,
the usual case), as the inverse's ``W·B`` is not priced either.  ``nnz(A)`` is the sum
of its sparse inputs' non-zeros (``nnz_X`` of ``dims``: counted from the data when
``load()`` keeps a ``scipy.sparse`` input sparse, else given by ``--dims``, else assumed
:data:`ASSUMED_PER_COLUMN` per column) and ``n²`` for its dense operands.  A tie goes to
the solve view (nothing of n² is allocated for a sparse input).  The choice and its
numbers are a note of the program, which ``explain`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from linview.compiler import ir
from linview.compiler.calibrate import rates
from linview.compiler.ir import Node, Op
from linview.compiler.optimize import DEFAULT_SIZE

#: sweeps of A assumed per update: push's local work is at most about one sweep at the
#: tolerances of the table in docs/solve_views.md; Krylov's GMRES takes several
PUSH_SWEEPS = 1
KRYLOV_SWEEPS = 10
#: non-zeros per column assumed for a sparse input whose count nobody gave
ASSUMED_PER_COLUMN = 10


@dataclass(frozen=True)
class Choice:
    solve_view: bool
    solve_s: float  # seconds per update of the solve view
    inverse_s: float  # seconds per update of the Woodbury inverse
    note: str


def _size(e, dims: dict, unbound: int = DEFAULT_SIZE) -> int:
    e = sp.sympify(e).subs({sp.Symbol(k): v for k, v in dims.items()})
    return int(e) if not e.free_symbols else unbound


def choose(a: Node, b: Node, storage: dict[str, str], nnz: dict, dims: dict,
           push: bool, line: int = 0, rank: int = 1) -> Choice:
    """The cheaper way to keep ``A \\ B`` (see the module docstring)."""
    n, p = _size(a.rows, dims), _size(b.cols, dims, 1)
    n_text = f"n = {n:,}" + (" (assumed: not bound)" if _size(a.rows, dims, 0) == 0 else "")
    entries, counted = 0.0, []
    for leaf in {leaf.attr: leaf for leaf in ir.leaves(a, Op.INPUT)}.values():
        rows, cols = _size(leaf.rows, dims), _size(leaf.cols, dims)
        if leaf.attr in storage:
            given = nnz.get(leaf.attr)
            k = given if isinstance(given, int) and given >= 0 else ASSUMED_PER_COLUMN * cols
            entries += k
            counted.append(f"{leaf.attr}: {k:,} non-zeros"
                           + ("" if isinstance(given, int) else " (assumed)"))
        elif rows * cols > 1:
            entries += rows * cols
    entries += n if any(x.op is Op.EYE for x in a.walk()) else 0
    r = rates()

    def seconds(fl: float, by: float) -> float:
        return max(fl / r.gemm1_flops, by / r.stream1_bytes) + r.call_s

    sweeps = PUSH_SWEEPS if push else KRYLOV_SWEEPS
    solve_s = sweeps * seconds(2.0 * entries * p, 12.0 * entries + 24.0 * n * p)
    inverse_s = seconds(8.0 * n * n * rank, 24.0 * n * n)
    solve_view = solve_s <= inverse_s
    where = f"line {line}: " if line else ""
    kind = "push" if push else "krylov"
    note = (f"{where}A \\ B with A reading sparse input(s) ({'; '.join(counted)}): "
            + (f"a solve view ({kind})" if solve_view else "a Woodbury inverse inv(A)")
            + f": per update {_ms(solve_s)} as a solve view ({sweeps} sweep(s) of A, "
            f"{n_text}) against {_ms(inverse_s)} for the n×n inverse")
    return Choice(solve_view, solve_s, inverse_s, note)


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms"


__all__ = ["choose", "Choice", "PUSH_SWEEPS", "KRYLOV_SWEEPS", "ASSUMED_PER_COLUMN"]
