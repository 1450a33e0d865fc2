"""NumPy backend: emits a readable Python module with one :class:`linview.backends.numpy.runtime.
TriggerModule` subclass per program.

* the constructor path ``_evaluate`` re-evaluates every view (chain-ordered products);
* ``on_update_<X>(U, V)`` computes every delta from the *old* views (phase 1), checks them,
  then applies them in place (phase 2): ``V += P Qᵀ`` through BLAS ``dger``/``dgemm`` with
  beta = 1 on Fortran-ordered float64 views, never through a temporary of the view's size;
* products of a view with the update factors go through ``rt.dot``, which reads only the
  touched columns when a factor is one-hot (row, column or cell updates);
* every statement carries a comment with its math.
"""

from __future__ import annotations

import re

import sympy as sp

from linview.backends.common import Namer, shared_nodes
from linview.backends.layout import wrap_module
from linview.compiler import printer
from linview.compiler.delta import Strategy, Trigger, ViewDelta, emitted_exprs
from linview.compiler.ir import LEAVES, Node, Op
from linview.compiler.plan import Plan, size_code, size_entry, solved_inverses

_ATOM, _UNARY, _MUL, _ADD = 10, 8, 7, 6  # Python's precedence levels, as far as used


class _Expr:
    """Prints IR nodes as NumPy code, naming shared subexpressions as temporaries."""

    def __init__(self, names: Namer, lines: list[str], indent: str, trigger: bool,
                 shared: set[int] = frozenset(), update_factors=()):
        self.names = names
        self.lines = lines
        self.indent = indent
        self.trigger = trigger
        self.shared = shared
        self.update_factors = set(update_factors)
        self.temps: dict[int, str] = {}
        self.count = 0
        self.label = ""  # the view being computed, for error messages
        self.groups: dict[int, list[Node]] = {}  # products of one view, see fuse_products
        self.defined: set[str] = set(update_factors)  # factor blocks computed so far

    def fuse_products(self, roots: list[Node]) -> None:
        """Plan one pass per view and trigger level: the products ``W F1``, ``Wᵀ F2``... of
        one view with factor blocks become ``rt.fused_dot(W, F1, F2, ops="NT")`` (one read of
        W for all of them), emitted when the first is needed, with every member whose
        factor is already computed."""
        seen: set[int] = set()
        groups: dict[int, list[Node]] = {}
        for r in roots:
            for n in r.walk():
                if id(n) in seen or n.op is not Op.MUL:
                    continue
                seen.add(id(n))
                a, b = n.children
                leaf = a.children[0] if a.op is Op.T else a
                if leaf.op in (Op.VIEW, Op.INPUT) and b.op is Op.FACTOR:
                    groups.setdefault(id(leaf), []).append(n)
        for members in groups.values():
            if len(members) > 1:
                for n in members:
                    self.groups[id(n)] = members

    def _fused(self, n: Node) -> str | None:
        """The temporary holding ``n`` after emitting its group's ``rt.fused_dot``, or None
        when fewer than two products of the group are ready."""
        ready = [m for m in self.groups[id(n)] if id(m) not in self.temps
                 and m.children[1].attr in self.defined]
        if len(ready) < 2 or n not in ready:
            # computed on its own: later passes over the view must not compute it again
            members = self.groups.pop(id(n), [])
            if n in members:
                members.remove(n)
            return None
        names = [self.names("temp", f"t{self.count + i}") for i in range(len(ready))]
        self.count += len(ready)
        a = n.children[0]
        leaf = a.children[0] if a.op is Op.T else a
        view = self.code(leaf)
        blocks = [self.names("factor", m.children[1].attr) for m in ready]
        ops = "".join("T" if m.children[0].op is Op.T else "N" for m in ready)
        math = ", ".join(f"{printer.fmt(m.children[0])} {b}" for m, b in zip(ready, blocks,
                                                                           strict=True))
        self.lines.append(f"{self.indent}# {math}: the products reading {view}, together")
        self.lines.append(f"{self.indent}{', '.join(names)} = rt.fused_dot({view}, "
                          f"{', '.join(blocks)}, ops={ops!r})")
        for m, name in zip(ready, names, strict=True):
            self.temps[id(m)] = name
        return self.temps[id(n)]

    def code(self, n: Node) -> str:
        return self._code(n)[0]

    def _wrap(self, n: Node, level: int) -> str:
        s, p = self._code(n)
        return f"({s})" if p < level else s

    def _code(self, n: Node) -> tuple[str, int]:
        if id(n) in self.temps:
            return self.temps[id(n)], _ATOM
        if id(n) in self.groups:
            name = self._fused(n)
            if name is not None:
                return name, _ATOM
        if id(n) in self.shared:
            text = self._render(n)[0]
            name = self.names("temp", f"t{self.count}")
            self.count += 1
            self.lines.append(f"{self.indent}{name} = {text}  # {printer.fmt(n)}")
            self.temps[id(n)] = name
            return name, _ATOM
        return self._render(n)

    def _render(self, n: Node) -> tuple[str, int]:
        return RENDER[n.op](self, n)


# ------------------------------------------------------------------ how each op is printed
def _leaf_name(e: _Expr, n: Node):
    return e.names("factor" if n.op is Op.FACTOR else "view", n.attr), _ATOM


def _const(e: _Expr, n: Node):
    v = sp.sympify(n.attr)
    return (repr(float(v)) if v.is_Number else f"float({size_code(v)})"), _ATOM


def _eye(e: _Expr, n: Node):
    if n.rows == n.cols:
        return f"np.eye({size_code(n.rows)})", _ATOM
    return f"np.eye({size_code(n.rows)}, {size_code(n.cols)})", _ATOM


def _filled(e: _Expr, n: Node):
    return f"np.{n.op.value}(({size_code(n.rows)}, {size_code(n.cols)}))", _ATOM


def _infix(symbol: str, level: int):
    """A left-associative NumPy infix operator (1x1 operands broadcast)."""
    def render(e: _Expr, n: Node):
        a, b = n.children
        return f"{e._wrap(a, level)} {symbol} {e._wrap(b, level + 1)}", level
    return render


def _matmul(e: _Expr, n: Node):
    a, b = n.children
    reads_view = a.op in (Op.VIEW, Op.INPUT) or (
        a.op is Op.T and a.children[0].op in (Op.VIEW, Op.INPUT))
    if e.trigger and reads_view and b.op is Op.FACTOR and b.attr in e.update_factors:
        return f"rt.dot({e.code(a)}, {e.code(b)})", _ATOM  # one-hot factors: touched columns
    return f"{e._wrap(a, _MUL)} @ {e._wrap(b, _MUL + 1)}", _MUL


def _inv(e: _Expr, n: Node):
    if e.trigger:  # a trigger's k×k core
        return f'rt.core_inv({e.code(n.children[0])}, "{e.label}")', _ATOM
    return f'rt.inv({e.code(n.children[0])}, "{e.label}", self.condition_limit)', _ATOM


def _concat(e: _Expr, n: Node):
    blocks = [f"np.full((1, 1), {e.code(c)})" if c.op is Op.CONST else e.code(c)
              for c in n.children]
    if len(n.attr) == 1:
        return "np.hstack([" + ", ".join(blocks) + "])", _ATOM
    if all(k == 1 for k in n.attr):
        return "np.vstack([" + ", ".join(blocks) + "])", _ATOM
    rows, i = [], 0
    for k in n.attr:
        rows.append("[" + ", ".join(blocks[i:i + k]) + "]")
        i += k
    return "np.block([" + ", ".join(rows) + "])", _ATOM


#: op -> ``render(expr_printer, node) -> (code, precedence)``: the NumPy meaning of each op
RENDER = {
    Op.INPUT: _leaf_name, Op.VIEW: _leaf_name, Op.FACTOR: _leaf_name,
    Op.CONST: _const, Op.EYE: _eye, Op.ZEROS: _filled, Op.ONES: _filled,
    Op.ADD: _infix("+", _ADD), Op.SUB: _infix("-", _ADD), Op.SCALE: _infix("*", _MUL),
    Op.EMUL: _infix("*", _MUL), Op.EDIV: _infix("/", _MUL),
    Op.NEG: lambda e, n: (f"-{e._wrap(n.children[0], _UNARY)}", _UNARY),
    Op.MUL: _matmul,
    Op.T: lambda e, n: (f"{e._wrap(n.children[0], _ATOM)}.T", _ATOM),
    Op.INV: _inv,
    Op.SUM: lambda e, n: (f"{e._wrap(n.children[0], _ATOM)}.sum(axis={n.attr - 1}, "
                          "keepdims=True)", _ATOM),
    Op.TRACE: lambda e, n: (f"np.full((1, 1), np.trace({e.code(n.children[0])}))", _ATOM),
    Op.CONCAT: _concat,
    # re-solved through the guarded inverse; prog.load() keeps solve views with a residual
    Op.SOLVE: lambda e, n: (f'rt.inv({e.code(n.children[0])}, "{e.label}") @ '
                            f'{e._wrap(n.children[1], _MUL + 1)}', _MUL),
}


def _owned(ex: _Expr, n: Node) -> str:
    """Code for ``n`` as an array of its own: a view (or its transpose) used as a factor or
    a new value is copied, because phase 2 updates views in place before reading it."""
    code = ex.code(n)
    leaf = n.children[0] if n.op is Op.T else n
    return f"rt.owned({code})" if leaf.op in (Op.VIEW, Op.INPUT) else code


def _shape_entry(name: str, shape) -> list[str]:
    """``'X': (rows, cols),`` for INPUTS/VIEWS, over three lines when it would be long."""
    r, c = size_entry(shape[0]), size_entry(shape[1])
    line = f"        {name!r}: ({r}, {c}),"
    if len(line) <= 100:
        return [line]
    return [f"        {name!r}: (", f"            {r},", f"            {c},", "        ),"]


def _shape_doc(n: Node) -> str:
    return printer.fmt_shape(n)


class NumpyGenerator:
    """Emits the module text for a :class:`~linview.compiler.plan.Plan`."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.prog = plan.program
        self.names = Namer()
        for d in self.prog.inputs:
            self.names("view", d.name)
        for st in self.prog.statements:
            self.names("view", st.name)

    #: the runtime module the generated code imports as ``rt``, and the base class
    RUNTIME = "linview.backends.numpy"
    BASE_CLASS = "rt.TriggerModule"
    #: leave the plan's transient views (read only through a Woodbury-maintained inverse)
    #: out of the module's state: evaluated to be inverted, never kept nor updated
    DROP_TRANSIENT = True

    @property
    def transient(self) -> frozenset[str]:
        return self.plan.transient if self.DROP_TRANSIENT else frozenset()

    def module_doc(self) -> list[str]:
        """The generated module's docstring, line by line."""
        prog = self.prog
        return [f'"""Trigger module for the linview program `{prog.name}` ({prog.filename}).',
                "",
                "Generated by linview; do not edit.  Views are kept fresh under low-rank "
                "updates",
                "ΔX = U Vᵀ of the dynamic inputs: each on_update_<X> method computes every "
                "delta from",
                "the old views (phase 1), checks them, and then applies them in place "
                "(phase 2).",
                '"""']

    def class_attributes(self) -> list[str]:
        """Extra class-level lines after ``OUTPUTS`` (none for NumPy)."""
        return []

    def generate(self) -> str:
        p, prog = self.plan, self.prog
        out: list[str] = list(self.module_doc())
        w = out.append
        w("")
        w("import numpy as np")
        w("")
        w(f"from {self.RUNTIME} import runtime as rt")
        w("")
        w("")
        w(f"class {p.class_name}({self.BASE_CLASS}):")
        w(f'    """Views of `{prog.name}`: ' + ", ".join(st.name for st in prog.statements)
          + '."""')
        w("")
        w(f"    PROGRAM = {prog.name!r}")
        w(f"    SOURCE_HASH = {p.source_hash!r}")
        w("    INPUTS = {")
        for dcl in prog.inputs:
            out += _shape_entry(dcl.name, dcl.shape)
        w("    }")
        w(f"    DYNAMIC = {tuple(prog.dynamic)!r}")
        w("    VIEWS = {")
        for st in prog.statements:
            if st.name in self.transient:
                continue
            out += _shape_entry(st.name, st.expr.shape)
        w("    }")
        if self.transient:
            w(f"    TRANSIENT = {tuple(sorted(self.transient))!r}  # evaluated, not kept")
        w("    OUTPUTS = {" + ", ".join(f"{k!r}: {v.attr!r}" for k, v in prog.outputs) + "}")
        if prog.not_one:
            w("    NOT_ONE = (")
            for e, why in prog.not_one:
                w(f"        ({size_entry(e)}, {why!r}),")
            w("    )")
        whole = {x: t.reevaluate for x, t in p.triggers.items() if t.reevaluate}
        if whole:
            w("    REEVALUATED = {" + ", ".join(f"{x!r}: {why!r}" for x, why in whole.items())
              + "}")
        threads = {x: t.blas_threads for x, t in p.triggers.items() if t.blas_threads != 1}
        if threads:
            w("    TRIGGER_BLAS = {" + ", ".join(f"{x!r}: {n!r}" for x, n in threads.items())
              + "}")
        out += self.class_attributes()
        w("")
        out += self.evaluate_method()
        for trig in p.triggers.values():
            w("")
            out += self.trigger_method(trig)
        if not any("np." in line for line in out if not line.lstrip().startswith("#")):
            out.remove("import numpy as np")
            out.remove("")
        return wrap_module("\n".join(out)) + "\n"

    # ------------------------------------------------------------------ re-evaluation
    def evaluate_method(self) -> list[str]:
        lines = ["    def _evaluate(self, d, inputs):",
                 '        """Re-evaluation: every view from the inputs (the constructor\'s '
                 'path)."""']
        ind = " " * 8
        for dcl in self.prog.inputs:
            lines.append(f"{ind}{self.names('view', dcl.name)} = inputs[{dcl.name!r}]")
        roots = [e for _, e in self.plan.evaluation]
        ex = _Expr(self.names, lines, ind, trigger=False, shared=shared_nodes(roots))
        solved = solved_inverses(self.plan) & self.transient
        inverses = {st.name: st.expr.children[0] for st in self.prog.statements
                    if st.name in solved}
        for (name, expr), st in zip(self.plan.evaluation, self.prog.statements, strict=True):
            where = f" ({self.prog.filename}:{st.line})" if st.line else ""
            if name in inverses:  # never formed: its products are solves
                lines.append(f"{ind}# {name} := {printer.fmt(st.expr)}{where}: not formed")
                continue
            lines.append(f"{ind}# {name} := {printer.fmt(st.expr)}{where}")
            ex.label = name
            a = expr.children[0] if expr.op is Op.MUL else None
            if a is not None and a.op is Op.VIEW and a.attr in inverses:
                lines.append(f"{ind}{self.names('view', name)} = rt.solve("
                             f"{ex.code(inverses[a.attr])}, {ex.code(expr.children[1])}, "
                             f"{a.attr!r})")
                continue
            lines.append(f"{ind}{self.names('view', name)} = {ex.code(expr)}")
        lines.append(f"{ind}return {{")
        for st in self.prog.statements:
            if st.name not in inverses:
                lines.append(f"{ind}    {st.name!r}: {self.names('view', st.name)},")
        lines.append(f"{ind}}}")
        return lines

    # ------------------------------------------------------------------ triggers
    def trigger_method(self, trig: Trigger) -> list[str]:
        x = trig.input
        dcl = self.prog.input(x)
        names = Namer(self.names.taken)
        names.names = dict(self.names.names)
        names.fixed("factor", "U", "U")
        names.fixed("factor", "V", "V")
        ind = " " * 8
        r, c = _shape_doc(dcl.ref).split("×")
        doc = [f"    def on_update_{x}(self, U, V):",  # the runtime dispatches on the name
               f'        """ON UPDATE {x} BY (U, V): {x} += U Vᵀ, U: {r}×k, V: {c}×k.',
               ""]
        if trig.reevaluate:
            return doc[:2] + ["",
                              f"        Whole-trigger re-evaluation: {x} is updated in place "
                              "and every view",
                              f"        re-evaluated ({trig.reevaluate}).",
                              '        """',
                              f"        self._reevaluate_trigger({x!r}, U, V)"]
        for vd in trig.deltas[1:]:
            doc.append(f"        {self._summary(vd)}")
        doc.append('        """')
        lines: list[str] = []
        used_views = set()
        roots = []
        for vd in trig.deltas[1:]:
            roots += emitted_exprs(vd)
        for r_ in roots:
            used_views |= {n.attr for n in r_.walk() if n.op in (Op.VIEW, Op.INPUT)}
        used_views |= {vd.name for vd in trig.deltas}
        used_views -= self.transient
        lines.append(f"{ind}d = self.dims")
        lines.append(f"{ind}k = U.shape[1]")
        for nm in [d_.name for d_ in self.prog.inputs] + [s.name for s in self.prog.statements]:
            if nm in used_views:
                lines.append(f"{ind}{names('view', nm)} = self._views[{nm!r}]")
        ex = _Expr(names, lines, ind, trigger=True, shared=shared_nodes(roots),
                   update_factors=("U", "V"))
        ex.fuse_products(roots)
        lines.append(f"{ind}# phase 1: every delta from the old views")
        checks: list[tuple[str, list[str]]] = []  # (view, the parts of its delta)
        kinds: dict[str, str] = {x: "('outer', U, V)"}  # each view's delta, for probes
        needed = self._needed_factors(trig)
        for vd in self._phase1_order(trig):
            lines += [f"{ind}# {line}" for line in self._math(vd)]
            ex.label = vd.name
            left = names("factor", vd.left.attr)
            if vd.strategy is Strategy.INCR:
                right = names("factor", vd.right.attr)
                lines.append(f"{ind}{left} = " + self._stack(ex, [t.P for t in vd.terms]))
                lines.append(f"{ind}{right} = " + self._stack(ex, [t.Q for t in vd.terms]))
                checks.append((vd.name, [left, right]))
                kinds[vd.name] = f"('outer', {left}, {right})"
                ex.defined |= {vd.left.attr, vd.right.attr}
            elif vd.strategy is Strategy.HYBRID:
                lines.append(f"{ind}{left} = {_owned(ex, vd.dense)}")
                checks.append((vd.name, [left]))
                kinds[vd.name] = f"('dense', {left})"
                ex.defined.add(vd.left.attr)
            else:
                new = names("factor", f"new_{vd.name}")
                lines.append(f"{ind}{new} = {_owned(ex, vd.new_value)}")
                if vd.left.attr in needed:
                    lines.append(f"{ind}{left} = {new} - {names('view', vd.name)}")
                checks.append((vd.name, [new]))
                kinds[vd.name] = f"('new', {new})"
        if checks:
            lines.append(f"{ind}rt.check_deltas({x!r}, {{" + ", ".join(
                f"{v!r}: ({', '.join(parts)}{',' if len(parts) == 1 else ''})"
                for v, parts in checks) + "})")
        for vd in trig.deltas[1:]:  # maintained inverses: the randomized residual probe
            if vd.inverse_of:
                lines.append(f"{ind}self._probe({vd.name!r}, {vd.inverse_of!r}, "
                             f"{kinds.get(vd.inverse_of)}, {kinds[vd.name]})")
        body = "\n".join(lines)
        if 'd["' not in body:
            lines.remove(f"{ind}d = self.dims")
        kline = f"{ind}k = U.shape[1]"
        code = [line.split("#")[0] for line in lines[lines.index(kline) + 1:]]
        if not any(re.search(r"\bk\b", line) for line in code):
            lines.remove(kline)
        lines.append(f"{ind}# phase 2: apply")
        lines.append(f"{ind}rt.add_outer({names('view', x)}, U, V)")
        for vd in trig.deltas[1:]:
            v = names("view", vd.name)
            if vd.name in self.transient:
                lines.append(f"{ind}# {vd.name} is not kept (only its inverse reads it)")
            elif vd.strategy is Strategy.INCR:
                lines.append(f"{ind}rt.add_outer({v}, {names('factor', vd.left.attr)}, "
                             f"{names('factor', vd.right.attr)})")
            elif vd.strategy is Strategy.HYBRID:
                lines.append(f"{ind}rt.add_dense({v}, {names('factor', vd.left.attr)})")
            else:
                lines.append(f"{ind}rt.assign({v}, {names('factor', f'new_{vd.name}')})")
        return doc + lines

    @staticmethod
    def _stack(ex: _Expr, parts: list[Node]) -> str:
        if len(parts) == 1:
            return _owned(ex, parts[0])
        return "np.hstack([" + ", ".join(ex.code(p) for p in parts) + "])"

    @staticmethod
    def _phase1_order(trig: Trigger) -> list[ViewDelta]:
        """Phase 1 in program order, except that deltas computed from the update factors
        and views alone come first: their results are then ready for the fused products
        of the views the later deltas read (``W [U_G, V_G, D_b]`` in one pass)."""
        own = {f.attr for vd in trig.deltas[1:] for f in (vd.left, vd.right)
               if f.op is Op.FACTOR} | {f"new_{vd.name}" for vd in trig.deltas[1:]}

        def free(vd: ViewDelta) -> bool:
            return not any(n.op is Op.FACTOR and n.attr in own
                           for e in emitted_exprs(vd) for n in e.walk())

        rest = list(trig.deltas[1:])
        return [vd for vd in rest if free(vd)] + [vd for vd in rest if not free(vd)]

    @staticmethod
    def _needed_factors(trig: Trigger) -> set[str]:
        return {n.attr for vd in trig.deltas for e in emitted_exprs(vd) for n in e.walk()
                if n.op is Op.FACTOR}

    @staticmethod
    def _summary(vd: ViewDelta) -> str:
        what = {Strategy.INCR: f"factored, rank {vd.rank}",
                Strategy.HYBRID: "dense delta", Strategy.REEVAL: "re-evaluated"}[vd.strategy]
        extra = " (Woodbury)" if vd.inverse_of and vd.strategy is Strategy.INCR else ""
        return f"{vd.name}: {vd.strategy.value}, {what}{extra}"

    @staticmethod
    def _math(vd: ViewDelta) -> list[str]:
        if vd.strategy is Strategy.INCR:
            u, v = vd.left.attr, vd.right.attr
            ps = ", ".join(printer.fmt(t.P) for t in vd.terms)
            qs = ", ".join(printer.fmt(t.Q) for t in vd.terms)
            head = f"Δ{vd.name} = {u} {v}ᵀ, rank {vd.rank}"
            if vd.inverse_of:
                head += f"  (Woodbury on Δ{vd.inverse_of})"
            return [head, f"  {u} = [{ps}]", f"  {v} = [{qs}]"]
        if vd.strategy is Strategy.HYBRID:
            return [f"Δ{vd.name} = {vd.left.attr} = {printer.fmt(vd.dense)}  (dense)"]
        return [f"{vd.name} re-evaluated: {vd.name}' = {printer.fmt(vd.new_value)}"
                f"  ({vd.reason})"]


def generate(plan: Plan) -> str:
    """The source text of the NumPy trigger module for ``plan``."""
    return NumpyGenerator(plan).generate()


__all__ = ["generate", "NumpyGenerator", "LEAVES"]
