"""Random program generation, part 3: whole function files (names, statements, loops,
header and pragmas) as the Hypothesis strategy :func:`programs`."""

from __future__ import annotations

from hypothesis import strategies as st

from oracle.expr import ATOM, ONE, PROD, SCALAR, SUM, UNARY, Dim, Ex, dim, mk, wrap
from oracle.operators import ExprGen
from oracle.program import GenProgram, InputSpec

SIZE_SYMBOLS = ("n", "m", "p")
MATRIX_INPUT_NAMES = ("A", "B", "X", "Y", "G", "Hm")
SCALAR_INPUT_NAMES = ("s", "alpha")
TARGET_NAMES = ("C", "D", "F", "R", "S", "T", "W", "Z", "Kx", "Mt", "P1", "Q2")

# An input left out of '%#linview dims' gets symbolic sizes; for a vector one of them is 1 at
# run time, and then sum(E) without a dimension means something else in Octave than what
# linview resolved at compile time (see test_sum_without_dimension_follows_octave_on_a_row,
# an open bug).  Set to True to let the properties generate such programs again.
UNDECLARED_VECTORS = False

# Valid Octave identifiers that a code generator may well use for itself (update factors,
# dims dict, rank, temporaries, modules, Python keywords, keyword arguments of the API).
# Used only with ``programs(tricky_names=True)``.
TRICKY_SIZE_SYMBOLS = ("d", "r", "rows_A", "K")  # "k" is reserved (a ParseError)
TRICKY_INPUT_NAMES = ("U", "V", "d", "k", "np", "rt", "inputs", "lambda", "self", "tolerance",
                      "U_C", "D_C", "t0", "None", "sp")
TRICKY_SCALAR_NAMES = ("k", "d", "lambda", "in", "is")
TRICKY_TARGET_NAMES = ("t0", "t1", "U", "V", "k", "d", "inputs", "self", "U_C", "V_C", "D_C",
                       "def", "class", "np", "rt", "out", "views")

def _stmt_text(name: str, ex: Ex, semicolon: bool) -> str:
    return f"{name} = {ex.src}{';' if semicolon else ''}"


def _names(draw, plain: tuple[str, ...], tricky: tuple[str, ...], count: int,
           use_tricky: bool, taken: set[str]) -> list[str]:
    """``count`` distinct names; with ``use_tricky`` each may come from ``tricky``."""
    out = []
    for _ in range(count):
        pool = [n for n in plain if n not in taken]
        if use_tricky and draw(st.integers(0, 99)) < 50:
            pool = [n for n in tricky if n not in taken] or pool
        name = pool[0] if not use_tricky and pool else draw(st.sampled_from(pool))
        taken.add(name)
        out.append(name)
    return out


@st.composite
def programs(draw, max_statements: int = 7, max_depth: int = 3,
             tricky_names: bool = False) -> GenProgram:
    """A random well-typed linview function file with its NumPy oracle.

    ``tricky_names``: inputs, statements and size symbols are sometimes named like things
    a code generator uses itself (``U``, ``V``, ``k``, ``d``, ``t0``, ``self``, ``lambda``...).
    """
    nsyms = draw(st.integers(1, 3))
    syms = _names(draw, SIZE_SYMBOLS, TRICKY_SIZE_SYMBOLS, nsyms, tricky_names, set())
    # mostly tiny; sometimes large enough for the BLAS (size > 64) and one-hot paths
    sizes = {s: draw(st.integers(2, 9)) if draw(st.integers(0, 99)) < 90 else
             draw(st.integers(10, 16)) for s in syms}

    # inputs: the first is square n×n; others random shapes over the symbols (or vectors)
    n_mat = draw(st.integers(1, 4))
    n_scal = draw(st.integers(0, 2))
    taken: set[str] = set()
    names = _names(draw, MATRIX_INPUT_NAMES, TRICKY_INPUT_NAMES, n_mat, tricky_names, taken)
    scalar_names = _names(draw, SCALAR_INPUT_NAMES, TRICKY_SCALAR_NAMES, n_scal,
                          tricky_names, taken)
    inputs: dict[str, InputSpec] = {}
    for i, nm in enumerate(names):
        if i == 0:
            shape = (dim(syms[0]), dim(syms[0]))
        else:
            r = dim(draw(st.sampled_from(syms)))
            c = draw(st.sampled_from([dim(s) for s in syms] + [ONE]))
            shape = (r, c)
        square = shape[0] == shape[1]
        kind = "dd" if square and draw(st.integers(0, 99)) >= 55 else "dense"
        declared = i == 0 or draw(st.integers(0, 99)) < 85
        if ONE in shape and not UNDECLARED_VECTORS:
            declared = True
        inputs[nm] = InputSpec(nm, shape, kind, declared)
    for nm in scalar_names:
        inputs[nm] = InputSpec(nm, SCALAR, "scalar")
    # symbols nobody carries are dropped (sizes come from size(X, d))
    carried = {s for spec in inputs.values() for d in spec.shape for s in d if s != "1"}
    sizes = {s: v for s, v in sizes.items() if s in carried}

    targets = TARGET_NAMES
    if tricky_names:
        targets = tuple(draw(st.permutations(TRICKY_TARGET_NAMES + TARGET_NAMES)))
    g = ExprGen(draw, sizes, inputs, targets)
    lines: list[str] = []
    steps: list = []
    assigned: list[str] = []
    taken = set(inputs)
    n_st = draw(st.integers(2, max_statements))
    for _ in range(n_st):
        kind = g.pick(["assign", "assign", "assign", "loop", "reassign"])
        if kind == "reassign" and assigned:
            name = g.pick(assigned)
            ex = g.expr(g.vars[name], g.int_(1, max_depth))
            lines.append("  " + _stmt_text(name, ex, g.chance(80)))
            steps.append(("assign", name, ex))
            continue
        if kind == "loop":
            _gen_loop(g, draw, lines, steps, assigned, taken, max_depth)
            continue
        name = g.fresh_name(taken)
        taken.add(name)
        shape = g.target_shape()
        ex = g.expr(shape, g.int_(1, max_depth))
        lines.append("  " + _stmt_text(name, ex, g.chance(80)))
        steps.append(("assign", name, ex))
        g.vars[name] = shape
        assigned.append(name)

    if not assigned:  # (only loops over existing names cannot happen, but be safe)
        name = g.fresh_name(taken)
        ex = g.expr((g.simple_dims[0], g.simple_dims[0]), 1)
        lines.append("  " + _stmt_text(name, ex, True))
        steps.append(("assign", name, ex))
        g.vars[name] = ex.shape
        assigned.append(name)

    outs = draw(st.lists(st.sampled_from(assigned), min_size=1, max_size=len(assigned),
                         unique=True))
    if draw(st.integers(0, 99)) >= 92:
        outs.append(draw(st.sampled_from(sorted(n for n in inputs))))
    outs = list(dict.fromkeys(outs))

    # header and pragmas
    params = draw(st.permutations(list(inputs)))
    if len(outs) == 1 and draw(st.booleans()) is False:
        head = f"function {outs[0]} = prog({', '.join(params)})"
    else:
        head = f"function [{', '.join(outs)}] = prog({', '.join(params)})"
    pragmas = []
    specs = [f"{n}({','.join(_dim_spec(d) for d in s.shape)})" for n, s in inputs.items()
             if s.kind != "scalar" and s.declared]
    if specs:
        pragmas.append("  %#linview dims " + " ".join(specs))
    scal = [n for n, s in inputs.items() if s.kind == "scalar"]
    if scal:
        pragmas.append("  %#linview scalar " + " ".join(scal))
    matrix_names = [n for n, s in inputs.items() if s.kind != "scalar"]
    if draw(st.integers(0, 99)) < 25:
        dynamic = tuple(matrix_names)  # default: every matrix input
    else:
        dyn = draw(st.lists(st.sampled_from(list(inputs)), min_size=1, unique=True))
        pragmas.append("  %#linview dynamic " + " ".join(dyn))
        dynamic = tuple(n for n in inputs if n in dyn)
    end = draw(st.sampled_from(["end", "endfunction", ""]))
    source = "\n".join([head, *pragmas, *lines, end]) + "\n"
    return GenProgram(source, "prog", sizes, inputs, dynamic, tuple(outs), steps)


def _dim_spec(d: Dim) -> str:
    assert len(d) == 1
    return d[0]


def _gen_loop(g: ExprGen, draw, lines, steps, assigned, taken, max_depth) -> None:
    """``for i = 1:K`` whose body updates 1-2 carried variables affinely:
    ``T = L(T) + F`` with ``L(T)`` one of ``M*T``, ``T*M``, ``a*T``, ``T``, and ``F`` an
    expression over the other variables (so the iterates stay bounded)."""
    n_carried = g.int_(1, 2)
    carried: list[str] = []
    for _ in range(n_carried):
        if assigned and g.chance(40):
            name = g.pick(assigned)
            if name in carried:
                continue
        else:
            name = g.fresh_name(taken)
            taken.add(name)
            shape = g.target_shape()
            init = g.expr(shape, g.int_(0, 2))
            lines.append("  " + _stmt_text(name, init, True))
            steps.append(("assign", name, init))
            g.vars[name] = shape
            assigned.append(name)
        carried.append(name)
    lo = g.int_(1, 2)
    trips = g.int_(1, 4)
    hi = lo + trips - 1
    rng_src = g.pick([f"{lo}:{hi}", f"{lo}:1:{hi}", f"({lo}:{hi})"])
    if rng_src.startswith("("):
        head = f"  for (i = {lo}:{hi})"
    else:
        head = f"  for i = {rng_src}"
    body: list[tuple[str, Ex]] = []
    body_lines = []
    g.hidden = set(carried)
    try:
        for name in carried:
            r, c = g.vars[name]
            T = mk(name, ATOM, (r, c), lambda env, n=name: env[n])
            form = g.pick(["left", "right", "scale", "plain"])
            f_ex = g.expr((r, c), g.int_(0, max_depth - 1))
            others = [o for o in carried if o != name and g.vars[o] == (r, c)]
            if others and g.chance(50):
                o = g.pick(others)
                O = mk(o, ATOM, (r, c), lambda env, n=o: env[n])
                f_ex = mk(f"{wrap(f_ex, SUM)} + 0.5 * {O.src}", SUM, (r, c),
                          lambda env, f=f_ex, O=O: f.fn(env) + 0.5 * O.fn(env))
            if form == "left":
                M = g.expr((r, r), g.int_(0, 1))
                lin = mk(f"{wrap(M, PROD)} * {T.src}", PROD, (r, c),
                         lambda env, M=M, T=T: M.fn(env) @ T.fn(env))
            elif form == "right":
                M = g.expr((c, c), g.int_(0, 1))
                lin = mk(f"{T.src} * {wrap(M, UNARY)}", PROD, (r, c),
                         lambda env, M=M, T=T: T.fn(env) @ M.fn(env))
            elif form == "scale":
                a = g.pick(["0.5", "-0.5", "0.9"])
                lin = mk(f"{a} * {T.src}", PROD, (r, c),
                         lambda env, a=a, T=T: float(a) * T.fn(env))
            else:
                lin = T
            op = g.pick(["+", "-"])
            if op == "+":
                ex = mk(f"{wrap(lin, SUM)} + {wrap(f_ex, PROD)}", SUM, (r, c),
                        lambda env, lin=lin, f=f_ex: lin.fn(env) + f.fn(env))
            else:
                ex = mk(f"{wrap(lin, SUM)} - {wrap(f_ex, PROD)}", SUM, (r, c),
                        lambda env, lin=lin, f=f_ex: lin.fn(env) - f.fn(env))
            body.append((name, ex))
            body_lines.append("    " + _stmt_text(name, ex, g.chance(80)))
    finally:
        g.hidden = set()
    end = g.pick(["end", "endfor"])
    lines.extend([head, *body_lines, f"  {end}"])
    steps.append(("loop", trips, body))
