"""A Spark standalone cluster on loopback, from the ``spark-class`` that pyspark ships: a
master and workers as processes of this one, stopped by the process ids started here.

What the cluster tests (``tests/test_spark_cluster.py``) and the executor-kill soak
(``bench/spark_kill_soak.py``) run against::

    with LoopbackCluster(workers=2, cores=1, memory="1g") as cluster:
        subprocess.run([..., "--master", cluster.url], env=cluster.env)
        cluster.executor_pids()   # the executors' JVMs (children of the workers)

Nothing here is used by ``load()`` or ``linview run``: a cluster of one's own is started
with the same two ``spark-class`` commands (``docs/spark.md``, "On a cluster").
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: seconds to wait for a JVM to start (slow on a busy machine of two cores)
START_TIMEOUT = 180


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env(**extra: str) -> dict[str, str]:
    """The environment of the cluster's processes and of drivers run against it: this
    Python on the executors and the driver, loopback addresses."""
    return {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def _wait_for(path: Path, text: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not start in {START_TIMEOUT} s")


class LoopbackCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 logs: str | os.PathLike | None = None):
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.logs = Path(logs) if logs else Path(tempfile.mkdtemp(prefix="spark-cluster-"))
        self.env = cluster_env()
        self.url = ""
        self.procs: list[subprocess.Popen] = []
        self.workers: list[int] = []

    def _start(self, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = self.logs / f"{name}.log"
        cls = str(spark_home() / "bin" / "spark-class")
        proc = subprocess.Popen([cls, *args],
                                env={**self.env, "SPARK_WORKER_DIR": str(self.logs / name)},
                                stdout=log.open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc, log

    def start(self) -> LoopbackCluster:
        if not (spark_home() / "bin" / "spark-class").exists():
            raise RuntimeError("pyspark ships no bin/spark-class")
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        try:
            master, log = self._start("master", "org.apache.spark.deploy.master.Master",
                                      "--host", "127.0.0.1", "--port", str(port),
                                      "--webui-port", str(free_port()))
            _wait_for(log, "I have been elected leader", master, "the master")
            for i in range(1, self.n_workers + 1):
                w, wlog = self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker",
                                      self.url, "--host", "127.0.0.1", "--cores",
                                      str(self.cores), "--memory", self.memory,
                                      "--webui-port", str(free_port()))
                _wait_for(wlog, "Successfully registered with master", w, f"worker {i}")
                self.workers.append(w.pid)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM to the process groups started here (workers take their executors),
        SIGKILL to what is left after 30 s."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs = []

    def __enter__(self) -> LoopbackCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs (``CoarseGrainedExecutorBackend``) that this
        cluster's workers started, found among their descendants."""
        out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True,
                             text=True, check=False)
        children: dict[int, list[tuple[int, str]]] = {}
        for line in out.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2:
                children.setdefault(int(parts[1]), []).append(
                    (int(parts[0]), parts[2] if len(parts) > 2 else ""))
        found, todo = [], list(self.workers)
        while todo:
            for pid, args in children.get(todo.pop(), []):
                todo.append(pid)
                if "CoarseGrainedExecutorBackend" in args:
                    found.append(pid)
        return sorted(found)


# ------------------------------------------------------------------ the executor-kill drill
def write_powers_stream(work: Path, n: int, batches: int, rank: int, seed: int) -> np.ndarray:
    """``A.npy`` (n×n, spectral radius about 1/2) and ``upd/u000.jsonl ...``, one rank-
    ``rank`` update of A per file (modification times in file order); returns the final A."""
    import json

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n)) / (2 * np.sqrt(n))
    np.save(work / "A.npy", A)
    (work / "upd").mkdir()
    for f in range(batches):
        U = rng.standard_normal((n, rank)) * (0.1 / np.sqrt(n * rank))
        V = rng.standard_normal((n, rank)) * (0.1 / np.sqrt(n))
        A = A + U @ V.T
        path = work / "upd" / f"u{f:03d}.jsonl"
        path.write_text(json.dumps({"input": "A", "U": U.T.tolist(), "V": V.T.tolist()}) + "\n")
        os.utime(path, (1e9 + f, 1e9 + f))  # Spark takes files by modification time
    return A


def killed_run(cluster: LoopbackCluster, work: Path, program: Path, *, seed: int,
               n: int = 300, batches: int = 12, rank: int = 48,
               timeout: float = 900, checkpoint: bool = True) -> dict:
    """``linview run PROGRAM --backend spark --checkpoint`` (``program`` computes
    ``D = A^16`` from ``A``: ``examples/powers.m``) over ``batches`` update files on the
    cluster, with its views distributed; one executor's JVM is killed (SIGKILL, by pid) at
    a random point of the stream: after a random number of applied batches (0 = during
    the load) plus a random delay.  ``checkpoint=False`` leaves out ``--checkpoint`` (the
    lineage cuts are then local: the control case, which fails).  Returns what happened:
    the run's exit code, where the kill fell, and the relative error of the final ``D``
    against NumPy's ``A^16``."""

    rng = np.random.default_rng(seed)
    work.mkdir(parents=True, exist_ok=True)
    final = write_powers_stream(work, n, batches, rank, seed)
    after, delay = int(rng.integers(0, batches - 1)), float(rng.uniform(0, 1.0))
    before = set(cluster.executor_pids())
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(program), "--backend", "spark",
           "--master", cluster.url, "--input", f"A={work / 'A.npy'}", "--updates",
           str(work / "upd"), *(("--checkpoint", str(work / "ck")) if checkpoint else ()),
           "--out", str(work / "out"), "--once", "--quiet", "--spark-driver-mib", "0",
           "--partitions", "2"]
    t0 = time.monotonic()
    with open(work / "driver.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=cluster.env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            kill = _kill_one(cluster, proc, work / "out" / "log.jsonl", before, after, delay,
                             rng, t0 + timeout)
            proc.wait(timeout=max(1.0, t0 + timeout - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    out = {"seed": seed, "n": n, "batches": batches, "rank": rank, "returncode": proc.returncode,
           "seconds": round(time.monotonic() - t0, 1), **kill,
           "driver_log_tail": (work / "driver.log").read_text(errors="replace")[-3000:]}
    latest = work / "out" / "latest.npz"
    if proc.returncode == 0 and latest.exists():
        want = np.linalg.matrix_power(final, 16)
        got = np.load(latest)["D"]
        out["error"] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        out["batches_applied"] = len((work / "out" / "log.jsonl").read_text().splitlines())
    return out


def _applied(log: Path) -> int:
    try:
        return len(log.read_text().splitlines())
    except OSError:
        return 0


def _kill_one(cluster, proc, log: Path, before: set[int], after: int, delay: float, rng,
              deadline: float) -> dict:
    """Wait for the run's two executors and for ``after`` applied batches, sleep ``delay``,
    SIGKILL one of the run's executors; what was killed, when."""
    mine: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        mine = sorted(set(cluster.executor_pids()) - before)
        if len(mine) >= 2 and _applied(log) >= after:
            break
        time.sleep(0.1)
    time.sleep(delay)
    if proc.poll() is not None or not mine:
        return {"killed": None, "executors": mine, "kill_after_batches": after}
    victim = int(rng.choice(mine))
    at = _applied(log)
    os.kill(victim, signal.SIGKILL)
    return {"killed": victim, "executors": mine, "kill_after_batches": at,
            "kill_delay_s": round(delay, 2)}
