"""Lowering: AST -> IR :class:`~linview.compiler.ir.Program` (SSA statements with symbolic shapes).

What happens here:

* inputs get shapes from ``%#linview dims``/``input`` pragmas or fresh symbols;
* every assignment becomes an SSA statement ``view := expr`` (``T_1 ... T_k`` for a variable
  assigned k times, the plain name for one assigned once); assignments of an input, a view
  or a constant are copies and are propagated instead;
* ``for`` loops are unrolled (bounds: literals or sizes); the loop variable is a scalar
  constant in each copy of the body;
* ``E^k`` is lowered by the iterative model: ``exp`` (repeated squaring, reusing squares),
  ``linear`` (``E·E·…``) or ``skip=s`` (squaring up to ``E^s`` then steps of ``E^s``);
* ``A \\ B`` and ``B / A`` become products with ``inv(A)``; every inverse and its argument
  become views of their own (the inverse is maintained by Woodbury's identity);
* ``size(X, d)`` becomes the symbolic size; scalar arithmetic on constants is folded;
* ``[Q, R] = qr(A)``, ``[L, U, P] = lu(A)`` and ``[r, c] = size(A)`` bind one value per
  output (:mod:`linview.compiler.lower_multi`);
* shapes are unified as the statements are read, and a mismatch is a :class:`ShapeError`
  that names the statement and both shapes.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import sympy as sp

from linview.compiler import ir, lower_control, lower_language, lower_multi, models
from linview.compiler.ir import Node, Op
from linview.compiler.lower_expr import ExpressionLowering
from linview.compiler.models import MODELS, Options  # noqa: F401 - part of this interface
from linview.compiler.shapes import Conflict, Unifier, dim
from linview.compiler.solve_lowering import SolveLowering
from linview.errors import CompileError, ParseError, ShapeError, locate
from linview.frontend import syntax

#: a program that lowers (loops unrolled, powers expanded) to more statements is refused:
#: planning costs tens of milliseconds per statement
MAX_STATEMENTS = 500


class TooLarge(CompileError):
    """The lowered program exceeds :data:`MAX_STATEMENTS`."""


class _Lowerer(ExpressionLowering, SolveLowering):
    def __init__(self, module: syntax.Module, source: str, filename: str, options: Options):
        self.module = module
        self.source = source
        self.filename = filename
        self.options = options
        self.uni = Unifier()
        self.env: dict[str, Node] = {}
        self.statements: list[ir.Statement] = []
        self.taken: set[str] = set()  # names of self.statements
        self.names: set[str] = set()
        self.version: dict[str, int] = {}
        self.total: dict[str, int] = {}
        self.loop_vars: set[str] = set()
        self.loop_values: dict[str, int] = {}  # the current value of each loop variable
        self.notes: list[str] = []  # for explain: how least-squares problems are kept
        self.current: syntax.Assign | None = None
        self.not_one: list[tuple] = []
        self.solve: tuple[str, float] | None = None  # (method, tolerance) of solve views
        self.storage: dict[str, str] = {}  # inputs declared sparse or stochastic
        self.end_stack: list = []  # extents that 'end' stands for, innermost last
        self.in_loop = False  # inside a while loop: values stay expressions, no views

    # ----------------------------------------------------------------- errors
    def where(self, pos: syntax.Pos):
        line, col = pos if pos and pos[0] else (0, 0)
        return locate(self.source, self.filename, line, col) if line else None

    def parse_error(self, msg: str, pos: syntax.Pos, hint: str | None = None) -> ParseError:
        return ParseError(msg, self.where(pos), hint)

    def shape_error(self, what: str, pos: syntax.Pos, *shapes) -> ShapeError:
        stmt = ""
        if self.current is not None:
            stmt = f"in statement '{self.current.target} = ...': "
        detail = ", ".join(f"{self.show(s)}" for s in shapes)
        msg = f"{stmt}{what}" + (f" (got {detail})" if detail else "")
        return ShapeError(msg, self.where(pos))

    def show(self, shape) -> str:
        r, c = (self.uni.resolve(x) for x in shape)
        return f"{r}x{c}"

    # ----------------------------------------------------------------- shapes
    def unify(self, a, b, pos, what: str, *shapes) -> None:
        try:
            self.uni.unify(a, b)
        except Conflict:
            raise self.shape_error(what, pos, *shapes) from None

    def fresh(self, n: Node) -> Node:
        """``n`` with every size resolved by the current substitution."""
        def fix(leaf: Node) -> Node:
            shape = (self.uni.resolve(leaf.rows), self.uni.resolve(leaf.cols))
            attr = leaf.attr
            if leaf.op is Op.CONST:
                attr = self.uni.resolve(attr)
            return Node(leaf.op, (), attr, shape)
        if not any(m.op is Op.INDEX for m in n.walk()):
            return ir.map_leaves(n, fix)

        def fix_all(m: Node) -> Node:
            if m.op in ir.LEAVES:
                return fix(m)
            return m.replace(attr=lower_language.map_attr(m, self.uni.resolve))
        return ir.rebuild(n, fix_all)

    def build(self, op: Op, *children: Node, pos=(0, 0), attr=None) -> Node:
        kids = tuple(self.fresh(c) for c in children)
        try:
            return Node(op, kids, attr)
        except ir.ShapeMismatch as e:
            raise self.shape_error(e.what, pos, *e.shapes) from None

    # ----------------------------------------------------------------- driver
    def run(self) -> ir.Program:
        """Long on purpose: The lowering driver: inputs, statements and outputs in the order they
        must be settled."""
        m = self.module
        pragmas = m.pragmas
        specs = {s.name: s for p in pragmas if p.kind in ("dims", "input") for s in p.specs}
        scalars = {n for p in pragmas if p.kind == "scalar" for n in p.names}
        if isinstance(m, syntax.Function):
            params, name = m.params, m.name
            for p in pragmas:
                if p.kind == "input":
                    raise self.parse_error("'%#linview input' is for scripts; a function's "
                                           "inputs are its parameters", p.pos,
                                           "use '%#linview dims X(m,n)' to give sizes")
        else:
            params = tuple(s.name for p in pragmas if p.kind == "input" for s in p.specs)
            params += tuple(n for n in sorted(scalars) if n not in params)
            name = self.filename.rsplit("/", 1)[-1].removesuffix(".m") or "script"
            if not params:
                raise self.parse_error("a script needs its inputs declared with "
                                       "'%#linview input X(n,n) ...'", m.pos)
        if len(set(params)) != len(params):
            raise self.parse_error("an input is named twice", m.pos)
        self.solve_options(pragmas)
        for p in pragmas:
            for nm in list(p.names) + [s.name for s in p.specs]:
                if p.kind not in ("output", "solve", "tolerance") and nm not in params:
                    raise self.parse_error(f"pragma '{p.kind}' names '{nm}', which is not an "
                                           f"input (inputs: {', '.join(params)})", p.pos)
        dynamic_names = {n for p in pragmas if p.kind == "dynamic" for n in p.names}
        static_names = {n for p in pragmas if p.kind == "static" for n in p.names}
        decls = []
        for pname in params:
            if pname in scalars:
                shape = (sp.Integer(1), sp.Integer(1))
            elif pname in specs:
                sizes = specs[pname].sizes
                if len(sizes) != 2:
                    raise self.parse_error(f"sizes of '{pname}' must be given as "
                                           f"{pname}(rows, cols)", specs[pname].pos)
                if "k" in sizes:
                    raise self.parse_error("the size name 'k' is reserved for the rank of "
                                           "updates", specs[pname].pos,
                                           "choose another name, e.g. K or n")
                shape = (dim(sizes[0]), dim(sizes[1]))
                self.uni.rigid |= {x for x in shape if isinstance(x, sp.Symbol)}
            else:
                declared = {str(x) for sp_ in specs.values() for x in sp_.sizes}
                shape = tuple(dim(lower_language.fresh_size(f"{w}_{pname}", declared))
                              for w in ("rows", "cols"))
            if self.options.shapes:
                shape = lower_language.input_shape(self, pname, shape, pname in scalars,
                                                specs.get(pname))
            is_scalar = shape == (1, 1)
            dynamic = (pname in dynamic_names) if dynamic_names else not is_scalar
            dynamic = dynamic and pname not in static_names
            decls.append(ir.InputDecl(pname, shape, dynamic, is_scalar,
                                      self.storage.get(pname, "dense")))
            self.env[pname] = decls[-1].ref
            self.names.add(pname)
        self.count_assignments(m.body, 1)
        self.names |= set(self.total)
        self.block(m.body)
        if isinstance(m, syntax.Function):
            out_names = m.outputs
        else:
            listed = [n for p in pragmas if p.kind == "output" for n in p.names]
            out_names = tuple(listed) or tuple(self.total)
        outputs = []
        for o in out_names:
            if o not in self.env or o in self.loop_vars:
                raise self.parse_error(f"output '{o}' is never assigned", m.pos)
            outputs.append((o, self.env[o]))
        if not outputs:
            raise self.parse_error("the program has no outputs", m.pos)
        # an input kept dense after all (the cost model chose an inverse: solve_lowering.py)
        decls = [d if d.storage == self.storage.get(d.name, "dense") else
                 replace(d, storage=self.storage.get(d.name, "dense")) for d in decls]
        prog = ir.Program(name=name, inputs=tuple(decls), statements=tuple(self.statements),
                          outputs=tuple(outputs), filename=self.filename, source=self.source,
                          not_one=tuple(self.not_one), notes=tuple(self.notes))
        return prog.subs(self.uni.solution())

    # ----------------------------------------------------------------- statements
    def count_assignments(self, body, times: int) -> None:
        for st in body:
            if isinstance(st, syntax.Assign):
                self.total[st.target] = self.total.get(st.target, 0) + times
            elif isinstance(st, syntax.MultiAssign):
                for t in st.targets:
                    self.total[t] = self.total.get(t, 0) + times
            elif isinstance(st, syntax.If):
                for _, branch in st.branches:
                    self.count_assignments(branch, times)
                self.count_assignments(st.orelse, times)
            elif isinstance(st, syntax.While):
                self.count_assignments(st.body, times)
            else:
                self.count_assignments(st.body, times * max(self.count_trips(st), 1))

    def count_trips(self, st: syntax.For) -> int:
        """How many times a loop runs, as far as is known before lowering it (2 when its
        bounds are not known yet: its assignments are then numbered)."""
        emitted = len(self.statements)
        try:
            return len(self.loop_range(st))
        except (CompileError, ParseError, ShapeError):  # NeedsData, an enclosing loop's var
            return 2
        finally:
            for dropped in self.statements[emitted:]:
                self.taken.discard(dropped.name)
            del self.statements[emitted:]

    def block(self, body) -> None:
        for st in body:
            if isinstance(st, syntax.Assign):
                self.assign(st)
            elif isinstance(st, syntax.MultiAssign):
                lower_multi.multi_assign(self, st)
            elif isinstance(st, syntax.If):
                for cond, branch in st.branches:
                    if lower_control.decide(self, cond):
                        self.block(branch)
                        break
                else:
                    self.block(st.orelse)
            elif isinstance(st, syntax.While):
                lower_control.while_loop(self, st)
            else:
                self.loop(st)

    def loop_bound(self, e: syntax.Expr, what: str) -> int:
        """A bound or step of a ``for`` range: an integer literal, a size (``length(h)``,
        ``size(X, 2)``, ``numel``), an enclosing loop's variable, or arithmetic on those.
        A size that only the data gives defers the program to ``load()``."""
        if isinstance(e, syntax.Num | syntax.Unary) and lower_language.literal(e) is not None:
            return self.literal_int(e, what)
        v = self.expr(e, "bound")
        if v.op is Op.CONST:
            val = sp.sympify(self.uni.resolve(v.attr))
            if val.is_Integer:
                return int(val)
            if val.free_symbols:
                raise lower_language.NeedsData(
                    f"the loop '{syntax.show(e)}' of line {e.pos[0]} is unrolled for the "
                    "data's sizes")
        raise self.parse_error(f"{what} must be an integer known before the data: a literal, "
                               "a size or arithmetic on those", getattr(e, "pos", (0, 0)),
                               "loops are unrolled: write e.g. 'for k = 1:16' or "
                               "'for k = 2:length(h)'")

    def literal_int(self, e: syntax.Expr, what: str) -> int:
        neg = False
        if isinstance(e, syntax.Unary) and e.op == "-":
            neg, e = True, e.operand
        if isinstance(e, syntax.Num) and float(e.value).is_integer():
            return -int(e.value) if neg else int(e.value)
        raise self.parse_error(f"{what} must be an integer literal", getattr(e, "pos", (0, 0)),
                               "loops are unrolled at compile time: write e.g. 'for i = 1:16'")

    def loop_range(self, st: syntax.For) -> range:
        a = self.loop_bound(st.start, "a loop bound")
        b = self.loop_bound(st.stop, "a loop bound")
        step = 1 if st.step is None else self.loop_bound(st.step, "a loop step")
        if step == 0:
            raise self.parse_error("a loop step must not be zero", st.pos)
        return range(a, b + (1 if step > 0 else -1), step)

    def loop(self, st: syntax.For) -> None:
        """Unroll ``for var = a:s:b``: the body once per value, ``var`` a scalar constant
        in it (and, as in Octave, its last value after the loop)."""
        trips = self.loop_range(st)
        if st.var in self.env and st.var not in self.loop_vars:
            raise self.parse_error(f"loop variable '{st.var}' shadows a variable", st.pos)
        self.loop_vars.add(st.var)
        self.loop_values.pop(st.var, None)
        if self.options.model not in ("linear", "written") and len(trips) > 1 \
                and not self.in_loop:  # inside a while loop a for loop is unrolled as written
            match = models.match_recurrence(st, self.env)
            if match is not None and models.recurrence(self, st, match, len(trips)):
                self.loop_values[st.var] = trips[-1]
                return
        for value in trips:
            self.loop_values[st.var] = value
            self.block(st.body)

    def assign(self, st: syntax.Assign) -> None:
        if st.target in self.loop_vars:
            raise self.parse_error(f"cannot assign to loop variable '{st.target}'", st.pos)
        self.current = st
        name = self.next_name(st.target)
        self.bind(st.target, name, self.expr(st.value, name), st)
        self.current = None

    def next_name(self, target: str) -> str:
        """The view name of the next assignment of ``target`` (``T_j`` when assigned
        several times)."""
        j = self.version.get(target, 0)
        self.version[target] = j + 1
        return target if self.total.get(target, 1) == 1 else f"{target}_{j}"

    def bind(self, target: str, name: str, value: Node, st) -> None:
        """``target`` now holds ``value``: a view ``name`` of its own, or the value itself
        inside a ``while`` loop and for a leaf (copy propagation)."""
        if self.in_loop or value.op in ir.LEAVES:
            self.env[target] = value
        else:
            self.env[target] = self.emit(name, value, st)

    def origin(self, st: syntax.Assign | None) -> tuple[str, int]:
        if st is None or not st.pos or not st.pos[0]:
            return "", 0
        lines = self.source.splitlines()
        line = st.pos[0]
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return text, line

    def unique(self, name: str) -> str:
        base, i = name, 1
        taken = self.taken
        while name in taken or (name != base and name in self.names):
            i += 1
            name = f"{base}{i}"
        return name

    def emit(self, name: str, value: Node, st: syntax.Assign | None = None) -> Node:
        name = self.unique(name)
        text, line = self.origin(st if st is not None else self.current)
        value = self.fresh(value)
        if len(self.statements) >= MAX_STATEMENTS:
            where = f" (at {self.filename}:{line})" if line else ""
            raise TooLarge(
                f"the program unrolls to more than {MAX_STATEMENTS} statements{where} "
                f"(model '{self.options.model}'); linview refuses programs this large",
                hint="write powers as A^k and recurrences as T = A*T + B so that the 'exp' "
                "or 'skip=S' models lower them in O(log k) steps, or use fewer iterations")
        self.statements.append(ir.Statement(name, value, text, line))
        self.taken.add(name)
        return ir.view(name, value.shape)

    def materialize(self, value: Node, name: str) -> Node:
        """``value`` as a leaf: itself if already one, else a new auxiliary view."""
        if value.op in ir.LEAVES or self.in_loop:
            return value
        return self.emit(name, value)

    def lookup(self, name: str) -> Node:
        """The current value of a program variable."""
        return self.env[name]

    def rebind(self, name: str, value: Node, steps: int) -> None:
        """``name`` now holds ``value``, ``steps`` assignments later."""
        self.env[name] = value
        self.version[name] = self.version.get(name, 0) + steps

    @contextlib.contextmanager
    def statement(self, st: syntax.Assign):
        """Attribute what is emitted inside to the source statement ``st``."""
        previous, self.current = self.current, st
        try:
            yield
        finally:
            self.current = previous


def lower(module: syntax.Module, source: str = "", filename: str = "<string>",
          options: Options | None = None) -> ir.Program:
    """Lower a parsed module to an IR program (see the module docstring)."""
    options = options or Options()
    if options.model not in MODELS:
        raise CompileError(f"unknown iterative model '{options.model}'",
                           hint="valid models: exp, linear, skip=S, written, auto")
    return _Lowerer(module, source, filename, options).run()
