"""BLAS threads of triggers (threadpoolctl).

A maintaining trigger's products are thin and memory-bound; on a loaded machine BLAS
threads only spin (issue 10: INCR of A^16 at n = 300 took 70 ms on two threads against
0.63 ms on one).  :class:`linview.runtime.TriggerModule` runs each trigger inside
:func:`blas_limit` with the count the plan chose, unless the user set threads through the
environment (:data:`THREAD_ENV`): the user's explicit setting wins.
"""

from __future__ import annotations

import contextlib
import os

#: environment variables through which a user sets BLAS threads; any of them set means the
#: triggers leave BLAS threads alone (the user's explicit setting wins)
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "BLIS_NUM_THREADS")
#: BLAS threads of a maintaining trigger: its products are thin (gemv-like) and memory
#: bound, where threads only add synchronisation (and spin on a loaded machine)
TRIGGER_THREADS = 1
_CONTROLLER = None


def user_threads() -> bool:
    """True when the user set BLAS threads through the environment."""
    return any(os.environ.get(v) for v in THREAD_ENV)


def blas_limit(threads: int | None):
    """A context limiting BLAS (threadpoolctl) to ``threads``; ``None`` changes nothing."""
    global _CONTROLLER
    if threads is None:
        return contextlib.nullcontext()
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=threads, user_api="blas")


def blas_threads() -> int | None:
    """BLAS threads in effect now (the largest over the loaded BLAS libraries)."""
    from threadpoolctl import threadpool_info

    counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None
