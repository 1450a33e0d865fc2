"""The Spark module of a program with solve views or sparse inputs.

It is the NumPy backend's solve module (:mod:`linview.backends.numpy.solve_codegen`: solve
views, a solve side re-evaluated in program order, sparse and stochastic inputs in their
storage) printed with the Spark runtime: the views off the solve side are placed and
updated as in any Spark module (``PARTITIONING``), the wider language's ops call the Spark
runtime (:data:`..render.SPARK_RENDER`), and the base class is
:class:`.solve_module.SparkSolveModule`, which keeps every solve view, its solver and its
operands on the driver (the solvers of :mod:`linview.solve`: push and Krylov are
sequential sparse kernels).
"""

from __future__ import annotations

from linview.backends.numpy.solve_codegen import SolveGenerator, SparsePrinter
from linview.backends.spark.codegen import SparkGenerator
from linview.backends.spark.render import SparkPrinter, locate_word
from linview.compiler.plan import Plan


class SparkSparsePrinter(SparsePrinter, SparkPrinter):
    """Sparse values on the solve side as on NumPy; every other op as Spark prints it."""


class SparkSolveGenerator(SolveGenerator, SparkGenerator):
    """The solve generator with the Spark runtime, base class and partitioning table."""

    BASE_CLASS = "sv.SparkSolveModule"

    def __init__(self, plan: Plan):
        super().__init__(plan)
        stochastic = frozenset(n for n, k in self.storage.items() if k == "stochastic")
        self.on_driver = frozenset(self.sparse_leaves) | frozenset(self.solves)  # not in blocks
        # the Spark printer, knowing each view's statement (ops on the driver say where)
        self.PRINTER = type("SparkSparsePrinter", (SparkSparsePrinter,), {
            "statements": {st.name: st for st in plan.program.statements},
            "source": plan.program.source, "stochastic": stochastic})

    def module_doc(self) -> list[str]:
        doc = SparkGenerator.module_doc(self)
        return doc[:-1] + [
            "Solve views (SOLVES) are kept with their residuals by the solvers of "
            "linview/solve/ on the",
            "driver, through sv.SparkSolveModule; the triggers hand them the changes of "
            "their A and B.", '"""']

    def class_attributes(self) -> list[str]:
        at = {name: locate_word(self.prog.source, self.prog.statement(name).line, "\\")
              for name in self.solves if self.prog.statement(name).line}
        return (SparkGenerator.class_attributes(self) + SolveGenerator.class_attributes(self)
                + [f"    SOLVE_AT = {at!r}  # (line, column) of each solve view's backslash"])

    def generate(self) -> str:
        text = SparkGenerator.generate(self)
        head = f"from {self.RUNTIME} import runtime as rt\n"
        return text.replace(head, head + "from linview.backends.spark import solve_module "
                            "as sv\n", 1)


def generate(plan: Plan) -> str:
    """The source text of the Spark module for ``plan`` (a program with a solve side)."""
    return SparkSolveGenerator(plan).generate()


__all__ = ["generate", "SparkSolveGenerator"]
