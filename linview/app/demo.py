"""``linview demo`` (``make demo``): keep an OLS model fresh while rows of X change.

The program is embedded here so the demo runs from an installed package.
"""

from __future__ import annotations

from linview.errors import InputError

OLS = """\
function beta = ols(X, Y)
  % Ordinary least squares: the beta minimizing ||X*beta - Y||.
  %#linview dynamic X Y
  %#linview dims X(m,n) Y(m,p)
  beta = (X' * X) \\ (X' * Y);
end
"""


def demo(backend: str = "numpy", n: int = 1000, updates: int = 20) -> int:


    import linview
    from linview.app import report
    from linview.app.bench import run_bench
    from linview.app.report import print_bench

    if n < 1 or updates < 1:
        raise InputError(f"the demo needs n >= 1 features and at least one update (got n = "
                         f"{n}, {updates} updates)")
    console = report.console()
    dims = {"m": 2 * n, "n": n, "p": 1}
    console.rule("[bold]linview demo: ordinary least squares")
    console.print(OLS, markup=False, highlight=False)
    prog = linview.compile(OLS, name="ols", dims=dims, backend=backend)
    console.print(prog.explain(), markup=False, highlight=False)
    console.rule(f"[bold]{updates} row updates of X ({2 * n}×{n}), measured")
    result = run_bench(prog, updates=updates, strategies=["reeval", "auto"])
    print_bench(console, result)
    return 0
