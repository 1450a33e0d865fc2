"""``%#linview`` pragmas: which inputs change, their sizes, scalars, outputs and inputs of
scripts (one line each, read by :func:`parse_pragma`)."""

from __future__ import annotations

import re

from lark import Token

from linview.frontend import syntax
from linview.frontend.problems import Problem

#: Pragma kinds and what they list: bare names, or ``X(m, n)`` size specs.
PRAGMA_KINDS: dict[str, str] = {
    "dynamic": "names",
    "static": "names",
    "scalar": "names",
    "output": "names",
    "dims": "specs",
    "input": "specs",
    "sparse": "names",  # inputs kept as scipy.sparse (solve views: linview/solve/)
    "stochastic": "names",  # column-stochastic inputs kept as links (linview/solve/)
    "solve": "word",  # how solve views are maintained: auto, push, krylov, cholesky
    "tolerance": "number",  # the error bound solve views keep
}


#: maintenance methods of solve views (``%#linview solve METHOD``)
SOLVE_METHODS = ("auto", "push", "krylov", "cholesky")


class PragmaProblem(Exception):
    """A bad value pragma; ``index`` is the offending item (0: the first after the kind)."""

    def __init__(self, message: str, index: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.index, self.hint = message, index, hint


def pragma_value(kind: str, items: list[tuple[str, str]]) -> str:
    """The one value of ``%#linview solve METHOD`` or ``%#linview tolerance 1e-10``;
    ``items`` are the (token kind, text) pairs after the pragma's kind."""
    want = "a method (" + ", ".join(SOLVE_METHODS) + ")" if kind == "solve" else \
        "a positive number"
    if len(items) != 1:
        raise PragmaProblem(f"'%#linview {kind}' takes exactly one value, {want}",
                            1 if items else 0)
    group, word = items[0]
    if kind == "solve" and (group != "name" or word not in SOLVE_METHODS):
        raise PragmaProblem(f"unknown solve method '{word}'", 0,
                            "valid methods: " + ", ".join(SOLVE_METHODS))
    if kind == "tolerance":
        try:
            ok = float(word) > 0
        except ValueError:
            ok = False
        if not ok:
            raise PragmaProblem(f"'%#linview tolerance' needs {want}, found '{word}'", 0,
                                "write e.g. '%#linview tolerance 1e-10'")
    return word


_PRAGMA_PREFIX = "%#linview"
_PRAGMA_LEX = re.compile(
    r"(?P<space>\s+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<int>\d+)(?![A-Za-z0-9_.])"
    r"|(?P<number>[0-9.]+(?:[eE][+-]?\d+)?\w*)|(?P<punct>[(),])|(?P<comment>[%#].*)"
    r"|(?P<bad>.)")
_KINDS_TEXT = ", ".join(PRAGMA_KINDS)


def parse_pragma(tok: Token) -> syntax.Pragma:
    """Read ``%#linview KIND ITEMS`` (one line).

    Items are names, or ``X(size, size, ...)`` specs whose sizes are names or integer
    literals; spaces and commas separate items; a ``%`` or ``#`` starts a trailing comment.

    Long on purpose: One tokenizer loop with one located error per malformed case.
    """
    text = str(tok).rstrip("\r")
    start = text.index(_PRAGMA_PREFIX)
    line, col0 = tok.line, tok.column  # column of text[0]
    words: list[tuple[str, str, int]] = []  # (kind, text, column)
    for m in _PRAGMA_LEX.finditer(text, start + len(_PRAGMA_PREFIX)):
        group = m.lastgroup
        if group == "comment":
            break
        if group != "space":
            words.append((group, m.group(), col0 + m.start()))
    end_col = col0 + len(text.rstrip())
    pos = (line, col0 + start)
    if not words or words[0][0] != "name":
        col = words[0][2] if words else end_col
        raise Problem("a '%#linview' pragma needs a kind", line, col,
                       f"valid kinds: {_KINDS_TEXT}")
    kind, kind_col = words[0][1], words[0][2]
    if kind not in PRAGMA_KINDS:
        raise Problem(f"unknown pragma kind '{kind}'", line, kind_col,
                       f"valid kinds: {_KINDS_TEXT}")
    if PRAGMA_KINDS[kind] in ("word", "number"):
        try:  # one value
            value = pragma_value(kind, [(g, w) for g, w, _ in words[1:]])
        except PragmaProblem as e:
            col = words[1 + e.index][2] if 1 + e.index < len(words) else end_col
            raise Problem(e.message, line, col, e.hint) from None
        return syntax.Pragma(kind, (value,), (), pos=pos)
    names: list[str] = []
    specs: list[syntax.DimSpec] = []
    i = 1

    def fail(message: str, at: int, hint: str | None = None) -> Problem:
        col = words[at][2] if at < len(words) else end_col
        return Problem(message, line, col, hint)

    def found(at: int) -> str:
        return f"'{words[at][1]}'" if at < len(words) else "the end of the line"

    while i < len(words):
        group, word, col = words[i]
        if word == ",":
            i += 1
            continue
        if group != "name":
            raise fail(f"found {found(i)} in a '{kind}' pragma, expected a name", i)
        if i + 1 < len(words) and words[i + 1][1] == "(":
            sizes: list[str | int] = []
            i += 2
            while True:
                if i < len(words) and words[i][0] in ("name", "int"):
                    w = words[i][1]
                    sizes.append(int(w) if words[i][0] == "int" else w)
                    i += 1
                else:
                    raise fail(f"found {found(i)}, expected a size (a name or an integer)",
                               i, f"write {word}(m, n)")
                if i < len(words) and words[i][1] == ",":
                    i += 1
                elif i < len(words) and words[i][1] == ")":
                    i += 1
                    break
                else:
                    raise fail(f"found {found(i)}, expected ',' or ')' in {word}(...)", i)
            specs.append(syntax.DimSpec(word, tuple(sizes), pos=(line, col)))
        else:
            names.append(word)
            i += 1
    if PRAGMA_KINDS[kind] == "names" and specs:
        raise Problem(f"'%#linview {kind}' takes names, not sizes", line, specs[0].pos[1],
                       f"write '%#linview {kind} {specs[0].name}' and give sizes in "
                       f"'%#linview dims {specs[0].name}(m, n)'")
    if PRAGMA_KINDS[kind] == "specs" and names:
        col = next(c for g, w, c in words[1:] if w == names[0])
        raise Problem(f"'%#linview {kind}' needs sizes for '{names[0]}'", line, col,
                       f"write {names[0]}(m, n); scalar inputs go in '%#linview scalar'")
    if not names and not specs:
        what = "a name" if PRAGMA_KINDS[kind] == "names" else "an item like X(m, n)"
        raise Problem(f"'%#linview {kind}' needs at least {what}", line, end_col)
    return syntax.Pragma(kind, tuple(names), tuple(specs), pos=pos)


# ---------------------------------------------------------------- error messages
