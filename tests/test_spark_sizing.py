"""What broke on a real cluster, checked on ``local[2]``: shipping linview once (also when
it is imported from a zip), NumPy inputs shipped in bounded blocks, block sizes from the
executors' memory and the view sizes, Spark's own cause line in errors, quiet logs, and
reliable checkpoints for every lineage cut with ``checkpoint_dir=``."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import numpy as np
import pytest

import linview
from linview.backends.spark import runtime as srt
from linview.backends.spark import session
from linview.backends.spark.blocks import DistMatrix
from linview.backends.spark.context import BlockContext, block_bytes
from linview.errors import BackendError

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

MiB = 1 << 20


# ------------------------------------------------------------------ shipping
class _Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)


class _Context:
    """What ship() reads of a SparkContext that spark-submit started with --py-files."""

    applicationId = "app-submitted"

    def __init__(self, py_files: str):
        self.conf = _Conf({"spark.submit.pyFiles": py_files})
        self.added: list[str] = []
        self.listFiles: list[str] = []

    def getConf(self):
        return self.conf

    def addPyFile(self, path):
        self.added.append(path)


def test_ship_adds_no_second_linview_zip():
    """spark-submit --py-files .../linview.zip: Spark refuses a second file of that name
    ("File linview.zip was already registered with a different path")."""
    sc = _Context("file:/jobs/linview.zip,file:/jobs/powers_trigger.py")
    assert session.ship(sc) is None and sc.added == []
    other = _Context("file:/jobs/powers_trigger.py")
    other.applicationId = "app-other"
    assert session.ship(other) is not None and len(other.added) == 1


def test_package_zip_of_linview_imported_from_a_zip_is_that_zip(tmp_path):
    """Inside a submitted job linview comes from the shipped zip: package_zip() is that
    zip (it used to build an empty one from the zip's inner paths)."""
    shipped = tmp_path / "linview.zip"
    shipped.write_bytes(open(srt.package_zip(), "rb").read())
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import linview; "
            "from linview.backends.spark.session import package_zip; print(package_zip())")
    out = subprocess.run([sys.executable, "-c", code, str(shipped)], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(shipped)
    assert "linview/backends/spark/tasks.py" in zipfile.ZipFile(shipped).namelist()


# ------------------------------------------------------------------ sizes
def test_block_bytes_follow_the_executors_memory_and_the_rpc_limit():
    def conf(**kw):
        return _Conf({"spark.master": "spark://h:7077",
                      **{k.replace("_", "."): v for k, v in kw.items()}})

    # an eighth of the heap outside Spark's unified memory: (1024 - 300) MiB x 0.4 / 8
    assert block_bytes(conf()) == int(724 * MiB * 0.4) // 8
    assert block_bytes(conf(spark_executor_memory="2g")) == 64 * MiB  # 87 MiB: capped
    assert block_bytes(conf(spark_executor_memory="2g", spark_rpc_message_maxSize="64")) \
        == 32 * MiB  # half the RPC limit: a NumPy input's block travels in one task
    assert block_bytes(conf(spark_rpc_message_maxSize="512")) == int(724 * MiB * 0.4) // 8
    assert block_bytes(conf(spark_rpc_message_maxSize="512", spark_memory_fraction="0.8")) \
        == int(724 * MiB * 0.2) // 8
    assert block_bytes(conf(spark_executor_memory="512m")) == int(212 * MiB * 0.4) // 8
    assert block_bytes(conf(spark_executor_memory="8g", spark_rpc_message_maxSize="32")) \
        == 16 * MiB
    assert block_bytes(conf(spark_executor_memory="16m")) == 4 * MiB
    local = _Conf({"spark.master": "local[2]", "spark.driver.memory": "812m",
                   "spark.executor.memory": "8g"})
    assert block_bytes(local) == int(512 * MiB * 0.4) // 8  # local: the driver's memory


def test_sessions_linview_starts_give_executors_the_parallel_collector(spark):
    """G1 never moves a block's array (a humongous object) in JDK 17: cached blocks that
    churn fragment an executor's heap until it dies (jvm.EXECUTOR_JVM_OPTIONS)."""
    conf = spark.sparkContext.getConf()
    assert "-XX:+UseParallelGC" in conf.get("spark.executor.extraJavaOptions")
    assert "-XX:+ExitOnOutOfMemoryError" in conf.get("spark.driver.extraJavaOptions")


def test_partitions_follow_the_view_sizes_not_the_cores(spark):
    ctx = BlockContext(spark.sparkContext)
    ctx.block_bytes = 64 * MiB
    ctx.size_for([(12000, 12000), (12000, 1)])  # 1.15 GB: 18 blocks of at most 64 MiB
    assert ctx.partitions == 18
    assert max(np.diff(ctx.splits(12000))) * 12000 * 8 <= 64 * MiB
    fixed = BlockContext(spark.sparkContext, partitions=3)
    fixed.size_for([(12000, 12000)])
    assert fixed.partitions == 3  # partitions= given: kept


def test_a_large_numpy_input_is_shipped_one_block_per_task(spark):
    """Above twice the block size, each block is its own parallelized RDD (one task, one
    block, cached before the next is sent), put together by a union."""
    ctx = BlockContext(spark.sparkContext, partitions=4, distribute_min=2)
    ctx.block_bytes = 4096
    a = np.random.default_rng(0).standard_normal((64, 48))  # 24 KiB: 4 blocks of 6 KiB
    for layout in ("row", "col"):
        m = DistMatrix.from_numpy(ctx, a, layout)
        rdd = m.rdds()[0]
        assert rdd.getNumPartitions() == 4
        assert "UnionRDD" in rdd.toDebugString().decode()
        np.testing.assert_array_equal(m.to_numpy(), a)
    small = BlockContext(spark.sparkContext, partitions=4, distribute_min=2)
    assert "UnionRDD" not in small.parallelize(a, 0).toDebugString().decode()


def test_load_sizes_blocks_from_the_views(spark):
    prog = linview.compile_file("examples/powers.m", backend="spark")
    A = np.random.default_rng(1).standard_normal((40, 40)) / 10
    views = prog.load(A=A, spark=spark, distribute_min=2)
    assert views._ctx.partitions == spark.sparkContext.defaultParallelism  # 12.8 KB views
    views.release()


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_npy_input_is_read_by_the_executors_not_the_driver(spark, tmp_path, monkeypatch,
                                                             order):
    """A ``.npy`` path: each task maps the file and takes its block (rows of a C-ordered
    file, columns of a Fortran-ordered one); nothing is parallelized from the driver."""
    A = np.asarray(np.random.default_rng(2).standard_normal((40, 40)) / 10, order=order)
    np.save(tmp_path / "A.npy", A)
    prog = linview.compile_file("examples/powers.m", backend="spark")
    want = prog.load(A=A, spark=spark, distribute_min=2, partitions=3)

    def from_the_driver(*a, **kw):
        raise AssertionError("the input went through the driver")

    monkeypatch.setattr(BlockContext, "parallelize", from_the_driver)
    views = prog.load(A=str(tmp_path / "A.npy"), spark=spark, distribute_min=2, partitions=3)
    assert "A" in views.distributed()
    for name in ("A", "C", "D"):
        np.testing.assert_allclose(views[name], want[name], rtol=1e-13, atol=1e-300)
    u, v = np.ones((40, 1)) / 40, np.linspace(0, 1, 40).reshape(-1, 1) / 40
    views.update("A", u, v)
    np.testing.assert_allclose(views["D"], np.linalg.matrix_power(A + u @ v.T, 16),
                               rtol=1e-10, atol=1e-300)
    views.release()
    want.release()


def test_a_npy_input_with_nan_is_refused_by_name(spark, tmp_path):
    A = np.eye(40)
    A[3, 5] = np.nan
    np.save(tmp_path / "A.npy", A)
    prog = linview.compile_file("examples/powers.m", backend="spark")
    with pytest.raises(linview.InputError, match="input A contains NaN or Inf"):
        prog.load(A=str(tmp_path / "A.npy"), spark=spark, distribute_min=2)


# ------------------------------------------------------------------ errors and logs
PY4J_TEXT = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe."
    "\n: org.apache.spark.SparkException: Job aborted due to stage failure: Serialized task "
    "0:0 was 144012138 bytes, which exceeds max allowed: spark.rpc.message.maxSize "
    "(134217728 bytes). Consider increasing spark.rpc.message.maxSize or using broadcast "
    "variables for large values.\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages("
    "DAGScheduler.scala:2856)\n")


class Py4JJavaError(Exception):
    __module__ = "py4j.protocol"


def test_a_spark_failure_keeps_sparks_cause_line_and_no_install_hint():
    with pytest.raises(BackendError) as e, session.spark_errors("load of A"):
        raise Py4JJavaError(PY4J_TEXT)
    text = str(e.value)
    assert "org.apache.spark.SparkException: Job aborted due to stage failure: Serialized " \
           "task 0:0 was 144012138 bytes" in text
    assert "collectAndServe" not in text
    assert "numpy" not in text and "Java" not in text
    assert "partitions" in e.value.hint


def test_sessions_are_quiet(spark):
    sc = spark.sparkContext
    log4j = sc._jvm.org.apache.logging.log4j
    sc.setLogLevel("INFO")  # what spark-submit starts with
    session.get_session(spark)
    assert str(log4j.LogManager.getRootLogger().getLevel()) == "WARN"
    for name in session.QUIET_LOGGERS:  # "RDD N was locally checkpointed" on unpersist
        assert str(log4j.LogManager.getLogger(name).getLevel()) == "ERROR"
    sc.setLogLevel("ERROR")


# ------------------------------------------------------------------ checkpoints
def test_every_lineage_cut_is_reliable_with_a_checkpoint_dir(spark, tmp_path):
    """With checkpoint_dir= no view depends on blocks cached by one executor: each
    matrix an operation makes is checkpointed to files, as are the periodic cuts."""
    prog = linview.compile_file("examples/powers.m", backend="spark")
    rng = np.random.default_rng(2)
    A = rng.standard_normal((12, 12)) / 6
    views = prog.load(A=A, spark=spark, distribute_min=2, partitions=2, fold_rank=1,
                      checkpoint_every=2, checkpoint_dir=str(tmp_path / "ck"))
    for _ in range(3):
        u, v = rng.standard_normal((12, 1)) / 10, rng.standard_normal((12, 1)) / 10
        views.update("A", u, v)
        A = A + u @ v.T
    for name, m in views.distributed().items():
        for rdd in m.rdds():
            assert rdd.toDebugString().decode().count("ReliableCheckpointRDD") >= 1, name
            assert "LocalCheckpointRDD" not in rdd.toDebugString().decode(), name
    np.testing.assert_allclose(views["D"], np.linalg.matrix_power(A, 16), rtol=1e-9)
    views.release()


def test_parquet_is_written_in_bounded_row_groups(tmp_path, monkeypatch, spark):
    import pyarrow.parquet as pq

    monkeypatch.setattr(session, "ROW_GROUP_BYTES", 8 * 10 * 25)  # 25 rows of 10 values
    a = np.arange(100 * 10, dtype=float).reshape(100, 10)
    srt.write_parquet(a, tmp_path / "a.parquet")
    assert pq.ParquetFile(tmp_path / "a.parquet").metadata.num_row_groups == 4
    ctx = BlockContext(spark.sparkContext, partitions=3, distribute_min=2)
    got = srt.read_parquet(ctx, spark, tmp_path / "a.parquet", "input a")
    np.testing.assert_array_equal(got.to_numpy(), a)


# ------------------------------------------------------------------ linview run --input X.npy
def _run_powers(tmp_path, A, n_batches: int = 2):
    """``linview run examples/powers.m --backend spark --input A=A.npy`` in this process
    (on the module's local[2] session), every view distributed; the final A."""
    from linview.app.cli import main
    from linview.app.spark_cluster import write_powers_stream

    write_powers_stream(tmp_path, A.shape[0], n_batches, 2, seed=5)
    np.save(tmp_path / "A.npy", A)  # the file the run reads (the stream's updates stay)
    for U, V in _updates(tmp_path):
        A = A + U @ V.T
    code = main(["run", "examples/powers.m", "--backend", "spark", "--input",
                 f"A={tmp_path / 'A.npy'}", "--updates", str(tmp_path / "upd"), "--out",
                 str(tmp_path / "out"), "--once", "--quiet", "--spark-driver-mib", "0",
                 "--partitions", "3"])
    return code, A


def _updates(tmp_path):
    import json

    for f in sorted((tmp_path / "upd").iterdir()):
        rec = json.loads(f.read_text())
        yield np.array(rec["U"]).T, np.array(rec["V"]).T


def test_run_reads_a_npy_input_on_the_executors(spark, tmp_path, monkeypatch, capsys):
    """``linview run --backend spark --input A=A.npy``: the driver maps the file (for its
    shape and checksum) and the executors read its blocks, one task per block; nothing of
    it is parallelized from the driver, and the stream ends at NumPy's answer."""
    from linview.backends.spark import session as sess

    reads, shipped = [], []
    read_npy, parallelize = sess.read_npy, BlockContext.parallelize

    def spy_read(ctx, a):
        reads.append((str(a.filename), a.shape))
        return read_npy(ctx, a)

    def spy_parallelize(self, a, axis):
        shipped.append(a.shape)
        return parallelize(self, a, axis)

    monkeypatch.setattr(srt, "read_npy", spy_read)
    monkeypatch.setattr(BlockContext, "parallelize", spy_parallelize)
    A = np.random.default_rng(4).standard_normal((300, 300)) / (2 * np.sqrt(300))
    code, final = _run_powers(tmp_path, A)
    assert code == 0, capsys.readouterr().err
    assert reads == [(str(tmp_path / "A.npy"), (300, 300))]
    assert (300, 300) not in shipped  # the views' blocks came from the executors' reads
    got = np.load(tmp_path / "out" / "latest.npz")["D"]
    want = np.linalg.matrix_power(final, 16)
    assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want))


def test_run_refuses_a_npy_input_with_nan_by_name(spark, tmp_path, capsys):
    A = np.random.default_rng(4).standard_normal((300, 300)) / (2 * np.sqrt(300))
    A[7, 11] = np.inf
    code, _ = _run_powers(tmp_path, A, n_batches=1)
    assert code != 0
    assert "input A contains NaN or Inf" in capsys.readouterr().err


def test_digest_of_a_mapped_npy_is_the_digest_of_its_array(tmp_path, monkeypatch):
    """A checkpoint started from a mapped input resumes from the same file read whole
    (and back): the checksum reads the map a chunk of rows at a time, same bytes."""
    from linview.app import input_files

    monkeypatch.setattr(input_files, "DIGEST_CHUNK", 8 * 7 * 5)  # 7 rows of 5 per chunk
    for order in ("C", "F"):
        a = np.asarray(np.random.default_rng(6).standard_normal((23, 5)), order=order)
        np.save(tmp_path / "a.npy", a)
        name, mapped = input_files.load(f"A={tmp_path / 'a.npy'}", mmap_npy=True)
        assert name == "A" and isinstance(mapped, np.memmap)
        assert input_files.digest(mapped) == input_files.digest(a)
        a[3, 2] += 1e-12
        assert input_files.digest(mapped) != input_files.digest(a)
