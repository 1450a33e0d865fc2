"""Update-sequence strategies: low-rank updates of a generated program's dynamic inputs,
and :class:`Case` (program, input seed, updates, compile options) for the differential
properties."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from oracle.program import GenProgram
from oracle.programs import programs


@dataclass(frozen=True)
class Update:
    name: str
    rank: int
    seed: int
    kind: str = "dense"  # dense | row | col | cell (see GenProgram.make_update)


UPDATE_KINDS = ("dense", "row", "col", "cell")


def update_sequences(prog: GenProgram, min_size: int = 1, max_size: int = 4):
    """Lists of updates to the program's dynamic inputs (rank 1..3, small entries)."""
    if not prog.dynamic:
        return st.just([])
    item = st.builds(Update, st.sampled_from(prog.dynamic), st.integers(1, 3),
                     st.integers(0, 2**32 - 1), st.sampled_from(UPDATE_KINDS))
    return st.lists(item, min_size=min_size, max_size=max_size)


MODELS = ("auto", "exp", "linear", "skip=2", "skip=3")


@dataclass
class Case:
    """A program, an input seed, an update sequence and the compile options to use."""

    prog: GenProgram
    seed: int
    updates: list[Update]
    model: str = "auto"  # iterative model passed to linview.compile
    plan_dims: bool = True  # pass the sizes to linview.compile (else plan symbolically)

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        ups = ", ".join(f"{u.name}(rank {u.rank}, seed {u.seed}, {u.kind})"
                        for u in self.updates)
        return (f"Case(seed={self.seed}, model={self.model!r}, plan_dims={self.plan_dims}, "
                f"updates=[{ups}])\n{self.prog.describe()}")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@st.composite
def cases(draw, max_updates: int = 4, **kwargs) -> Case:  # kwargs: see programs()
    """A program, an input seed, an update sequence and compile options."""
    prog = draw(programs(**kwargs))
    seed = draw(st.integers(0, 2**32 - 1))
    ups = draw(update_sequences(prog, 1, max_updates))
    model = draw(st.sampled_from(MODELS))
    plan_dims = draw(st.integers(0, 99)) < 80
    return Case(prog, seed, ups, model, plan_dims)
