"""Machine calibration for the cost model: measured rates, cached per machine.

The seconds model (:mod:`linview.compiler.timemodel`) needs seven numbers of the machine it runs on:

* ``gemm_flops``: flop/s of a large matrix product with every BLAS thread (re-evaluation);
* ``gemm1_flops``: the same on one BLAS thread (a maintaining trigger, see
  :data:`linview.backends.numpy.runtime.TRIGGER_THREADS`);
* ``stream_bytes`` / ``stream1_bytes``: bytes/s of a matrix-vector product over a matrix
  larger than the caches (memory streaming), with every thread / one thread;
* ``thin_bytes`` / ``thin1_bytes``: bytes/s of the matrix in a product of that large matrix
  with a thin block (4 columns), every thread / one thread.  BLAS packs the matrix before
  multiplying, so a thin product costs several passes over its memory, not one: this rate
  is what a trigger's factor products run at;
* ``call_s``: seconds of one small NumPy/BLAS call (Python and dispatch overhead).

:func:`rates` returns them from a cache file (``$LINVIEW_CACHE_DIR``, else
``$XDG_CACHE_HOME/linview``, else ``~/.cache/linview``; ``calibration.json``) or measures
them (about a second) and writes the cache.  The cache is checked before it is trusted: its
format version, a checksum of its contents, the machine fingerprint (host, CPU, cores,
NumPy and BLAS library) and the range of every rate.  A corrupt, edited or foreign file is
measured again, never used.  ``linview calibrate`` measures on demand.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

VERSION = 2
#: plausible range of every rate; a value outside it marks the cache as corrupt
RANGES = {"gemm_flops": (1e7, 1e15), "gemm1_flops": (1e7, 1e15), "stream_bytes": (1e7, 1e13),
          "stream1_bytes": (1e7, 1e13), "thin_bytes": (1e7, 1e13), "thin1_bytes": (1e7, 1e13),
          "call_s": (1e-8, 1e-2)}


@dataclass(frozen=True)
class Rates:
    """Measured rates of one machine (see the module docstring)."""

    gemm_flops: float
    gemm1_flops: float
    stream_bytes: float
    stream1_bytes: float
    thin_bytes: float
    thin1_bytes: float
    call_s: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


#: the rates decisions use when calibration is off (``LINVIEW_CALIBRATION=off``): a modest
#: two-core machine; also the reference the test suite plans with, so its choices do not
#: depend on the machine that runs it
REFERENCE = Rates(gemm_flops=5e10, gemm1_flops=2.5e10, stream_bytes=1e10,
                  stream1_bytes=1e10, thin_bytes=4e9, thin1_bytes=3e9, call_s=3e-6)


def cache_path() -> Path:
    base = os.environ.get("LINVIEW_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = str(Path(xdg) / "linview") if xdg else str(Path.home() / ".cache" / "linview")
    return Path(base) / "calibration.json"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def fingerprint() -> dict:
    """What identifies the machine and the BLAS the rates were measured with."""
    import scipy.linalg.blas  # noqa: F401 - load scipy's BLAS too, as triggers do
    from threadpoolctl import threadpool_info

    blas = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('num_threads')}"
                  for i in threadpool_info() if i.get("user_api") == "blas")
    return {"host": platform.node(), "machine": platform.machine(), "cpu": _cpu_model(),
            "cpus": os.cpu_count(), "numpy": np.__version__, "blas": blas}


def _checksum(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _best(fn, repeat: int) -> float:
    """The fastest of ``repeat`` runs (the least disturbed by other load)."""
    fn()  # warm up
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def measure(scale: float = 1.0) -> Rates:
    """Measure the rates here (``scale`` < 1 shrinks the operands, for tests)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    n = max(64, int(1000 * scale))
    A = np.asfortranarray(rng.standard_normal((n, n)))
    B = np.asfortranarray(rng.standard_normal((n, n)))
    m = max(256, int(4000 * scale))  # 128 MB: larger than the caches
    M = np.asfortranarray(rng.standard_normal((m, m)))
    x = rng.standard_normal(m)
    thin = np.asfortranarray(rng.standard_normal((m, 4)))
    s = rng.standard_normal((4, 4))
    gemm = 2 * n ** 3 / _best(lambda: A @ B, 3)
    stream = 8 * m * m / _best(lambda: M @ x, 5)
    thin_all = 8 * m * m / _best(lambda: M @ thin, 3)
    with threadpool_limits(limits=1, user_api="blas"):
        gemm1 = 2 * n ** 3 / _best(lambda: A @ B, 2)
        stream1 = 8 * m * m / _best(lambda: M @ x, 5)
        thin1 = 8 * m * m / _best(lambda: M @ thin, 3)
        v = rng.standard_normal((256, 1))
        # a trigger's small operations: thin products, a scaled sum, a concatenation
        call = _best(lambda: [(v @ (v.T @ v), s @ s, 0.5 * v + v, np.hstack([v, v]))
                              for _ in range(100)], 5) / 500
    return Rates(gemm_flops=gemm, gemm1_flops=gemm1, stream_bytes=stream,
                 stream1_bytes=stream1, thin_bytes=thin_all, thin1_bytes=thin1, call_s=call)


def save(r: Rates, path: Path | None = None) -> Path:
    """Write ``r`` with this machine's fingerprint and a checksum (atomically)."""
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"version": VERSION, "fingerprint": fingerprint(), "rates": r.as_dict(),
               "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    doc = {**payload, "checksum": _checksum(payload)}
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, path)
    return path


def load(path: Path | None = None) -> tuple[Rates | None, str]:
    """``(rates, "")`` from a valid cache, or ``(None, why it is not used)``."""
    path = path or cache_path()
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None, "no calibration yet"
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return None, f"unreadable calibration file ({e.__class__.__name__})"
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None, "calibration file of another format"
    payload = {k: v for k, v in doc.items() if k != "checksum"}
    if doc.get("checksum") != _checksum(payload):
        return None, "calibration file corrupt (checksum mismatch)"
    if doc.get("fingerprint") != fingerprint():
        return None, "calibration file from another machine or BLAS"
    raw = doc.get("rates")
    if not isinstance(raw, dict) or set(raw) != set(RANGES):
        return None, "calibration file lacks rates"
    for k, (lo, hi) in RANGES.items():
        v = raw[k]
        if not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            return None, f"calibration rate {k} out of range"
    return Rates(**{k: float(v) for k, v in raw.items()}), ""


_CACHED: Rates | None = None


def rates(refresh: bool = False) -> Rates:
    """The rates decisions use: :data:`REFERENCE` under ``LINVIEW_CALIBRATION=off``, else
    the validated cache, else measured now (and cached)."""
    global _CACHED
    if os.environ.get("LINVIEW_CALIBRATION", "").lower() in ("off", "0", "no"):
        return REFERENCE
    if _CACHED is not None and not refresh:
        return _CACHED
    r, _ = (None, "") if refresh else load()
    if r is None:
        r = measure()
        try:
            save(r)
        except OSError:
            pass  # a read-only home: use the measurement, measure again next time
    _CACHED = r
    return r


def reset() -> None:
    """Forget the in-process rates (the next :func:`rates` reads the cache again)."""
    global _CACHED
    _CACHED = None
