"""Generated modules are meant to be read: every line within 100 columns, and the line
breaking (``backends/layout.py``) never changes what the code means."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linview
from linview.backends.layout import WIDTH, wrap_line

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.m"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("backend", ["numpy", "spark"])
def test_generated_lines_fit_the_width(path, backend):
    prog = linview.compile_file(path, backend=backend)  # Spark compiles every example too
    source = getattr(prog, "source", "")
    long = [line for line in source.splitlines() if len(line) > WIDTH]
    assert not long, f"{path.name}: {len(long)} lines over {WIDTH} columns: {long[0]}"
    ast.parse(source)


names = st.sampled_from(["A", "U_beta_inv", "V_beta_arg", "beta_p1", "D_theta_12", "t3"])


@st.composite
def expressions(draw, depth=0):
    if depth > 3 or draw(st.booleans()):
        return draw(names) + draw(st.sampled_from(["", ".T"]))
    kind = draw(st.sampled_from(["bin", "call", "paren", "list"]))
    if kind == "bin":
        op = draw(st.sampled_from(["+", "-", "@", "*"]))
        return f"{draw(expressions(depth + 1))} {op} {draw(expressions(depth + 1))}"
    if kind == "call":
        args = draw(st.lists(expressions(depth + 1), min_size=1, max_size=4))
        return f"rt.fused_dot({', '.join(args)}, ops='NT')"
    if kind == "list":
        args = draw(st.lists(expressions(depth + 1), min_size=1, max_size=5))
        return f"np.hstack([{', '.join(args)}])"
    return f"({draw(expressions(depth + 1))})"


@settings(max_examples=200, deadline=None)
@given(target=names, expr=expressions(), indent=st.sampled_from([4, 8, 12]),
       comment=st.booleans())
def test_wrapping_keeps_the_meaning(target, expr, indent, comment):
    line = " " * indent + f"{target} = {expr}" + ("  # ΔC = U_C V_Cᵀ" if comment else "")
    wrapped = wrap_line(line)
    text = textwrap.dedent("\n".join(wrapped))
    assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(line.strip()))
    code = [w for w in wrapped if not w.lstrip().startswith("#")]
    assert all(len(w) <= WIDTH for w in code) or len(code) == 1
