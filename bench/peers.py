"""Peers measured beside linview in the same run (``bench/run_all.py``).

Each peer takes the benchmark's inputs and update stream and returns per-update seconds:

* ``numpy``: the program as a NumPy user writes it (loops as loops, ``matrix_power``,
  ``solve``), re-run after each update applied in place;
* ``octave``: GNU Octave running the same ``.m`` file on the same inputs, timed inside
  Octave (``tic``/``toc`` around each call; start-up excluded);
* OLS: ``normal_cholesky`` keeps ``XᵀX`` and ``XᵀY`` up to date (one rank-2 pass per
  changed row) and re-solves with a Cholesky factorisation; ``recursive_ls`` (statsmodels)
  and ``intelex`` (scikit-learn-intelex) are append-only: each changed row is appended as
  a new observation instead (a different update of the same size; see their functions);
* PageRank: ``scipy_sparse`` runs the same number of damped power-iteration steps with a
  ``scipy.sparse`` matrix of the same size and 8 links per page (a different, sparse
  input: the time a sparse representation gives, not the same computation).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.linalg
import scipy.sparse as sps


def _times(step, stream) -> list[float]:
    out = []
    for U, V in stream:
        t0 = time.perf_counter()
        step(U, V)
        out.append(time.perf_counter() - t0)
    return out


def _apply(X: np.ndarray, U: np.ndarray, V: np.ndarray) -> None:
    rows = np.flatnonzero(U.any(axis=1))
    X[rows] += U[rows] @ V.T


def _pagerank(M, r, d, steps):
    c = (1 - d) / M.shape[0]
    for _ in range(steps):
        r = d * (M @ r) + c
    return r


#: the programs as a NumPy user writes them (inputs by name; outputs discarded)
NUMPY = {
    "ols": lambda X, Y: np.linalg.solve(X.T @ X, X.T @ Y),
    "ols_inv": lambda X, Y: np.linalg.inv(X.T @ X) @ (X.T @ Y),
    "powers": lambda A: (np.linalg.matrix_power(A, 4), np.linalg.matrix_power(A, 16)),
    "markov": lambda P, p0: np.linalg.matrix_power(P, 8).T @ p0,
    "pagerank": lambda M, r0, d: _pagerank(M, r0, d, 10),
}


def _general_form(A, B, T0):
    T = T0
    for _ in range(16):
        T = A @ T + B
    return T


def _gradient_descent(X, Y, theta0, alpha):
    theta = theta0
    for _ in range(10):
        theta = theta - alpha * (X.T @ (X @ theta - Y))
    return theta


def _sums_of_powers(A):
    P, S = A, np.eye(A.shape[0]) + A
    for _ in range(2, 16):
        P = P @ A
        S = S + P
    return S


NUMPY.update(general_form=_general_form, gradient_descent=_gradient_descent,
             sums_of_powers=_sums_of_powers)


def numpy_as_written(program: str, inputs: dict, x: str, stream) -> list[float] | None:
    fn = NUMPY.get(program)
    if fn is None:
        return None
    arrays = {k: (np.array(v, order="F") if isinstance(v, np.ndarray) else v)
              for k, v in inputs.items()}
    for k, v in arrays.items():
        if isinstance(v, np.ndarray) and v.ndim == 1:
            arrays[k] = v.reshape(-1, 1)

    def step(U, V):
        _apply(arrays[x], U, V)
        fn(**arrays)

    return _times(step, stream)


def normal_cholesky(inputs: dict, x: str, stream) -> list[float] | None:
    """OLS peer: keep G = XᵀX and b = XᵀY; a changed row i is a rank-2 change of G."""
    if x != "X":
        return None
    X = np.array(inputs["X"], order="F")
    Y = np.asarray(inputs["Y"]).reshape(X.shape[0], -1)
    G = np.asfortranarray(X.T @ X)
    b = X.T @ Y
    blas = scipy.linalg.blas

    def step(U, V):
        for i in np.flatnonzero(U.any(axis=1)):
            old = X[i].copy()
            X[i] += V @ U[i]
            new = X[i]
            P = np.column_stack([new, old])
            Q = np.column_stack([new, -old])
            blas.dgemm(1.0, P, Q, beta=1.0, c=G, trans_b=True, overwrite_c=True)
            b[:] += np.outer(new - old, Y[i])
        scipy.linalg.cho_solve(scipy.linalg.cho_factor(G, check_finite=False), b,
                               check_finite=False)

    return _times(step, stream)


def _changed_rows(X, U, V):
    """Apply ``X += U Vᵀ`` on the touched rows and yield each row's index."""
    for i in np.flatnonzero(U.any(axis=1)):
        X[i] += V @ U[i]
        yield i


def recursive_ls(inputs: dict, x: str, stream) -> list[float] | None:
    """OLS peer, append-only: statsmodels' ``RecursiveLS`` (its Kalman filter) takes each
    changed row as one *new* observation, starting from the current fit (the coefficients
    and ``inv(XᵀX)`` as its known initial state, as ``results.extend`` does; the result is
    least squares over the rows so far, to rounding).  It cannot remove the old row, so
    this is a different update of the same size: the time of one step of its recursion.
    None when statsmodels is not installed."""
    try:
        from statsmodels.regression.recursive_ls import RecursiveLS
    except ImportError:
        return None
    if x != "X" or np.asarray(inputs["Y"]).reshape(len(inputs["X"]), -1).shape[1] != 1:
        return None
    X = np.array(inputs["X"], order="F")
    y = np.asarray(inputs["Y"], dtype=float).reshape(-1)
    P = np.linalg.inv(X.T @ X)
    state = {"beta": P @ (X.T @ y), "P": P}

    def step(U, V):
        for i in _changed_rows(X, U, V):
            mod = RecursiveLS(y[i:i + 1], X[i:i + 1], initialization="known",
                              initial_state=state["beta"], initial_state_cov=state["P"])
            # unit observation variance, so the covariance stays inv(XᵀX) (a concentrated
            # filter reports it scaled by the one observation's variance estimate)
            mod.ssm.filter_concentrated = False
            res = mod.filter(return_ssm=True)
            state["beta"] = res.filtered_state[:, -1]
            state["P"] = res.filtered_state_cov[:, :, -1]

    return _times(step, stream)


def intelex_incremental(inputs: dict, x: str, stream) -> list[float] | None:
    """OLS peer, append-only: scikit-learn-intelex's ``IncrementalLinearRegression``
    (oneDAL) fitted on X, then each changed row ``partial_fit`` as one new observation and
    the coefficients read (which finalizes: a solve with the accumulated XᵀX).  None when
    it is not installed."""
    try:
        from sklearnex.linear_model import IncrementalLinearRegression
    except ImportError:
        return None
    if x != "X":
        return None
    X = np.array(inputs["X"], order="F")
    Y = np.asarray(inputs["Y"], dtype=float).reshape(X.shape[0], -1)
    model = IncrementalLinearRegression(fit_intercept=False)
    model.partial_fit(X, Y)

    def step(U, V):
        for i in _changed_rows(X, U, V):
            model.partial_fit(X[i:i + 1], Y[i:i + 1])
        model.coef_  # noqa: B018 - reading it finalizes the fit

    return _times(step, stream)


def scipy_sparse_pagerank(inputs: dict, stream, steps: int = 10, links: int = 8,
                          seed: int = 0) -> list[float]:
    """Damped power iteration on a sparse column-stochastic matrix of the same size; each
    update changes one column (its links), then the steps run again."""
    n = inputs["M"].shape[0]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=n * links)
    cols = np.repeat(np.arange(n), links)
    M = sps.csc_matrix((np.full(n * links, 1.0 / links), (rows, cols)), shape=(n, n))
    r0 = np.full(n, 1.0 / n)
    d = float(inputs.get("d", 0.85))

    def step(U, V):
        j = int(rng.integers(n))
        col = np.zeros(n)
        col[rng.integers(0, n, size=links)] = 1.0 / links
        M[:, j] = col.reshape(-1, 1)  # the column of page j's links (CSC: a column write)
        _pagerank(M, r0, d, steps)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.SparseEfficiencyWarning)
        return _times(step, stream)


def octave(m_file: Path, inputs: dict, x: str, stream, timeout: int = 900) -> list[float] | None:
    """Per-update seconds of GNU Octave running ``m_file`` after each update, timed inside
    Octave; None when ``octave-cli`` is not installed."""
    if shutil.which("octave-cli") is None:
        return None
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from octave_runner import function_signature

    name, params, outs = function_signature(m_file)
    with tempfile.TemporaryDirectory() as tmp:
        data = {p: np.atleast_2d(np.asarray(inputs[p], dtype=float)) for p in params}
        for p, v in data.items():
            if v.shape[0] == 1 and np.ndim(inputs[p]) == 1:
                data[p] = v.T
        data["UPD_U"] = np.stack([U for U, _ in stream], axis=2)
        data["UPD_V"] = np.stack([V for _, V in stream], axis=2)
        scipy.io.savemat(f"{tmp}/in.mat", data)
        call = f"[{', '.join(outs)}] = {name}({', '.join(params)});"
        script = "\n".join([
            f"addpath('{Path(m_file).resolve().parent}');",
            f"load('{tmp}/in.mat');",
            call,  # warm-up: Octave parses the function on its first call
            "LV_T = zeros(1, size(UPD_U, 3));",
            "for LV_I = 1:size(UPD_U, 3)",
            f"  {x} = {x} + UPD_U(:, :, LV_I) * UPD_V(:, :, LV_I)';",
            "  LV_T0 = tic;",
            f"  {call}",
            "  LV_T(LV_I) = toc(LV_T0);",
            "end",
            "printf('%.9g\\n', LV_T);",
        ])
        Path(f"{tmp}/run_peer.m").write_text(script)
        res = subprocess.run(["octave-cli", "--no-gui", "-q", f"{tmp}/run_peer.m"],
                             capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"octave failed: {res.stderr[-500:]}")
    return [float(t) for t in res.stdout.split()]


def summary(times: list[float] | None) -> dict | None:
    if not times:
        return None
    t = np.array(times)
    return {"median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
            "p90_s": float(np.percentile(t, 90)), "mean_s": float(t.mean())}
