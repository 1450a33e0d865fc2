"""Run an example ``.m`` function in GNU Octave (``octave-cli``) and read its outputs back.

Not a test module: the conformance tests import it.  Inputs travel to Octave through a
MAT file written by :func:`scipy.io.savemat`; the function is called with them in the
order of its parameter list; its outputs come back through ``save('-v7', ...)`` and
:func:`scipy.io.loadmat`.  One Octave process can evaluate the function on several input
sets (:func:`run_octave_many`), so a test pays Octave's start-up once per example.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import scipy.io

OCTAVE = "octave-cli"
TIMEOUT_S = 120

_FUNCTION_LINE = re.compile(
    r"^\s*function\s+(?:(?:\[(?P<outs>[^\]]*)\]|(?P<out>\w+))\s*=\s*)?"
    r"(?P<name>\w+)\s*(?:\((?P<params>[^)]*)\))?",
    re.MULTILINE,
)


class OctaveError(RuntimeError):
    """Octave failed, timed out, or did not produce the requested outputs."""


def octave_available() -> bool:
    """Whether ``octave-cli`` is on the PATH."""
    return shutil.which(OCTAVE) is not None


def function_signature(m_file: Path) -> tuple[str, list[str], list[str]]:
    """``(name, parameters, outputs)`` of the function defined in ``m_file``."""
    text = Path(m_file).read_text()
    m = _FUNCTION_LINE.search(text)
    if m is None:
        raise OctaveError(f"{m_file} is not an Octave function file (no 'function' line)")
    outs = m.group("outs") if m.group("outs") is not None else (m.group("out") or "")
    params = m.group("params") or ""
    split = lambda s: [w for w in re.split(r"[\s,]+", s.strip()) if w]  # noqa: E731
    return m.group("name"), split(params), split(outs)


def _as_octave_value(x) -> np.ndarray:
    """A 2-D float64 array (1-D arrays are columns, numbers are 1x1)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"Octave inputs must be at most 2-D, got shape {a.shape}")
    return a


def run_octave_many(m_file: Path, input_sets: Sequence[Mapping[str, np.ndarray | float]],
                    outputs: list[str], *, fail_on_warning: bool = False
                    ) -> list[dict[str, np.ndarray]]:
    """Call the function of ``m_file`` once per input set, all in one Octave process.

    Each input set maps every parameter name of the function to its value; the function
    is called with them in parameter order and must return ``outputs`` (names of its
    return values).  Returns one ``{output: 2-D array}`` per input set.  With
    ``fail_on_warning``, an Octave warning (e.g. "matrix singular to machine precision")
    is an error too.
    """
    m_file = Path(m_file).resolve()
    if not octave_available():
        raise OctaveError(f"{OCTAVE} is not installed (GNU Octave)")
    fname, params, returns = function_signature(m_file)
    if fname != m_file.stem:
        raise OctaveError(f"{m_file.name} defines '{fname}': Octave needs the file to be "
                          f"called {fname}.m")
    missing = [o for o in outputs if o not in returns]
    if missing:
        raise OctaveError(f"{fname} has no output(s) {', '.join(missing)}; "
                          f"it returns [{', '.join(returns)}]")
    nout = max(returns.index(o) for o in outputs) + 1 if outputs else 0

    with tempfile.TemporaryDirectory(prefix="linview-octave-") as tmp:
        tmpdir = Path(tmp)
        # an example may share its name with an Octave function (ols.m does): that is
        # intended, the example folder goes first on the path
        script = ["warning('off', 'Octave:shadowed-function');",
                  f"addpath('{_quote(m_file.parent)}');"]
        for k, inputs in enumerate(input_sets):
            extra = sorted(set(inputs) - set(params))
            absent = [p for p in params if p not in inputs]
            if extra or absent:
                raise OctaveError(f"inputs for {fname}({', '.join(params)}) do not match: "
                                  f"missing {absent or 'none'}, unknown {extra or 'none'}")
            in_path = tmpdir / f"in{k}.mat"
            out_path = tmpdir / f"out{k}.mat"
            scipy.io.savemat(in_path, {p: _as_octave_value(inputs[p]) for p in params},
                             oned_as="column")
            lhs = ", ".join(returns[:nout])
            args = ", ".join(f"lvin__.{p}" for p in params)
            script += [
                f"lvin__ = load('{_quote(in_path)}');",
                f"[{lhs}] = {fname}({args});" if nout else f"{fname}({args});",
                f"save('-v7', '{_quote(out_path)}', {', '.join(repr(o) for o in outputs)});",
                f"clear {' '.join(returns[:nout])} lvin__;",
            ]
        cmd = [OCTAVE, "--no-gui", "--quiet", "--norc", "--no-history", "--eval",
               "\n".join(script)]
        try:
            proc = subprocess.run(cmd, cwd=tmpdir, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise OctaveError(f"octave-cli did not finish {fname} within {TIMEOUT_S} s") \
                from None
        if proc.returncode != 0:
            raise OctaveError(f"octave-cli failed on {m_file} (exit {proc.returncode}):\n"
                              f"{proc.stderr.strip() or proc.stdout.strip()}")
        if fail_on_warning and "warning:" in proc.stderr:
            raise OctaveError(f"octave-cli warned while running {m_file}:\n"
                              f"{proc.stderr.strip()}")
        results = []
        for k in range(len(input_sets)):
            out_path = tmpdir / f"out{k}.mat"
            if not out_path.exists():
                raise OctaveError(f"octave-cli wrote no outputs for {fname} (call {k}):\n"
                                  f"{proc.stderr.strip()}")
            data = scipy.io.loadmat(out_path)
            results.append({o: np.asarray(data[o], dtype=np.float64) for o in outputs})
        return results


def run_octave(m_file: Path, inputs: Mapping[str, np.ndarray | float],
               outputs: list[str], *, fail_on_warning: bool = False) -> dict[str, np.ndarray]:
    """Call the function of ``m_file`` on ``inputs`` in ``octave-cli``; return ``outputs``."""
    return run_octave_many(m_file, [inputs], outputs, fail_on_warning=fail_on_warning)[0]


def _quote(path) -> str:
    """A path as the inside of an Octave single-quoted string."""
    return str(path).replace("'", "''")
