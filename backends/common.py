"""Pieces shared by the code generators: Python-safe names and temporaries for shared
subexpressions."""

from __future__ import annotations

import keyword
from collections import Counter
from collections.abc import Iterable

from linview.compiler.ir import LEAVES, Node, Op

RESERVED = {"np", "rt", "self", "d", "k", "U", "V", "views", "spark", "sc", "inputs"}


class Namer:
    """Maps IR names (views, inputs, factors) to unique Python identifiers."""

    def __init__(self, reserved: Iterable[str] = ()):
        self.taken = set(RESERVED) | set(reserved) | set(keyword.kwlist)
        self.names: dict[tuple[str, str], str] = {}

    def __call__(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self.names:
            base = name if name.isidentifier() else "v_" + "".join(
                ch if ch.isalnum() else "_" for ch in name)
            cand, i = base, 1
            while cand in self.taken:
                i += 1
                cand = f"{base}_{i}"
            self.taken.add(cand)
            self.names[key] = cand
        return self.names[key]

    def fixed(self, kind: str, name: str, py: str) -> None:
        """Pin ``name`` to the identifier ``py`` (e.g. the trigger's ``U`` and ``V``)."""
        self.names[(kind, name)] = py


def shared_nodes(roots: Iterable[Node]) -> set[int]:
    """Ids of non-leaf nodes used more than once across ``roots`` (they get temporaries)."""
    uses: Counter[int] = Counter()
    seen: set[int] = set()
    for r in roots:
        for n in r.walk():
            if id(n) in seen:
                continue
            seen.add(id(n))
            for c in n.children:
                uses[id(c)] += 1
    for r in roots:
        uses[id(r)] += 1
    out = set()
    for r in roots:
        for n in r.walk():
            if uses[id(n)] > 1 and n.op not in LEAVES and not (
                    n.op is Op.T and n.children[0].op in LEAVES):
                out.add(id(n))
    return out
