"""Every example with its matrix inputs given as ``scipy.sparse`` (no pragma): the same
values as the independent NumPy formulas of ``tests/test_examples.py``, after load and
after every update of its scenario (the sparse path against the references the dense path
is checked with)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps

try:
    from tests.test_examples import BY_NAME, NAMES, program, rel_err, scenario
except ImportError:  # pragma: no cover - run from inside tests/
    from test_examples import BY_NAME, NAMES, program, rel_err, scenario

from linview.backends.numpy.solve_module import SolveModule


def as_sparse(inputs: dict) -> dict:
    """Matrix inputs (2-D, not 1x1) as scipy CSR; vectors and numbers as they are."""
    return {k: sps.csr_matrix(v) if isinstance(v, np.ndarray) and v.ndim == 2
            and v.shape[1] > 1 else v for k, v in inputs.items()}


def dense(x):
    return x.toarray() if sps.issparse(x) else np.asarray(x)


@pytest.mark.parametrize("name", NAMES)
def test_example_with_sparse_inputs_matches_its_reference(name):
    ex, sc = BY_NAME[name], scenario(name)
    given = as_sparse(sc.inputs)
    if not any(sps.issparse(v) for v in given.values()):
        pytest.skip(f"{name} has no matrix input")
    views = program(name).load(**given)
    assert isinstance(views, SolveModule)
    tol = 1e-6

    def check(inputs):
        for out, want in ex.reference(inputs).items():
            got = dense(views[out]).reshape(np.shape(want))
            assert rel_err(got, want) < tol, (name, out)

    check(sc.inputs)
    for (inp, U, V), inputs in zip(sc.updates, sc.after, strict=True):
        views.update(inp, U, V)
        check(inputs)
