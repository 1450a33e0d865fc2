"""The memory budget: what ``load()`` and ``bench`` would allocate, known before they do.

Every view of a compiled program has a shape in the program's sizes, and the sizes are bound
by ``dims`` or by the inputs' shapes; the bytes an input takes are known from the data (a
``scipy.sparse`` input that the program keeps dense is densified: rows × cols × 8).  So the
bytes of every input copy and every view are known before anything is allocated
(:func:`linview.compiler.counts.held_views`).  Beyond the budget, linview refuses with
:class:`~linview.errors.MemoryBudgetError`, naming the statements that need the memory, their
shapes and bytes, and what to write instead.  See ``docs/memory.md``.

The budget is, in order: ``load(..., memory_budget=...)``; the command line's
``--memory-budget`` (:func:`set_default`); the environment variable ``LINVIEW_MEMORY_BUDGET``;
half of this machine's physical memory.  A size is a number of bytes or a number with a
binary unit: ``512M``, ``8G``, ``1.5T`` (K, M, G, T are 2¹⁰, 2²⁰, 2³⁰, 2⁴⁰; ``8GiB`` and
``8GB`` read as ``8G``).
"""

from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass

from linview.errors import InputError, MemoryBudgetError

# NumPy, SciPy and the compiler are imported where they are used: the command line reads
# --memory-budget before ``linview run`` sets the BLAS threads, which must precede NumPy.

ENV = "LINVIEW_MEMORY_BUDGET"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
#: the budget the command line's --memory-budget set for this process (None: not set)
_default: int | None = None
#: how many statements (or inputs) a refusal lists, the largest first
SHOWN = 4


def parse_size(text, what: str = "memory budget") -> int:
    """``"8G"`` -> 8·2³⁰; a number of bytes as it is.  Bad text is an :class:`InputError`."""
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        if text > 0:
            return int(text)
        raise InputError(f"the {what} must be positive, got {text}")
    m = _SIZE.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"bad {what} {text!r}",
                         hint="write a size in bytes or with a unit: 512M, 8G, 1.5T")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def human(nbytes: float) -> str:
    """Bytes as NumPy's messages write them: ``74.5 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return ""  # not reached


def physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def set_default(budget) -> None:
    """The budget of every later load in this process (the command line's
    ``--memory-budget``); ``None`` goes back to the environment or half the memory."""
    global _default
    _default = None if budget is None else parse_size(budget)


def resolve(budget=None) -> tuple[int | None, str]:
    """``(bytes, where it comes from)``; ``(None, ...)`` when no budget can be known."""
    if budget is not None:
        return parse_size(budget), "memory_budget"
    if _default is not None:
        return _default, "--memory-budget"
    if os.environ.get(ENV):
        return parse_size(os.environ[ENV], ENV), ENV
    mem = physical_memory()
    if mem is None:
        return None, "no budget: this system does not say its memory"
    return mem // 2, f"half of this machine's {human(mem)}"


# ------------------------------------------------------------------ what is allocated
@dataclass(frozen=True)
class Held:
    """One input copy or view: ``where`` names it as the user wrote it."""

    where: str
    name: str
    shape: tuple[int, int]
    nbytes: int
    note: str = ""


def _input_bytes(decl, value, rows: int, cols: int) -> tuple[int, str]:
    """Bytes the loaded copy of input ``decl`` takes, and a note when it is densified."""
    import numpy as np
    import scipy.sparse as sps

    if decl.storage != "dense":  # kept sparse: CSR values, column indices, row pointers
        if hasattr(value, "memory_bytes"):  # a StochasticMatrix
            return int(value.memory_bytes()), ""
        nnz = value.nnz if sps.issparse(value) else int(np.count_nonzero(value))
        return int(12 * nnz + 8 * (rows + 1)), ""
    note = ""
    if (sps.issparse(value) or hasattr(value, "memory_bytes")) and rows * cols > 1:
        kind = "scipy.sparse" if sps.issparse(value) else type(value).__name__
        note = f"a {kind} input with {value.nnz:,} non-zeros, densified"
    return 8 * rows * cols, note


def bind_sizes(program, inputs: dict, bindings: dict) -> dict | None:
    """The program's sizes bound by ``bindings`` and the inputs' shapes; ``None`` when they
    disagree or an input's shape is not known here (``load()`` then says what is wrong)."""
    import sympy as sp

    from linview.specialize import has_shape, shape_of

    out = dict(bindings)
    for d in program.inputs:
        x = inputs.get(d.name)
        if x is not None and has_shape(x):
            got = shape_of(x)
        elif len(getattr(x, "shape", ())) == 2:  # a StochasticMatrix, another matrix type
            got = tuple(int(n) for n in x.shape)
        else:
            return None
        for axis, e in enumerate(d.shape):
            e = sp.sympify(e)
            if isinstance(e, sp.Symbol) and out.setdefault(e.name, got[axis]) != got[axis]:
                return None
    return out


def load_held(program, inputs: dict, bindings: dict) -> list[Held] | None:
    """Every input copy and view a ``load()`` of ``program`` on ``inputs`` allocates;
    ``None`` when the inputs do not tell (malformed, of another shape than the program's:
    ``load()`` itself then says what is wrong)."""
    from linview.compiler.counts import held_views

    try:
        sizes = bind_sizes(program, inputs, bindings)
        if sizes is None:
            return None
        views = held_views(program, sizes)
        out, nnz = [], {}
        for d, (rows, cols) in zip(program.inputs, views["inputs"], strict=True):
            nbytes, note = _input_bytes(d, inputs[d.name], rows, cols)
            out.append(Held(f"input {d.name}", d.name, (rows, cols), nbytes, note))
            if d.storage != "dense":
                nnz[d.name] = int(getattr(inputs[d.name], "nnz", rows * cols))
    except (KeyError, TypeError, ValueError, InputError):
        return None
    return _with_temporaries(out + _statements(program, views["statements"], nnz))


def _with_temporaries(held: list[Held]) -> list[Held]:
    """``held`` and the temporaries of evaluation: the largest view once more (an inverse
    is computed next to its argument, a product next to its operands)."""
    if not held:
        return held
    big = max(held, key=lambda h: h.nbytes)
    return [*held, Held("temporaries of evaluation (the largest view once more)",
                        f"{big.name}'s size", big.shape, big.nbytes)]


def _statements(program, shapes, nnz: dict | None = None) -> list[Held]:
    """Each statement's view, and the A of a solve view when it is dense (krylov keeps
    it; A of stochastic or sparse inputs stays sparse).  A view that stays sparse
    (:mod:`linview.solve.sparsity`; ``nnz``: the sparse inputs' non-zeros) is counted as
    the non-zeros of the sparse inputs it reads plus its diagonal, in CSR."""
    from linview.compiler import ir
    from linview.compiler.ir import Op
    from linview.solve.sparsity import sparse_views

    nnz = nnz or {}
    sparse = set(sparse_views(program)) if nnz else set()
    reads: dict[str, set[str]] = {n: {n} for n in nnz}
    out = []
    for st, (rows, cols) in zip(program.statements, shapes, strict=True):
        where = f"{program.filename}:{st.line}: {st.origin.strip()}" if st.line else st.name
        reads[st.name] = set().union(*(reads.get(leaf.attr, set()) for leaf in
                                       ir.leaves(st.expr, Op.INPUT, Op.VIEW)))
        if st.name in sparse:
            entries = sum(nnz[m] for m in reads[st.name]) + min(rows, cols)
            out.append(Held(where, st.name, (rows, cols), 12 * entries + 8 * (rows + 1),
                            "sparse"))
        else:
            out.append(Held(where, st.name, (rows, cols), 8 * rows * cols))
        if st.expr.op is Op.SOLVE and _dense_operand(program, st.expr.children[0], sparse):
            out.append(Held(where, f"{st.name} (its A)", (rows, rows), 8 * rows * rows))
    return out


def _dense_operand(program, a, sparse=frozenset()) -> bool:
    from linview.compiler.ir import Op

    storage = {d.name: d.storage for d in program.inputs if not d.scalar}
    leaves = [n for n in a.walk() if n.op in (Op.INPUT, Op.VIEW)]
    return any((n.op is Op.VIEW and n.attr not in sparse) or storage.get(n.attr) == "dense"
               for n in leaves)


def bench_held(program, bindings: dict) -> list[Held] | None:
    """The random inputs and views one ``bench`` variant allocates (dense, from dims)."""
    from linview.compiler.counts import held_views

    try:
        views = held_views(program, bindings)
    except (KeyError, TypeError):
        return None
    out = [Held(f"input {d.name}", d.name, (r, c), 8 * r * c)
           for d, (r, c) in zip(program.inputs, views["inputs"], strict=True)]
    return _with_temporaries(out + _statements(program, views["statements"]))


# ------------------------------------------------------------------ the refusal
def check(held: list[Held] | None, budget, *, program, doing: str = "load()",
          copies: int = 1) -> None:
    """Refuse (:class:`MemoryBudgetError`) when ``copies`` × the bytes of ``held`` pass the
    budget; nothing is allocated before or by this check."""
    limit, source = resolve(budget)
    if held is None or limit is None:
        return
    total = copies * sum(h.nbytes for h in held)
    if total <= limit:
        return
    raise MemoryBudgetError(_message(held, total, limit, source, program, doing, copies),
                            hint=_hint(held, program))


def _message(held, total, limit, source, program, doing, copies) -> str:
    groups: dict[str, list[Held]] = {}
    for h in held:
        groups.setdefault(h.where, []).append(h)
    ranked = sorted(groups.items(), key=lambda kv: -sum(h.nbytes for h in kv[1]))
    lines = [f"{program.name}: {doing} would allocate {human(total)} for its inputs and "
             f"views" + (f" ({copies} copies, one per strategy measured, and one more)"
                         if copies > 1 else "")
             + f", more than the memory budget of {human(limit)} ({source}); nothing was "
             "allocated.  The largest:"]
    for where, hs in ranked[:SHOWN]:
        parts = ", ".join(f"{h.name} {h.shape[0]:,}×{h.shape[1]:,} ({human(h.nbytes)}"
                          + (f"; {h.note}" if h.note else "") + ")" for h in hs[:3])
        more = f", and {len(hs) - 3} more views" if len(hs) > 3 else ""
        lines.append(f"  {where}  ->  {parts}{more}")
    return "\n".join(lines)


def _hint(held, program) -> str:
    from linview.compiler.ir import Op

    tips = []
    densified = [h.name for h in held if h.note]
    if densified:
        names = " ".join(densified)
        tips.append(f"a sparse input: {', '.join(densified)} "
                    f"{'is' if len(densified) == 1 else 'are'} sparse; declare "
                    f"'%#linview sparse {names}' (or 'stochastic' for a column-stochastic "
                    "link matrix) to keep it sparse, and A \\ b on it becomes a solve view")
    inverses = [st for st in program.statements if any(
        n.op is Op.INV for n in st.expr.walk())]
    if inverses and not densified:
        st = inverses[0]
        tips.append(f"a solve view: with '%#linview solve krylov', A \\ b at "
                    f"{program.filename}:{st.line} keeps its n×k solution instead of an n×n "
                    "inverse (A itself stays n×n unless its inputs are declared sparse)")
    tips.append("Spark: --backend spark (backend='spark') distributes the views")
    tips.append("if this machine has the memory, a larger budget: --memory-budget 64G, "
                f"load(..., memory_budget='64G') or {ENV}=64G")
    return "what to write instead:\n" + "\n".join(f"  - {t}" for t in tips)


def out_of_memory(e: MemoryError, program_name: str, doing: str = "load()"):
    """The error a stray :class:`MemoryError` becomes (memory the budget allowed, taken by
    something else, or temporaries beyond the views)."""
    limit, source = resolve()
    return MemoryBudgetError(
        f"{program_name}: out of memory during {doing} ({e or 'MemoryError'}); the views fit "
        f"the memory budget of {human(limit) if limit else 'none'} ({source}), but this "
        "machine could not allocate them with their temporaries",
        hint="lower the budget (--memory-budget, memory_budget=) so that linview refuses "
        "before allocating, free memory, or use a solve view, a sparse input or Spark")
