"""View keys: what a view's value is a function of, as a digest stable across processes.

A view's key is a SHA-256 digest of its defining expression (after lowering and the
program passes) in which every name is replaced by what it stands for:

* a view it reads by that view's key (so the key covers everything upstream);
* an input by a *token*: a digest of the input's content and its declared role (dynamic or
  static).  Without data (``linview explain``) the token is the input's name;
* constants by their value, sizes and shapes by their expressions (bound to numbers once a
  program is specialised to its data).

The names of views never enter a key, and neither does the order of statements, so
renaming a variable or reordering independent statements leaves every key as it was; any
change of an operator, a constant, an input's role or its data changes the key of every
view downstream.  Nothing here uses Python's ``hash()`` or object ids.

Keys are built in program order from :func:`templates` (one small template per statement:
its own expression with its operands numbered) by :func:`bind`, which also implements early
cutoff: a view that had to be recomputed but came out equal to a stored one (same content
digest) takes that stored view's key, and everything downstream keeps its keys too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from linview.compiler.ir import Node, Op, Program

#: bumped when the encoding below changes, so that old keys never match new ones
KEY_VERSION = "linview-key-1"


def _h(*parts: str) -> str:
    h = hashlib.sha256(KEY_VERSION.encode())
    for p in parts:
        h.update(b"\x00")
        h.update(p.encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Template:
    """One statement's expression with its operands numbered: ``digest`` covers the
    operators, constants and shapes; ``operands`` lists the names read, in the order their
    numbers were given (first appearance in a children-first walk)."""

    digest: str
    operands: tuple[str, ...]


def _encode(root: Node, operands: list[str], inputs: Mapping[str, bool]) -> str:
    """The digest of ``root`` with view and input names replaced by operand numbers."""
    memo: dict[int, str] = {}
    for n in root.walk():
        if n.op in (Op.VIEW, Op.INPUT):
            if n.attr not in operands:
                operands.append(n.attr)
            role = "" if n.op is Op.VIEW else ("dynamic" if inputs.get(n.attr) else "static")
            memo[id(n)] = _h("operand", str(operands.index(n.attr)), role)
            continue
        attr = n.attr
        if n.op is Op.LOOP:  # a while loop: its body by its printed form
            attr = repr(attr)
        text = repr(attr)
        if " at 0x" in text:  # an object without a stable form: never equal to anything
            text = f"unkeyable:{id(n)}:{id(attr)}"
        shape = f"{n.shape[0]}x{n.shape[1]}" if n.op in (Op.EYE, Op.ZEROS, Op.ONES, Op.CONST) \
            else ""
        memo[id(n)] = _h(n.op.value, text, shape, *(memo[id(c)] for c in n.children))
    return memo[id(root)]


def templates(program: Program) -> dict[str, Template]:
    """``{view: Template}`` for every statement of ``program``."""
    roles = {d.name: d.dynamic for d in program.inputs}
    out = {}
    for st in program.statements:
        operands: list[str] = []
        digest = _encode(st.expr, operands, roles)
        out[st.name] = Template(digest, tuple(operands))
    return out


def expression_key(node: Node, keys: Mapping[str, str], program: Program) -> str:
    """The key a view defined as ``node`` (a sub-expression of a statement) would have,
    given the ``keys`` of the views and inputs it reads: how a recomputed view finds a
    product another program kept or stored (ridge's ``X'*X`` inside ``X'*X + λI``)."""
    operands: list[str] = []
    digest = _encode(node, operands, {d.name: d.dynamic for d in program.inputs})
    return _h("view", digest, *(keys[o] for o in operands))


def largest_parts(expr: Node, keys: Mapping[str, str], program: Program,
                  found: Callable[[Node, str], bool]) -> list[Node]:
    """The products and sums inside ``expr`` (not ``expr`` itself) that a load takes by
    key instead of computing them: the largest first, each whose
    :func:`expression_key` ``found(node, key)`` accepts, none inside one taken.  What a
    reusing load does (``backends/numpy/reuse_parts.py``) and what ``explain --against``
    predicts."""
    out: list[Node] = []
    covered: set[int] = set()
    nodes = [n for n in expr.walk() if n is not expr and n.op in (Op.MUL, Op.ADD)]
    for n in reversed(nodes):  # parents before children: the largest first
        if id(n) in covered or any(m.attr not in keys for m in n.walk()
                                   if m.op in (Op.VIEW, Op.INPUT)):
            continue
        if found(n, expression_key(n, keys, program)):
            out.append(n)
            covered.update(id(c) for c in n.walk())
    return out


def input_token(content_digest: str, dynamic: bool) -> str:
    """An input's key: the digest of its content and its role."""
    return _h("input", "dynamic" if dynamic else "static", content_digest)


def bind(program: Program, tokens: Mapping[str, str],
         cutoff: Callable[[str, str], str | None] | None = None) -> dict[str, str]:
    """``{input or view: key}`` in program order.  ``tokens`` holds each input's
    :func:`input_token`.  ``cutoff(view, key)``, called for each view in order, may return
    another key for it (a stored view with the same content: early cutoff)."""
    tpl = templates(program)
    keys = dict(tokens)
    for st in program.statements:
        t = tpl[st.name]
        key = _h("view", t.digest, *(keys[o] for o in t.operands))
        if cutoff is not None:
            key = cutoff(st.name, key) or key
        keys[st.name] = key
    return keys


def structural(program: Program) -> dict[str, str]:
    """Keys without data (inputs by name and role), as ``linview explain`` shows them."""
    return bind(program, {d.name: input_token(f"name:{d.name}", d.dynamic)
                          for d in program.inputs})


def short(key: str) -> str:
    return key[:10]
