"""NumPy renderings of the wider Octave language's ops (``linview/compiler/ops_octave.py``):
entries of the NumPy backend's ``RENDER`` table, ``render(expr_printer, node) -> (code,
precedence)``.  Octave's conventions live in the runtime (``rt.norm``, ``rt.chol``...).

A ``while`` loop (``LOOP``) is emitted as statements before the expression that uses it:
the values it reads, then ``while True:`` with the condition, the body and the carried
variables, and the node is then the name of its result.  The views of one loop's
variables share one run of the loop within a method; so do the outputs of one ``qr`` or
``lu`` (``QR``, ``LU``), whose factorization is one line of its own.
"""

from __future__ import annotations

from linview.backends.common import shared_nodes
from linview.compiler.ir import LEAVES, Node, Op
from linview.compiler.ops_octave import PARTS, LoopSpec
from linview.compiler.plan import size_code

_ATOM = 10
_NP_MAP = {"abs": "np.abs", "sqrt": "np.sqrt", "exp": "np.exp", "log": "np.log",
           "tril": "np.tril", "triu": "np.triu"}
_NP_EBIN = {"max": "np.maximum", "min": "np.minimum", "lt": "np.less",
            "le": "np.less_equal", "gt": "np.greater", "ge": "np.greater_equal",
            "eq": "np.equal", "ne": "np.not_equal"}


def _atom(e, n: Node, i: int = 0) -> str:
    return e._wrap(n.children[i], _ATOM)


def _map(e, n: Node):
    fn, param = n.attr
    if fn == "power":
        return f"np.power({_atom(e, n)}, {float(param)!r})", _ATOM
    if fn == "not":
        return f"({_atom(e, n)} == 0).astype(float)", _ATOM
    return f"{_NP_MAP[fn]}({_atom(e, n)})", _ATOM


def _ebin(e, n: Node):
    a, b = _atom(e, n, 0), _atom(e, n, 1)
    if n.attr in ("and", "or"):
        return f"np.logical_{n.attr}({a} != 0, {b} != 0).astype(float)", _ATOM
    cast = "" if n.attr in ("max", "min") else ".astype(float)"
    return f"{_NP_EBIN[n.attr]}({a}, {b}){cast}", _ATOM


def _index(e, n: Node):
    parts = [":" if sl is None else ":".join(size_code(b) for b in sl) for sl in n.attr]
    return f"{_atom(e, n)}[{', '.join(parts)}]", _ATOM


def _loop(e, n: Node):
    spec: LoopSpec = n.attr
    # the views of one loop's variables (x, iters...) share one run of it per method
    key = (spec.cond, spec.updates, spec.carried, n.children)
    done = e.__dict__.setdefault("loops_emitted", {})
    if key in done:
        return done[key][spec.carried.index(spec.result)], _ATOM
    ind = e.indent
    names = [e.names("temp", f"w{e.count}_{p.lstrip('@')}") for p in spec.placeholders]
    e.count += 1
    values = [e.code(c) for c in n.children]
    e.lines.append(f"{ind}# while loop of line {spec.line}, evaluated as a whole")
    e.lines += [f"{ind}{name} = {value}" for name, value in zip(names, values, strict=True)]
    body: list[str] = []
    roots = [*spec.updates, spec.cond]
    steps = {id(m) for r in roots for m in r.walk() if m.op not in LEAVES and m.op is not Op.T}
    steps -= {id(r) for r in roots}  # one short line per operation in the loop's body
    inner = type(e)(e.names, body, ind + "    ", trigger=False,
                    shared=steps | shared_nodes(roots))
    inner.count = 1000 * e.count  # temporaries of the body get names of their own
    for p, name in zip(spec.placeholders, names, strict=True):
        inner.names.fixed("view", p, name)
    test = e.names("temp", f"w{e.count - 1}_test")
    body.append(f"{ind}    {test} = {inner.code(spec.cond)}")
    body += [f"{ind}    if not np.all({test} != 0):", f"{ind}        break"]
    carried = names[len(spec.outer):]
    news = [e.names("temp", f"{c}_next") for c in carried]
    for new, update in zip(news, spec.updates, strict=True):
        body.append(f"{ind}    {new} = {inner.code(update)}")
    for c, new in zip(carried, news, strict=True):
        body.append(f"{ind}    {c} = {new}")
    e.lines += [f"{ind}while True:", *body]
    done[key] = carried
    return carried[spec.carried.index(spec.result)], _ATOM


def _factor(e, n: Node):
    """One output of ``qr``/``lu``: the factorization runs once per method and argument,
    ``qr1_Q, qr1_R = rt.qr(X, economy=False)``, and the node is the name of its part."""
    part, form = n.attr
    parts = PARTS[(n.op, form)]
    key = (n.op, form, n.children[0])
    done = e.__dict__.setdefault("factors_emitted", {})
    if key not in done:
        arg = e.code(n.children[0])
        fn = n.op.value
        names = [e.names("temp", f"{fn}{e.count}_{p}") for p in parts]
        e.count += 1
        option = f"economy={form!r}" if n.op is Op.QR else f"permuted={form!r}"
        e.lines.append(f"{e.indent}{', '.join(names)} = rt.{fn}({arg}, {option})")
        done[key] = names
    return done[key][parts.index(part)], _ATOM


RENDER = {
    Op.MAP: _map,
    Op.EBIN: _ebin,
    Op.REDUCE: lambda e, n: (f"{_atom(e, n)}.{n.attr[0]}(axis={n.attr[1] - 1}, "
                             "keepdims=True)", _ATOM),
    Op.NORM: lambda e, n: (f"rt.norm({e.code(n.children[0])}, {n.attr[0]!r}, "
                           f"{n.attr[1]!r})", _ATOM),
    Op.DIAG: lambda e, n: (f"rt.diag({e.code(n.children[0])}, {n.attr!r})", _ATOM),
    Op.KRON: lambda e, n: (f"np.kron({_atom(e, n, 0)}, {_atom(e, n, 1)})", _ATOM),
    Op.CHOL: lambda e, n: (f'rt.chol({e.code(n.children[0])}, "{e.label}")', _ATOM),
    Op.PINV: lambda e, n: (f"rt.pinv({e.code(n.children[0])})", _ATOM),
    Op.QR: _factor,
    Op.LU: _factor,
    Op.INDEX: _index,
    Op.LOOP: _loop,
}
