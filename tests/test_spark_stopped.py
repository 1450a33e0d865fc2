"""Views kept in Spark after their session was stopped: BackendError, never a raw
pyspark AttributeError."""

import numpy as np
import pytest

import linview

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

POWERS = "function C = p(A)\n %#linview dims A(n,n)\n C = A * A;\nend\n"


def test_a_stopped_session_is_a_backend_error(tmp_path):
    from linview.backends.spark import runtime as srt

    session = srt.local_session("local[1]")
    try:
        prog = linview.compile(POWERS, name="p", backend="spark")
        v = prog.load(spark=session, A=np.eye(6), distribute_min=2, partitions=2)
        v.update("A", np.ones(6), np.ones(6))
        before = v["C"]
    finally:
        session.stop()
    for action in (lambda: v.update("A", np.ones(6), np.ones(6)), lambda: v.outputs,
                   lambda: v.save(tmp_path / "s.npz"), v.refresh, v.verify):
        with pytest.raises(linview.BackendError, match="Spark session .*stopped"):
            action()
    np.testing.assert_array_equal(before, (np.eye(6) + 1) @ (np.eye(6) + 1))
