"""The driver's JVM as PySpark started it: the options that make an OutOfMemoryError end
it at once instead of leaving a job that never finishes, and the error that says so."""

from __future__ import annotations

import subprocess

from linview.errors import BackendError

#: the driver JVM's options in the sessions linview starts: an OutOfMemoryError in any of
#: its threads ends the JVM at once (exit status 3, "Terminating due to
#: java.lang.OutOfMemoryError: ..." on its stderr), where it would otherwise leave a job
#: that never finishes and a caller waiting forever; :func:`spark_errors` says why
JVM_OPTIONS = "-XX:+ExitOnOutOfMemoryError"
#: the executors' JVM options in the sessions linview starts: the parallel collector, not
#: G1.  A block (up to 64 MiB) is one Java array, a "humongous" object to G1 (above half
#: a region: 1 MiB regions in a 2 GB heap), placed in contiguous free regions and never
#: moved by G1's full collections (JDK 17), so a heap whose cached blocks churn
#: fragments until one more block finds no room: executors of 2 GB died of
#: ``OutOfMemoryError`` with Spark's store at 976 of its 1048 MiB (A^16 at n = 4000, two
#: executors).  The parallel collector compacts large arrays like any other
#: (docs/spark.md, "Sizing")
EXECUTOR_JVM_OPTIONS = "-XX:+UseParallelGC"
#: the JVM's exit status after ``-XX:+ExitOnOutOfMemoryError``
OOM_EXIT = 3
#: the driver's ``spark.driver.memory``, read while its JVM answers (``session.ship``)
MEMORY: dict[str, str] = {}


def jvm_died(what: str, status: int) -> BackendError:
    """The error of a driver JVM that exited under linview's feet: out of memory (status
    :data:`OOM_EXIT` under :data:`JVM_OPTIONS`) or killed."""
    memory = MEMORY.get("driver", "?")
    if status == OOM_EXIT:
        return BackendError(
            f"{what}: the Spark driver ran out of memory (java.lang.OutOfMemoryError in its "
            f"JVM, spark.driver.memory = {memory}) and stopped",
            hint="give the driver more memory (--driver-memory, spark.driver.memory), or "
                 "keep less on it: a smaller driver_max_elements, inputs as .npy or "
                 "Parquet files; see docs/spark.md, 'Sizing'")
    return BackendError(f"{what}: the Spark driver's JVM exited (status {status})",
                        hint="its log (stderr) says why; views kept in Spark are lost")


def jvm_exit(sc=None, wait: float = 0.0) -> int | None:
    """The exit status of the driver JVM that PySpark started for ``sc`` (default: the
    active context), or None while it runs (or when PySpark did not start it:
    spark-submit starts Python from the JVM).  ``wait``: seconds to wait for it to end
    (a lost connection comes before the process's end)."""
    if sc is None:
        try:
            from pyspark import SparkContext as sc
        except ImportError:
            return None
    proc = getattr(getattr(sc, "_gateway", None), "proc", None)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=wait) if wait else proc.poll()
    except subprocess.TimeoutExpired:
        return None


#: how a call finds the driver's JVM gone: its connection reset, refused or empty
_LOST = ("Connection refused", "Connection reset", "Answer from Java side is empty",
         "Error while sending or receiving", "Broken pipe")


def connection_lost(e: BaseException) -> bool:
    """Whether ``e`` is Py4J's (or a socket's) way of saying the JVM is gone."""
    return (isinstance(e, ConnectionError) or type(e).__name__ == "Py4JNetworkError"
            or any(t in str(e) for t in _LOST))
