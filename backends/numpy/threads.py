"""BLAS threads of triggers: which library's thread pool a trigger's kernels use, how many
threads it gets, and when one large call may widen to every idle core (threadpoolctl).
The kernels (:mod:`.kernels`) and the runtime (:mod:`.runtime`) use these; the seconds
model mirrors the thresholds (``linview/compiler/timemodel.py``).
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

#: environment variables through which a user sets BLAS threads; any of them set means the
#: triggers leave BLAS threads alone (the user's explicit setting wins)
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "BLIS_NUM_THREADS")
#: BLAS threads of a maintaining trigger: its products are thin (gemv-like) and memory
#: bound, where threads only add synchronisation (and spin on a loaded machine)
TRIGGER_THREADS = 1
_POOLS: list = []


def user_threads() -> bool:
    """True when the user set BLAS threads through the environment."""
    return any(os.environ.get(v) for v in THREAD_ENV)


def _is_kernel_library(path: str) -> bool:
    """The BLAS that ``scipy.linalg.blas`` calls: pip's SciPy wheel bundles its own copy in
    ``scipy.libs`` (NumPy's wheel another one in ``numpy.libs``)."""
    return os.path.basename(os.path.dirname(path)) == "scipy.libs"


def pools():
    """``(kernels, others)``: threadpoolctl controllers of the BLAS library the kernels
    below call (SciPy's) and of every other BLAS library loaded (NumPy's own copy in pip
    wheels; None where both use one library, as in most distributions)."""
    if not _POOLS:
        import scipy.linalg.blas  # noqa: F401 - loaded first: else its copy goes unseen
        from threadpoolctl import ThreadpoolController

        ctrl = ThreadpoolController()
        paths = [c.filepath for c in ctrl.lib_controllers if c.user_api == "blas"]
        mine = [p for p in paths if _is_kernel_library(p)]
        if mine and len(mine) < len(paths):
            _POOLS[:] = [ctrl.select(filepath=mine),
                         ctrl.select(filepath=[p for p in paths if p not in mine])]
        else:
            _POOLS[:] = [ctrl.select(user_api="blas"), None]
    return tuple(_POOLS)


def blas_limit(threads: int | None, others: int | None = -1):
    """A context limiting the kernels' BLAS to ``threads`` and every other BLAS library to
    ``others`` (default: the same); ``None`` leaves that library alone.

    Two OpenBLAS copies are loaded by pip's NumPy and SciPy wheels, each with its own
    thread pool whose workers spin for a while after every call.  When both run with
    two threads on two cores, one's spinning workers stall the other's calls by whole
    scheduler slices: a rank-1 OLS trigger (X 4000×1000) measured 8-16 ms so, 1.2 ms on
    one pool.  A trigger therefore gives threads to one pool only (see
    ``TriggerModule._blas``)."""
    others = threads if others == -1 else others
    libs = _LIBS.get((threads, others))
    if libs is None:  # the loaded libraries do not change: their list is kept
        kernels, rest = pools()
        libs = [(lib, threads) for lib in kernels.lib_controllers] if threads is not None \
            else []
        if rest is not None and others is not None:
            libs += [(lib, others) for lib in rest.lib_controllers]
        libs = _LIBS[(threads, others)] = tuple(libs)
    return _Limited(libs)


_LIBS: dict = {}


class _Limited:
    """Each ``(library controller, threads)`` of ``libs`` limited for the block, restored
    after it.  This is threadpoolctl's ``limit`` without its full ``info()`` of every
    library on entry (versions, architectures: some 20-50 µs per trigger, measured on a
    loaded 2-core machine, of the ~0.1 ms an as-written update paid around the program,
    ``bench/written_overhead.py``): a library already at its limit is not touched (its
    count is read, not cached: the user may change it between updates), and every one
    changed is set back on exit, however the block ends.  threadpoolctl's count of
    limits in force is kept while a library is changed, so that the thread that sets
    OpenBLAS's limits lets go of them when the last one ends; a block that changes
    nothing leaves that count alone.  A class, not a generator context: two nested
    ``contextlib`` contexts cost about 4 µs of the 9 µs an update on one thread paid."""

    __slots__ = ("libs", "changed", "owned")

    def __init__(self, libs: tuple):
        self.libs, self.changed, self.owned = libs, [], False

    def __enter__(self):
        try:
            for lib, n in self.libs:
                before = lib.get_num_threads()
                if before != n:
                    if not self.owned:
                        _own(+1)
                        self.owned = True
                    lib.set_num_threads(n)
                    self.changed.append((lib, before))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_exc) -> bool:
        changed, self.changed = self.changed, []
        try:
            for lib, before in reversed(changed):
                lib.set_num_threads(before)
        finally:
            if self.owned:
                self.owned = False
                _own(-1)
        return False


def _own(step: int) -> None:
    """threadpoolctl's count of limits in force on this thread, one up or down."""
    if not _OWNER:
        import threadpoolctl

        _OWNER.append(getattr(threadpoolctl, "CONTROLLING_THREAD_OWNERSHIP", None))
    owner = _OWNER[0]
    if owner is not None:
        owner.increment() if step > 0 else owner.decrement()


_OWNER: list = []


#: a product of a view of at least this many elements with a block of factors, or a
#: rank-k update of one (k >= WIDE_RANK), may use every core (see :func:`wide`)
WIDE_MIN = 1 << 20
WIDE_RANK = 8
#: a view times a block of at most this many columns runs as one matrix-vector product per
#: column: a thin ``dgemm`` first packs the whole view, which costs about three passes
#: over its memory (measured with OpenBLAS, n = 4000: gemv 5 ms a column, gemm 18-21 ms
#: for 2 to 8 columns on one thread, 13-15 ms on two)
GEMV_MAX = 2
_WIDE = {"allowed": True, "threads": 1}


def pass_threads() -> int:
    """Threads of the one-pass kernel (:func:`.fused.pass_dot`): those the running trigger
    holds (:func:`holding`), one outside a trigger.  Whether one thread or all is faster
    for a trigger is measured, not assumed (the trials at load, ``adaptive.py``): a pass
    over 128 MB with three columns took 6.5 ms on one thread and 3.6 ms on two here."""
    return max(1, int(_WIDE["threads"]))


#: park the BLAS workers a trigger woke when it ends (see :func:`park`)
PARK = {"on": True}


def park(which: str = "kernels") -> None:
    """Put the worker threads of the kernels' BLAS library (``which="all"``: of every
    loaded one) to sleep now.  OpenBLAS's workers spin for about 0.1 s after each parallel
    call (``OPENBLAS_THREAD_TIMEOUT``, read once when it loads); on a machine with few
    cores they then take the cores the user's own NumPy call right after an update wants
    (NumPy's wheel bundles another OpenBLAS, with workers of its own).  OpenBLAS's
    ``blas_thread_shutdown_`` ends them; its next parallel call starts them again.
    Libraries other than OpenBLAS are left alone."""
    kernels, rest = pools()
    for pool in (kernels, rest) if which == "all" else (kernels,):
        for lib in getattr(pool, "lib_controllers", ()) if pool is not None else ():
            stop = getattr(getattr(lib, "dynlib", None), "blas_thread_shutdown_", None)
            if stop is not None and getattr(lib, "internal_api", "") == "openblas":
                stop()


def holding(threads: int, limit, others: int = 1, blas: int | None = None):
    """``limit`` (a thread-limit context), recording that the trigger holds ``threads``
    (``blas``: what the kernels' BLAS library got, default ``threads``; ``others``: what
    the other BLAS libraries got).  When it ends, the workers it woke in
    the kernels' library are parked (:func:`park`) where that library is not NumPy's own
    (pip's wheels: SciPy's copy): they would spin on the cores the user's next NumPy call
    wants.  NumPy's pool is left as it is: its spinning workers are the ones the user's
    next NumPy call runs on, and a parked pool starts its threads again at its next
    parallel call (a 2000×2000 matrix-vector product right after parking NumPy's pool:
    6.4 ms against 0.58 ms warm, measured on a loaded 2-core machine); where the kernels
    use NumPy's library too, nothing is parked, for the same reason."""
    return _Holding(threads, limit, max(threads if blas is None else blas, others))


class _Holding:
    """:func:`holding`'s context (a class: see :class:`_Limited`)."""

    __slots__ = ("threads", "limit", "most", "before")

    def __init__(self, threads: int, limit, most: int):
        self.threads, self.limit, self.most = threads, limit, most

    def __enter__(self):
        self.before = _WIDE["threads"]
        _WIDE["threads"] = self.threads
        _WIDE.pop("woke", None)  # set by a call widened outside any trigger: not this one's
        try:
            self.limit.__enter__()
        except BaseException:
            self._end()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        try:
            self.limit.__exit__(*exc)
        finally:
            self._end()
        return False

    def _end(self) -> None:
        _WIDE["threads"] = self.before
        woke = _WIDE.pop("woke", False)  # a call widened by wide() inside the trigger
        if PARK["on"] and (self.most > 1 or woke) and pools()[1] is not None:
            park("kernels")


def wide_products(allowed: bool):
    """While active, :func:`wide` may raise the BLAS threads of a trigger's large products
    (the runtime turns it off when the user chose the threads)."""
    return _WideProducts(allowed)


class _WideProducts:
    """:func:`wide_products`'s context (a class: see :class:`_Limited`)."""

    __slots__ = ("allowed", "before")

    def __init__(self, allowed: bool):
        self.allowed = allowed

    def __enter__(self):
        self.before = _WIDE["allowed"]
        _WIDE["allowed"] = self.allowed
        return self

    def __exit__(self, *_exc) -> bool:
        _WIDE["allowed"] = self.before
        return False


def others_running() -> int:
    """Threads of other processes running on the machine now: the kernel's count of
    runnable threads (``/proc/loadavg``) less this process's own (BLAS workers still
    spinning after a parallel call are ours, not other work); elsewhere the one-minute
    load average less one (it lags by a minute)."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        mine = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    mine += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue  # a thread that just ended
        return max(0, total - max(mine, 1))
    except (OSError, ValueError, IndexError):
        return max(0, round(os.getloadavg()[0]) - 1)


def idle_cores() -> int:
    """Cores no other process is running on now (:func:`others_running`, looked at most
    every 50 ms: about 0.1 ms to look), at least 1."""
    cores = os.cpu_count() or 1
    now = time.monotonic()
    if now - _WIDE.get("at", -1.0) > 0.05:
        _WIDE["at"], _WIDE["others"] = now, others_running()
    return max(1, cores - _WIDE["others"])


def wide(A: np.ndarray, enough_columns: bool = True):
    """Every core for one large, compute-heavy BLAS call of a trigger (a trigger otherwise
    runs on :data:`TRIGGER_THREADS`): when ``A`` has at least :data:`WIDE_MIN` elements,
    the block is wide enough and no other work runs on the machine's other cores
    (:func:`others_running`); else nothing changes.  Only the kernels' BLAS widens."""
    cores = os.cpu_count() or 1
    if not (_WIDE["allowed"] and enough_columns and cores > 1 and A.size >= WIDE_MIN):
        return contextlib.nullcontext()
    idle = idle_cores()
    if idle < 2:
        return contextlib.nullcontext()
    _WIDE["woke"] = True  # workers to park when the trigger ends (holding)
    return blas_limit(idle, None)


def update_threads(A: np.ndarray, k: int):
    """The BLAS threads of an in-place rank-k update of a large view: every idle core for
    k >= WIDE_RANK (:func:`wide`), one thread below, whatever the trigger runs on: a thin
    ``dgemm`` update on two threads measured 2.6x slower than on one (n = 4000, k = 1:
    24 ms against 9 ms), and markov's trigger (rank 2 and 4 updates of 2000×2000 views)
    took 32-48 ms on two threads against 21 ms on one."""
    if A.size < WIDE_MIN or not _WIDE["allowed"]:  # small, or the user chose the threads
        return contextlib.nullcontext()
    return wide(A) if k >= WIDE_RANK else blas_limit(1, None)


def blas_threads() -> int | None:
    """BLAS threads in effect now (the largest over the loaded BLAS libraries)."""
    from threadpoolctl import threadpool_info

    counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None


def trigger_limit(threads: int | None, reevaluates: bool):
    """The threads while a trigger runs: ``threads`` for every BLAS library; or, for all
    of them (None), no change for a re-evaluating trigger (its products are NumPy's), and
    for a maintaining one every idle core (:func:`idle_cores`: a thread on a core another
    process keeps busy waits for it) for its passes over large views (the one-pass kernel
    on threads of its own, :func:`pass_threads`; a single column too, see
    ``kernels.matmul``), with one thread for every BLAS library: BLAS workers woken at
    every update, and parked after it (:func:`park`), had to be started again by the next
    one (measured 8-10 ms per OLS update at n = 4000 on the loaded 2-core machine).  A
    large ``dgemm`` still widens to the idle cores (:func:`wide`).  One thread pool works
    at a time (see :func:`blas_limit`)."""
    if threads is not None:
        return holding(threads, blas_limit(threads), threads)
    if reevaluates:
        return contextlib.nullcontext()
    return holding(idle_cores(), blas_limit(1, 1), 1, blas=1)
