"""A second, small compiler used as an oracle by the differential suite.

Hypothesis strategies that draw random well-typed linview programs (DESIGN.md §3) as
**source text**, each with an independent NumPy evaluation built from the same random
choices (it never looks at linview's AST or IR), and random low-rank update sequences:

* :mod:`oracle.expr`: generated expressions (source text + NumPy evaluator, shapes);
* :mod:`oracle.program`: :class:`GenProgram`, the NumPy oracle (inputs, updates,
  evaluation, magnitude of intermediates);
* :mod:`oracle.leaves`, :mod:`oracle.operators`, :mod:`oracle.programs`: random program
  generation (leaves and well-conditioned operands, operators, whole function files);
* :mod:`oracle.updates`: update sequences and :class:`Case` for the properties.

Inverses and divisions are only ever taken of expressions that are well conditioned by
construction:

* ``inv`` / ``\\`` / ``/`` apply to ``eye(k) + c*E'*E`` (eigenvalues >= 1), to square
  inputs the test makes diagonally dominant (``I + 0.2 N/sqrt(n)``, updates stay small),
  to transposes, positive multiples and inverses of those;
* ``./`` divides by ``ones(r, c) + E .* E`` (>= 1 elementwise), and ``/ s`` by positive
  literals, scalar inputs (drawn in [0.5, 1.2]) or ``1 + x*x``.

Magnitudes are not bounded by construction (powers, sums); tests should reject programs
whose intermediates exceed a bound with :meth:`GenProgram.max_magnitude`.
"""

from oracle.program import GenProgram, InputSpec
from oracle.programs import programs
from oracle.updates import MODELS, UPDATE_KINDS, Case, Update, cases, update_sequences

__all__ = ["MODELS", "UPDATE_KINDS", "Case", "GenProgram", "InputSpec", "Update", "cases",
           "programs", "update_sequences"]
