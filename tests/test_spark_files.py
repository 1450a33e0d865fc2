"""The files of a micro-batch read from the query's checkpoint (``linview.app.spark_files``)
against the files Spark itself puts in the batch's DataFrame."""

import os
import threading

import pytest

from linview.app.spark_files import batch_files
from linview.errors import InputError

NAMES = ["a.jsonl", "b c.jsonl", "d%41.jsonl", "e#1.jsonl", "f.parquet", "g.json",
         "h.jsonl", "i.jsonl", "j.jsonl", "k.jsonl", "l.jsonl", "m.jsonl", "n.jsonl",
         "o.jsonl", "skip.txt"]


def _stream_files(tmp_path, spark, per_trigger: int):
    """Every batch of a binaryFile query as (batch_files, what the DataFrame holds)."""
    from pyspark.sql import types as T

    from linview.app.spark_stream import use_fs_checkpoint_manager

    src, query_dir = tmp_path / "upd", tmp_path / "query"
    src.mkdir()
    for i, name in enumerate(NAMES):  # pairs share a modification time: then by name
        (src / name).write_text(f'{{"i": {i}}}\n')
        os.utime(src / name, (1e9 + i // 2, 1e9 + i // 2))
    schema = T.StructType([T.StructField("path", T.StringType()),
                           T.StructField("modificationTime", T.TimestampType()),
                           T.StructField("length", T.LongType()),
                           T.StructField("content", T.BinaryType())])
    seen, lock = [], threading.Lock()

    def each(df, batch_id):
        rows = df.select("modificationTime", "path").collect()
        spark_side = sorted((int(r.modificationTime.timestamp() * 1000),
                             r.path.removeprefix("file:")) for r in rows)
        with lock:
            seen.append((batch_id, batch_files(query_dir, batch_id), spark_side))

    use_fs_checkpoint_manager(spark)
    q = (spark.readStream.format("binaryFile").schema(schema)
         .option("pathGlobFilter", "*.{jsonl,json,parquet}")
         .option("maxFilesPerTrigger", per_trigger).load(str(src))
         .writeStream.foreachBatch(each).option("checkpointLocation", str(query_dir))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    return seen


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from linview.backends.spark import runtime as srt

    session = srt.local_session("local[2]")
    # compact the file source's log every 3 batches and delete what a compaction covers
    # at once, so that batches are found in compact files too
    session.conf.set("spark.sql.streaming.fileSource.log.compactInterval", "3")
    session.conf.set("spark.sql.streaming.fileSource.log.cleanupDelay", "0")
    yield session
    session.stop()


@pytest.mark.spark
@pytest.mark.parametrize("per_trigger", [1, 2])
def test_batch_files_are_the_files_of_the_batch(tmp_path, spark, per_trigger):
    seen = _stream_files(tmp_path, spark, per_trigger)
    assert len(seen) == -(-(len(NAMES) - 1) // per_trigger)
    for batch_id, ours, theirs in seen:
        assert ours is not None, f"batch {batch_id} not found in the checkpoint"
        assert ours == theirs, batch_id
    assert sorted(p for _, ours, _ in seen for _, p in ours) == \
        sorted(str(tmp_path / "upd" / n) for n in NAMES if n != "skip.txt")
    assert any(p.name.endswith(".compact") for p in (tmp_path / "query" / "sources" / "0")
               .iterdir())


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_batch_files_says_none_when_the_checkpoint_does_not_say(tmp_path):
    q = tmp_path / "q"
    assert batch_files(q, 0) is None  # nothing there
    _write(q / "offsets" / "0", 'v1\n{"batchWatermarkMs":0}\n{"logOffset":0}\n')
    assert batch_files(q, 0) is None  # no source log
    _write(q / "sources" / "0" / "0",
           'v1\n{"path":"file:///u/a%20b.jsonl","timestamp":5,"batchId":0}\n')
    assert batch_files(q, 0) == [(5, "/u/a b.jsonl")]
    _write(q / "offsets" / "1", 'v2\n{"batchWatermarkMs":0}\n{"logOffset":1}\n')
    assert batch_files(q, 1) is None  # another format version
    _write(q / "offsets" / "1", 'v1\n{"batchWatermarkMs":0}\n{"logOffset":1}\n-\n')
    assert batch_files(q, 1) is None  # two sources
    _write(q / "offsets" / "1", 'v1\n{"batchWatermarkMs":0}\n{"logOffset":1}\n')
    _write(q / "sources" / "0" / "1",
           'v1\n{"path":"hdfs://nn/u/b.jsonl","timestamp":6,"batchId":1}\n')
    assert batch_files(q, 1) is None  # not a local file
    _write(q / "sources" / "0" / "1", 'v1\n{"path":"file:///u/b.jsonl","timestamp":6}\n')
    assert batch_files(q, 1) is None  # an entry without its batch
    _write(q / "sources" / "0" / "1", 'v1\n{"path":"file:///u/b.jsonl","timestamp":6,'
           '"batchId":1}\n{"path":"file:///u/a.jsonl","timestamp":6,"batchId":1}\n')
    assert batch_files(q, 1) == [(6, "/u/a.jsonl"), (6, "/u/b.jsonl")]


def test_a_vanished_update_file_is_an_input_error(tmp_path):
    from linview.app.spark_stream import _read

    with pytest.raises(InputError, match="cannot read update file .*gone.jsonl"):
        _read(str(tmp_path / "gone.jsonl"))
