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
them (about two seconds) and writes the cache.  The cache is checked before it is trusted: its
format version, a checksum of its contents, the machine fingerprint (host, CPU, cores,
NumPy and BLAS library) and the range of every rate.  A corrupt, edited or foreign file is
measured again, never used.  ``linview calibrate`` measures on demand.

A busy machine cannot poison the cache:

* a calibration is :data:`TRIALS` short trials, each rate the best of them;
* a *noisy* calibration (the load average per core at least :data:`LOAD_MAX`, or two trials
  of one rate :data:`SPREAD_MAX` apart) serves the process that took it and is not cached
  (``linview calibrate`` says so);
* the cache stores a quick probe (:func:`probe`, a few tens of milliseconds: sustained
  blocks, the best of them, so that neither a short disturbance nor a short quiet moment
  decides it) measured with the rates; at first use in a process a fresh probe is
  compared with it, and a disagreement beyond :data:`PROBE_TOLERANCE` either way (the
  machine is busier now, or the cache was taken when it was busy) measures again.  A
  cache poisoned by a busy calibration that the noise check let through (the load
  average lags a minute behind the load) stored a slow probe with its slow rates: once
  the machine is quiet, the probe disagrees and the rates are measured again, and cached
  as soon as that measurement is not noisy.
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

VERSION = 4  # 3: the probe stored with the rates; 4: the probe over sustained blocks
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


#: a calibration is this many short trials; each rate is the best of them
TRIALS = 3
#: a calibration whose trials differ by more than this factor on one rate is noisy
SPREAD_MAX = 1.5
#: a calibration taken while the one-minute load average is at least this share of the
#: cores (other work running: its threads share the cores with the measurement) is noisy
LOAD_MAX = 0.5
#: at first use, a cache whose quick probe (:func:`probe`) differs from the probe stored
#: with it by more than this factor is measured again
PROBE_TOLERANCE = 1.5


@dataclass(frozen=True)
class Calibration:
    """One calibration: the best rates of its trials, the quick probe's rates measured
    with them (what :func:`probe` compares with later), and ``noisy``: why it must not be
    cached ("" when it may)."""

    rates: Rates
    probe: dict
    noisy: str = ""
    spread: float = 1.0


class _Operands:
    """The operands of a trial, made once per calibration (filling 128 MB takes longer
    than a trial)."""

    def __init__(self, scale: float):
        rng = np.random.default_rng(0)
        self.n = n = max(64, int(1000 * scale))
        self.A = np.asfortranarray(rng.standard_normal((n, n)))
        self.B = np.asfortranarray(rng.standard_normal((n, n)))
        self.m = m = max(256, int(4000 * scale))  # 128 MB: larger than the caches
        self.M = np.asfortranarray(rng.standard_normal((m, m)))
        self.x = rng.standard_normal(m)
        self.thin = np.asfortranarray(rng.standard_normal((m, 4)))
        self.s = rng.standard_normal((4, 4))
        self.v = rng.standard_normal((256, 1))


def _trial(ops: _Operands) -> Rates:
    """One short trial of every rate."""
    from threadpoolctl import threadpool_limits

    n, m, A, B, M, v, s = ops.n, ops.m, ops.A, ops.B, ops.M, ops.v, ops.s
    gemm = 2 * n ** 3 / _best(lambda: A @ B, 2)
    stream = 8 * m * m / _best(lambda: M @ ops.x, 3)
    thin_all = 8 * m * m / _best(lambda: M @ ops.thin, 2)
    with threadpool_limits(limits=1, user_api="blas"):
        gemm1 = 2 * n ** 3 / _best(lambda: A @ B, 1)
        stream1 = 8 * m * m / _best(lambda: M @ ops.x, 3)
        thin1 = 8 * m * m / _best(lambda: M @ ops.thin, 2)
        # a trigger's small operations: thin products, a scaled sum, a concatenation
        call = _best(lambda: [(v @ (v.T @ v), s @ s, 0.5 * v + v, np.hstack([v, v]))
                              for _ in range(100)], 3) / 500
    return Rates(gemm_flops=gemm, gemm1_flops=gemm1, stream_bytes=stream,
                 stream1_bytes=stream1, thin_bytes=thin_all, thin1_bytes=thin1, call_s=call)


def load_average() -> float:
    """The one-minute load average per core (0 where the system does not say)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


def best_of(trials: list[Rates]) -> tuple[Rates, float]:
    """The best of each rate over ``trials`` (the highest rate, the shortest call) and the
    largest spread (max/min) of a rate between them (the call overhead, microseconds of
    Python, excepted)."""
    fields = list(RANGES)
    best = {k: (min if k == "call_s" else max)(getattr(t, k) for t in trials) for k in fields}
    spread = max(max(getattr(t, k) for t in trials) / min(getattr(t, k) for t in trials)
                 for k in fields if k != "call_s")
    return Rates(**best), spread


def noise(spread: float, load: float) -> str:
    """Why a calibration with this spread between trials, taken at this load per core, is
    noisy ("" when it is not)."""
    why = []
    if load >= LOAD_MAX:
        why.append(f"load average {load:.2f} per core (other work running)")
    if spread > SPREAD_MAX:
        why.append(f"trials differ by {spread:.2f}x")
    return "; ".join(why)


def measure(scale: float = 1.0, trials: int = TRIALS) -> Calibration:
    """Measure the rates here in ``trials`` short trials, the best of each (``scale`` < 1
    shrinks the operands, for tests), and the quick probe's rates with them."""
    load = load_average()
    ops = _Operands(scale)
    r, spread = best_of([_trial(ops) for _ in range(max(1, trials))])
    load = max(load, load_average())
    return Calibration(r, probe(), noise(spread, load), spread)


#: the probe's operands: a product of small matrices (in cache: compute) and matrix-vector
#: products over 8 MB (memory)
PROBE_N, PROBE_ROWS, PROBE_COLS = 192, 1024, 1024
#: the probe times each rate over blocks of this many seconds of back-to-back runs, not
#: single runs: one run of a few tenths of a millisecond fits in the slice the scheduler
#: gives a process that just woke, even while CPU-bound processes hold every core, so the
#: best of single runs never sees that load (a calibration cached under two such processes
#: once passed its probe at 1.08x); a block outlasts that slice
PROBE_BLOCK_S = 0.004
#: blocks per rate, the best counting (one short disturbance does not make a probe slow)
PROBE_BLOCKS = 3


def sustained(fn, seconds: float = PROBE_BLOCK_S, blocks: int = PROBE_BLOCKS,
              clock=time.perf_counter) -> float:
    """Runs per second of ``fn`` over a block of back-to-back runs lasting at least
    ``seconds``, the best of ``blocks`` blocks, after one unmeasured block (it warms the
    caches and spends the scheduler's credit of a process that just woke)."""
    best = 0.0
    for b in range(blocks + 1):
        runs, t0 = 0, clock()
        while True:
            fn()
            runs += 1
            elapsed = clock() - t0
            if elapsed >= seconds:
                break
        if b:
            best = max(best, runs / elapsed)
    return best


def probe() -> dict[str, float]:
    """A few tens of milliseconds' measurement of a compute rate (one thread) and a memory
    rate (one thread and all), each the best of :data:`PROBE_BLOCKS` sustained blocks
    (:func:`sustained`); comparable only with another :func:`probe`: a cache stores the
    probe taken with it, and :func:`rates` compares a fresh one with it at first use."""
    from threadpoolctl import threadpool_limits

    A = np.full((PROBE_N, PROBE_N), 0.5, order="F")
    M = np.full((PROBE_ROWS, PROBE_COLS), 0.5, order="F")
    x = np.ones(PROBE_COLS)
    by = 8.0 * PROBE_ROWS * PROBE_COLS
    out = {"stream": by * sustained(lambda: M @ x)}
    with threadpool_limits(limits=1, user_api="blas"):
        out["gemm1"] = 2.0 * PROBE_N ** 3 * sustained(lambda: A @ A)
        out["stream1"] = by * sustained(lambda: M @ x)
    return out


def probe_disagreement(stored: dict, fresh: dict) -> float:
    """The largest factor (either way) between a stored probe and a fresh one; infinite
    when they do not measure the same rates."""
    if not isinstance(stored, dict) or set(stored) != set(fresh):
        return math.inf
    worst = 1.0
    for k, v in fresh.items():
        old = stored[k]
        if not isinstance(old, (int, float)) or not math.isfinite(old) or old <= 0 or v <= 0:
            return math.inf
        worst = max(worst, v / old, old / v)
    return worst


def save(cal: Calibration, path: Path | None = None) -> Path:
    """Write ``cal`` (its rates and probe) with this machine's fingerprint and a checksum
    (atomically)."""
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"version": VERSION, "fingerprint": fingerprint(), "rates": cal.rates.as_dict(),
               "probe": dict(cal.probe),
               "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    doc = {**payload, "checksum": _checksum(payload)}
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, path)
    return path


def read(path: Path | None = None) -> tuple[Calibration | None, str]:
    """``(calibration, "")`` from a valid cache, or ``(None, why it is not used)``."""
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
    if not isinstance(doc.get("probe"), dict):
        return None, "calibration file lacks its probe"
    return Calibration(Rates(**{k: float(v) for k, v in raw.items()}), doc["probe"]), ""


def load(path: Path | None = None) -> tuple[Rates | None, str]:
    """``(rates, "")`` from a valid cache, or ``(None, why it is not used)``."""
    cal, why = read(path)
    return (cal.rates if cal else None), why


_CACHED: Rates | None = None
#: how this process's rates came about (``linview calibrate --show``, ``bench``)
_STATUS: dict = {}


def status() -> dict:
    """How the rates this process uses came about: ``source`` ("reference", "cache",
    "measured"), ``cached`` (whether they were written to the cache), and ``noisy`` or
    ``probe`` (the factor by which a fresh probe contradicted the cache) when they say why."""
    return dict(_STATUS)


def _measure_and_keep(why: str) -> Rates:
    """Measure now; cache the result unless it is noisy (then it serves this process only)."""
    cal = measure()
    cached = False
    if not cal.noisy:
        try:
            save(cal)
            cached = True
        except OSError:
            pass  # a read-only home: use the measurement, measure again next time
    _STATUS.update(source="measured", because=why, cached=cached, noisy=cal.noisy,
                   spread=cal.spread)
    return cal.rates


def rates(refresh: bool = False) -> Rates:
    """The rates decisions use: :data:`REFERENCE` under ``LINVIEW_CALIBRATION=off``, else
    the validated cache when a fresh :func:`probe` agrees with the probe stored with it
    (within :data:`PROBE_TOLERANCE`), else measured now, and cached unless noisy."""
    global _CACHED
    if os.environ.get("LINVIEW_CALIBRATION", "").lower() in ("off", "0", "no"):
        _STATUS.clear()
        _STATUS.update(source="reference", cached=False)
        return REFERENCE
    if _CACHED is not None and not refresh:
        return _CACHED
    _STATUS.clear()
    cal, why = (None, "asked to measure") if refresh else read()
    if cal is not None:
        off = probe_disagreement(cal.probe, probe())
        if off > PROBE_TOLERANCE:
            why = f"the probe differs from the cached calibration by {off:.2f}x"
            cal = None
        else:
            _STATUS.update(source="cache", cached=True, probe=off)
    _CACHED = cal.rates if cal is not None else _measure_and_keep(why)
    return _CACHED


def reset() -> None:
    """Forget the in-process rates (the next :func:`rates` reads the cache again)."""
    global _CACHED
    _CACHED = None
    _STATUS.clear()
