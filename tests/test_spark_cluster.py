"""The Spark backend on a standalone cluster: a master and two workers (1 core, 1 GB each)
started on loopback from the ``spark-class`` that pyspark ships, once per test session,
and stopped by the process ids started here.

Each job runs as its own driver process (one SparkContext per process): the README's
``spark-submit`` recipe with a job that instantiates the compiled class, the Python API
with ``master=spark://...``, and a stream during which one executor's process is killed
(with ``checkpoint_dir=``: the run goes on to NumPy's answer).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent
ENV = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
       "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
START_TIMEOUT = 180  # seconds: JVMs start slowly on a busy two-core machine


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not start in {START_TIMEOUT} s")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a master with two registered workers."""
    if not (SPARK_HOME / "bin" / "spark-class").exists():
        pytest.skip("pyspark ships no spark-class")
    logs = tmp_path_factory.mktemp("cluster")
    port = _port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(SPARK_HOME / "bin" / "spark-class")
    procs: list[subprocess.Popen] = []
    workers: list[int] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = logs / f"{name}.log"
        proc = subprocess.Popen([cls, *args], env={**ENV, "SPARK_WORKER_DIR": str(logs / name)},
                                stdout=log.open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        procs.append(proc)
        return proc, log

    try:
        master, log = start("master", "org.apache.spark.deploy.master.Master", "--host",
                            "127.0.0.1", "--port", str(port), "--webui-port", str(_port()))
        _wait_for(log, "I have been elected leader", master, "the master")
        for i in (1, 2):
            w, wlog = start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url,
                            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                            "--webui-port", str(_port()))
            _wait_for(wlog, "Successfully registered with master", w, f"worker {i}")
            workers.append(w.pid)
        yield url, workers
    finally:
        for proc in reversed(procs):  # by the ids started here: workers (and executors)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _executor_pids(workers: list[int]) -> list[int]:
    """Process ids of the executors the test's workers started (their child processes)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True)
    rows = [ln.split(None, 2) for ln in out.stdout.splitlines() if ln.strip()]
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, ppid, *args in rows:
        children.setdefault(int(ppid), []).append((int(pid), " ".join(args)))
    found, todo = [], list(workers)
    while todo:
        for pid, args in children.get(todo.pop(), []):
            todo.append(pid)
            if "CoarseGrainedExecutorBackend" in args:
                found.append(pid)
    return found


def _run(args, cwd, timeout=600, **kw):
    out = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True,
                         timeout=timeout, **kw)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


JOB = '''
import sys
import numpy as np
from pyspark.sql import SparkSession
from powers_trigger import Powers   # the class `linview compile` wrote

spark = SparkSession.builder.appName("powers").getOrCreate()
A = np.load(sys.argv[1])
views = Powers(A=A, spark=spark, distribute_min=2)   # load: the inputs by name, options
import time
print("loaded at", time.strftime("%y/%m/%d %H:%M:%S"), flush=True)
u, v = np.ones((A.shape[0], 1)), np.linspace(0, 1, A.shape[0]).reshape(-1, 1)
views.update("A", u, v)
np.save(sys.argv[2], views["D"])
print("distributed:", sorted(views.distributed()))
spark.stop()
'''


def _powers_input(tmp_path: Path, n: int = 40) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(5)
    A = rng.standard_normal((n, n)) / (2 * np.sqrt(n))
    np.save(tmp_path / "A.npy", A)
    return tmp_path / "A.npy", A


def test_the_readme_spark_submit_recipe_runs_on_the_cluster(cluster, tmp_path):
    url, _ = cluster
    path, A = _powers_input(tmp_path)
    _run([str(Path(sys.executable).parent / "linview"), "compile", str(ROOT / "examples/powers.m"),
          "--backend", "spark", "-o", "powers_trigger.py"], tmp_path)
    zip_path = _run([sys.executable, "-c", "from linview.backends.spark.session import "
                     "package_zip as z; print(z('linview.zip'))"], tmp_path).stdout.strip()
    (tmp_path / "my_job.py").write_text(JOB)
    out = _run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", url,
                "--executor-memory", "768m", "--driver-memory", "1g",
                "--py-files", f"{zip_path},powers_trigger.py", "my_job.py", str(path),
                "D.npy"], tmp_path)
    assert "distributed: ['A'" in out.stdout
    A2 = A + np.ones((40, 1)) @ np.linspace(0, 1, 40).reshape(1, -1)
    want = np.linalg.matrix_power(A2, 16)
    got = np.load(tmp_path / "D.npy")
    assert np.max(np.abs(got - want)) <= 1e-10 * max(np.max(np.abs(want)), 1e-300)
    assert "was already registered" not in out.stderr
    # linview quiets the session it is given: no INFO line a second after loading
    loaded = re.search(r"loaded at (\S+ \S+)", out.stdout).group(1)
    late = [ln for ln in out.stderr.splitlines() if " INFO " in ln and ln[:17] > loaded]
    assert not late, late[:5]


KILL = '''
import json, os, signal, sys, time
import numpy as np
import linview

url, ck, pids_file = sys.argv[1], sys.argv[2], sys.argv[3]
prog = linview.compile_file(sys.argv[4], backend="spark")
rng = np.random.default_rng(7)
n = 60
A = rng.standard_normal((n, n)) / (2 * np.sqrt(n))
views = prog.load(A=A, master=url, distribute_min=2, partitions=2, checkpoint_dir=ck,
                  checkpoint_every=2, fold_rank=1)
cur = A.copy()
for i in range(6):
    u, v = rng.standard_normal((n, 1)) * 0.05, rng.standard_normal((n, 1)) * 0.05
    views.update("A", u, v)
    cur += u @ v.T
    if i == 2:  # kill one executor mid-stream (the test says which processes)
        while not os.path.exists(pids_file):
            time.sleep(0.2)
        pids = json.loads(open(pids_file).read())
        os.kill(pids[0], signal.SIGKILL)
        time.sleep(2)
want = np.linalg.matrix_power(cur, 16)
got = views["D"]
print(json.dumps({"err": float(np.max(np.abs(got - want)) / np.max(np.abs(want)))}))
'''


def test_a_killed_executor_costs_time_not_the_module(cluster, tmp_path):
    url, workers = cluster
    before = set(_executor_pids(workers))
    (tmp_path / "kill.py").write_text(KILL)
    pids_file = tmp_path / "pids.json"
    driver = subprocess.Popen(
        [sys.executable, "kill.py", url, str(tmp_path / "ck"), str(pids_file),
         str(ROOT / "examples/powers.m")], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT
    mine: list[int] = []
    while time.monotonic() < deadline and len(mine) < 2 and driver.poll() is None:
        mine = sorted(set(_executor_pids(workers)) - before)
        time.sleep(0.5)
    (tmp_path / "pids.tmp").write_text(json.dumps(mine))
    (tmp_path / "pids.tmp").rename(pids_file)  # whole, at once
    try:
        stdout, stderr = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, stderr[-3000:]
    assert len(mine) == 2, f"the job did not get two executors: {stderr[-3000:]}"
    assert json.loads(stdout.strip().splitlines()[-1])["err"] <= 1e-10
