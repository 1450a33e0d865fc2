"""Line layout of generated modules: every line within :data:`WIDTH` columns.

Code lines are broken inside brackets, after commas or before binary ``+ - @``, at the
outermost level that has such a place (an assignment's right-hand side is parenthesized
first); comments and docstring lines are wrapped as text.  Generated code is meant to be
read, and the project's own limit is 100 columns.
"""

from __future__ import annotations

import io
import textwrap
import tokenize

WIDTH = 100
_OPENERS, _CLOSERS = "([{", ")]}"
_BINARY = {"+", "-", "@", "*", "/"}


def _tokens(text: str):
    """The tokens of ``text``, up to where it stops being tokenizable (a piece of a split
    line may close brackets it did not open)."""
    try:
        yield from tokenize.generate_tokens(io.StringIO(text + "\n").readline)
    except (tokenize.TokenError, SyntaxError):
        return


def _breaks(text: str) -> list[tuple[int, int]]:
    """``(depth, column)`` of every place ``text`` (one logical line) may be broken."""
    out: list[tuple[int, int]] = []
    depth, prev = 0, None
    for tok in _tokens(text):
        s, col = tok.string, tok.start[1]
        if tok.type == tokenize.OP and s in _OPENERS:
            depth += 1
        elif tok.type == tokenize.OP and s in _CLOSERS:
            depth -= 1
        elif tok.type == tokenize.OP and s == "," and depth:
            out.append((depth, tok.end[1]))
        elif (tok.type == tokenize.OP and s in _BINARY and depth and prev is not None
              and (prev.type in (tokenize.NAME, tokenize.NUMBER)
                   or prev.string in _CLOSERS)):
            out.append((depth, col))
        if tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            prev = tok
    return out


def _split(text: str, indent: str, cont: str) -> list[str]:
    if len(indent) + len(text) <= WIDTH:
        return [indent + text]
    end = len(text.rstrip())
    places = [(d, c) for d, c in _breaks(text) if d >= 1 and 0 < c < end]
    if not places:
        return [indent + text]
    depth = min(d for d, _ in places)
    cuts = [c for d, c in places if d == depth]
    pieces, start = [], 0
    for c in cuts:
        pieces.append(text[start:c].rstrip())
        start = c
    pieces.append(text[start:].strip())
    pieces = [p for p in pieces if p]
    lines: list[str] = []
    current, lead = "", indent
    for p in pieces:
        p = p.strip() if current else p
        joined = f"{current} {p}" if current and not p.startswith(("+", "-", "@", "*", "/")) \
            else (f"{current} {p}" if current else p)
        if current and len(lead) + len(joined) > WIDTH:
            lines.append((lead, current))
            current, lead = p, cont
        else:
            current = joined
    lines.append((lead, current))
    if len(lines) == 1:  # no place to break helps: leave the line long
        return [indent + text]
    out: list[str] = []
    for lead, line in lines:
        out += _split(line, lead, cont + "    ") if len(lead) + len(line) > WIDTH \
            else [lead + line]
    return out


def _strip_comment(body: str) -> tuple[str, str]:
    """``(code, "# comment")`` of a line with a trailing comment, else ``(body, "")``."""
    for tok in _tokens(body):
        if tok.type == tokenize.COMMENT and tok.start[1] > 0:
            return body[:tok.start[1]].rstrip(), tok.string
    return body, ""


def wrap_line(line: str) -> list[str]:
    """``line`` of generated Python as lines of at most :data:`WIDTH` columns (best effort)."""
    if len(line) <= WIDTH:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    if body.startswith("#"):
        return textwrap.wrap(body[1:].strip(), WIDTH,
                             initial_indent=indent + "# ", subsequent_indent=indent + "#   ",
                             break_long_words=False, break_on_hyphens=False)
    if body.startswith('"""') and body.endswith('"""') and len(body) > 6:
        words = textwrap.wrap(body[3:-3], WIDTH - len(indent) - 3, break_long_words=False)
        return [indent + '"""' + words[0]] + [indent + w for w in words[1:-1]] + \
            ([indent + words[-1] + '"""'] if len(words) > 1 else [indent + '"""'])
    code, comment = _strip_comment(body)
    if comment:  # the comment goes on its own line(s) above the code
        return wrap_line(indent + comment) + wrap_line(indent + code)
    head, sep, rhs = body.partition(" = ")
    if sep and head.isidentifier() and not rhs.startswith(("(", "[", "{")):
        body = f"{head} = ({rhs})"
    return _split(body, indent, indent + "    ")


def _wrap_text(line: str) -> list[str]:
    """A line of a docstring, wrapped as text at its own indentation."""
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(line.strip(), WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [line]


def wrap_module(text: str) -> str:
    """Every line of a generated module within :data:`WIDTH` columns (docstring lines are
    wrapped as text, code lines by :func:`wrap_line`)."""
    out: list[str] = []
    in_doc = False
    for line in text.split("\n"):
        quotes = line.count('"""')
        if len(line) <= WIDTH:
            out.append(line)
        elif in_doc or (quotes == 1 and line.lstrip().startswith('"""')):
            out += _wrap_text(line)
        else:
            out += wrap_line(line)
        in_doc = in_doc != (quotes % 2 == 1)
    return "\n".join(out)
