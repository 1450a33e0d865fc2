"""Reference interpreter of the IR on NumPy arrays: the ground truth for every test.

It evaluates nodes directly and naively (no reassociation, no in-place tricks), each op by
its ``evaluate`` entry in :data:`.ops.OPS`, so its result is what the program *means*.
Inputs may be dense arrays or ``scipy.sparse`` matrices; every intermediate result is a
dense 2-D ``float64`` array.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.ops import OPS, dense


def size_value(e, bindings: Mapping[str, int]) -> int:
    """The integer value of a size expression under ``bindings``."""
    e = sp.sympify(e)
    if e.free_symbols:
        e = e.subs({s: bindings[s.name] for s in e.free_symbols if s.name in bindings})
    if e.free_symbols:
        missing = ", ".join(sorted(s.name for s in e.free_symbols))
        raise KeyError(missing)
    return int(e)


def eval_node(root: Node, env: Mapping[str, object], bindings: Mapping[str, int],
              memo: dict | None = None):
    """Evaluate ``root``; leaves ``INPUT``/``VIEW``/``FACTOR`` are looked up in ``env``."""
    memo = {} if memo is None else memo
    for n in root.walk():
        if id(n) in memo:
            continue
        if n.op in (Op.INPUT, Op.VIEW, Op.FACTOR):
            val = env[n.attr]
        elif n.op is Op.CONST:
            val = np.array([[float(sp.sympify(n.attr).subs(
                {s: bindings[s.name] for s in sp.sympify(n.attr).free_symbols}))]])
        elif n.op in (Op.EYE, Op.ZEROS, Op.ONES):
            r, c = size_value(n.rows, bindings), size_value(n.cols, bindings)
            val = np.eye(r, c) if n.op is Op.EYE else \
                (np.zeros if n.op is Op.ZEROS else np.ones)((r, c))
        elif n.op is Op.LOOP:
            val = _run_loop(n, [memo[id(c)] for c in n.children], bindings)
        else:
            val = OPS[n.op].evaluate(n, *(memo[id(c)] for c in n.children))
        memo[id(n)] = val
    return memo[id(root)]


def _run_loop(n: Node, values: list, bindings: Mapping[str, int]) -> np.ndarray:
    """A ``while`` loop (``ops_octave.LoopSpec``): iterate its body while the condition
    holds (every entry nonzero, as in Octave)."""
    spec = n.attr
    env = dict(zip(spec.placeholders, values, strict=True))
    while np.all(eval_node(spec.cond, env, bindings) != 0):
        new = [eval_node(u, env, bindings) for u in spec.updates]
        env.update({f"@{v}": x for v, x in zip(spec.carried, new, strict=True)})
    return env[f"@{spec.result}"]


def evaluate(program: ir.Program, inputs: Mapping[str, object],
             bindings: Mapping[str, int]) -> dict[str, np.ndarray]:
    """All views and outputs of ``program`` on ``inputs``: ``{name: dense array}``.

    Outputs are included under their own names (an output that is a view appears twice,
    under the view's SSA name and the output's name).
    """
    env: dict[str, object] = dict(inputs)
    for st in program.statements:
        env[st.name] = dense(eval_node(st.expr, env, bindings))
    out = {st.name: env[st.name] for st in program.statements}
    for name, n in program.outputs:
        out[name] = dense(eval_node(n, env, bindings))
    return out


def run_trigger(trigger, env: Mapping[str, np.ndarray], U: np.ndarray, V: np.ndarray,
                bindings: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Reference execution of a :class:`~linview.compiler.delta.Trigger`: the new value of every
    view it touches, computed naively from the old values in ``env``.  Used to test the
    delta derivation independently of any backend."""
    from linview.compiler.delta import Strategy

    scope: dict[str, object] = dict(env)
    scope["U"], scope["V"] = U, V
    bindings = {**bindings, "k": U.shape[1]}
    memo: dict = {}
    new: dict[str, np.ndarray] = {}
    for vd in trigger.deltas[1:]:
        if vd.strategy is Strategy.REEVAL:
            val = eval_node(vd.new_value, scope, bindings, memo)
            scope[vd.left.attr] = val - scope[vd.name]
            continue
        parts = [(eval_node(t.P, scope, bindings, memo), eval_node(t.Q, scope, bindings, memo))
                 for t in vd.terms]
        if vd.strategy is Strategy.INCR:
            scope[vd.left.attr] = np.hstack([p for p, _ in parts])
            scope[vd.right.attr] = np.hstack([q for _, q in parts])
        else:
            scope[vd.left.attr] = eval_node(vd.dense, scope, bindings, memo)
    for vd in trigger.deltas:
        left = scope[vd.left.attr]
        right = scope[vd.right.attr] if vd.right.op is Op.FACTOR else None
        delta = left @ right.T if right is not None else left
        new[vd.name] = dense(env[vd.name]) + delta
    return new
