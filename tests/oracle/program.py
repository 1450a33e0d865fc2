"""The NumPy oracle: a generated program's inputs, updates and direct evaluation.

A :class:`GenProgram` is the source text of a generated function file together with the
sizes of its symbols, how to build well-scaled inputs and small low-rank updates from a
seed, and an evaluation of every statement with NumPy built from the same random choices
that produced the text (it never looks at linview's AST or IR).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oracle.expr import Dim, Shape


# ---------------------------------------------------------------------------- programs
@dataclass
class InputSpec:
    name: str
    shape: Shape
    kind: str  # "dense" | "dd" (diagonally dominant square) | "scalar"
    declared: bool = True  # sizes given in '%#linview dims'


@dataclass
class GenProgram:
    """A generated program: source text plus an independent NumPy oracle."""

    source: str
    name: str
    sizes: dict[str, int]
    inputs: dict[str, InputSpec]
    dynamic: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: list = field(repr=False)  # ("assign", name, Ex) | ("loop", trips, [(name, Ex)])

    # -- sizes and data
    def size(self, d: Dim) -> int:
        return sum(1 if s == "1" else self.sizes[s] for s in d)

    def shape_of(self, name: str) -> tuple[int, int]:
        r, c = self.inputs[name].shape
        return self.size(r), self.size(c)

    @property
    def compile_dims(self) -> dict[str, int]:
        """Sizes of the symbols that appear in '%#linview dims' (safe to pass to compile)."""
        used = {s for spec in self.inputs.values() if spec.declared and spec.kind != "scalar"
                for d in spec.shape for s in d if s != "1"}
        return {s: v for s, v in self.sizes.items() if s in used}

    def make_inputs(self, seed: int) -> dict[str, np.ndarray]:
        """Well-scaled inputs: dense ~ N(0, 0.25/n) (norm ~1), dd = I + 0.2 N/sqrt(n),
        scalars uniform in [0.5, 1.2].  Every array is 2-D float64."""
        rng = np.random.default_rng(seed)
        out = {}
        for name, spec in self.inputs.items():
            r, c = self.shape_of(name)
            if spec.kind == "scalar":
                out[name] = np.array([[rng.uniform(0.5, 1.2)]])
            elif spec.kind == "dd":
                out[name] = np.eye(r) + 0.2 * rng.standard_normal((r, c)) / np.sqrt(r)
            else:
                out[name] = 0.5 * rng.standard_normal((r, c)) / np.sqrt(max(r, c))
        return out

    def make_update(self, name: str, rank: int, seed: int,
                    kind: str = "dense") -> tuple[np.ndarray, np.ndarray]:
        """Small factors ``U (rows×rank)``, ``V (cols×rank)``: entries ~ 0.1 N/sqrt(size), so
        that ``‖U Vᵀ‖ ≈ 0.01·rank`` and well-conditioned inputs stay well conditioned.

        ``kind`` shapes the update as users make them: ``dense``; ``row`` (U one-hot: whole
        rows change), ``col`` (V one-hot: whole columns change), ``cell`` (both one-hot)."""
        rng = np.random.default_rng(seed)
        r, c = self.shape_of(name)
        U = 0.1 * rng.standard_normal((r, rank)) / np.sqrt(r)
        V = 0.1 * rng.standard_normal((c, rank)) / np.sqrt(c)

        def one_hot(n: int) -> np.ndarray:
            E = np.zeros((n, rank))
            E[rng.integers(0, n, size=rank), np.arange(rank)] = 1.0
            return E

        if kind in ("row", "cell"):
            U = one_hot(r) * 0.1
        if kind in ("col", "cell"):
            V = one_hot(c) * (0.1 if kind == "col" else 1.0)
        return U, V

    # -- the oracle
    def _run(self, inputs: dict[str, np.ndarray]) -> dict:
        env = {k: np.array(v, dtype=float, ndmin=2) for k, v in inputs.items()}
        env["__max__"] = [0.0]
        for step in self.steps:
            if step[0] == "assign":
                _, name, ex = step
                env[name] = ex.fn(env)
            else:
                _, trips, body = step
                for _ in range(trips):
                    for name, ex in body:
                        env[name] = ex.fn(env)
        return env

    def evaluate(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The program's outputs computed directly with NumPy."""
        with np.errstate(all="ignore"):
            env = self._run(inputs)
        return {o: env[o] for o in self.outputs}

    def max_magnitude(self, inputs: dict[str, np.ndarray]) -> float:
        """The largest absolute value of any intermediate result (inf if non-finite)."""
        with np.errstate(all="ignore"):
            env = self._run(inputs)
        return env["__max__"][0]

    def __repr__(self) -> str:
        return f"GenProgram(\n{self.describe()}\n)"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer
        printer.text(repr(self))

    def describe(self) -> str:
        return (f"{self.source}\n% sizes {self.sizes}; dynamic {self.dynamic}; "
                f"inputs " + ", ".join(f"{n}:{s.kind}" for n, s in self.inputs.items()))


def bindings(program, inputs: dict[str, np.ndarray]) -> dict[str, int]:
    """Sizes of the program's symbols, read off the input arrays."""
    out: dict[str, int] = {}
    for decl in program.inputs:
        for axis, d in enumerate(decl.shape):
            if getattr(d, "is_Symbol", False):
                out[d.name] = inputs[decl.name].shape[axis]
    return out
