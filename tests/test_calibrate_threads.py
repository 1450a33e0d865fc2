"""Threads from measurement: a trigger's BLAS threads follow the calibrated one-thread and
all-thread rates of the kernels it runs (nothing assumes that one core saturates memory),
and the seconds model prices the kernels' choice between matrix-vector passes on every
thread and the one-thread one-pass kernel as the kernels make it."""

from dataclasses import replace

import pytest

import linview
from linview.compiler import timemodel
from linview.compiler.calibrate import REFERENCE

#: one core streams 21 GB/s, two 54 (measured on a 2-core machine, issue 26); the same
#: machine as if one core saturated memory
TWO_CORES = replace(REFERENCE, gemm_flops=1.3e11, gemm1_flops=6.7e10, stream_bytes=5.4e10,
                    stream1_bytes=2.1e10, thin_bytes=2.4e10, thin1_bytes=1.2e10, call_s=1e-6)
SATURATED = replace(TWO_CORES, stream_bytes=TWO_CORES.stream1_bytes)


@pytest.fixture(scope="module")
def pagerank():
    from conftest import EXAMPLES

    return linview.compile_file(EXAMPLES / "pagerank.m", dims={"n": 2000}, model="exp")


def test_memory_bound_triggers_take_every_thread_when_threads_stream_faster(pagerank):
    opts = pagerank.options["trigger_options"]
    sizes = pagerank.plan.sizes
    fast = timemodel.trigger_choice(pagerank.program, "M", opts, sizes, TWO_CORES)
    flat = timemodel.trigger_choice(pagerank.program, "M", opts, sizes, SATURATED)
    assert fast["choice"] == flat["choice"] == "maintain"
    assert fast["threads"] is None  # every thread: 54 GB/s against 21
    assert flat["threads"] == 1  # nothing to gain from threads that share one stream
    one = timemodel.maintenance_seconds(pagerank.program, "M", opts, sizes, TWO_CORES, True)
    every = timemodel.maintenance_seconds(pagerank.program, "M", opts, sizes, TWO_CORES, False)
    assert every < one / timemodel.THREADS_GAIN


def test_passes_are_priced_at_the_threads_they_run_on():
    """The one-pass kernel runs on the trigger's threads: on every thread of a machine
    whose memory streams faster on several, the pass is cheaper than on one; a single
    column is a matrix-vector product at the trigger's rates."""
    roof1, roof_all = timemodel._rates(TWO_CORES, True), timemodel._rates(TWO_CORES, False)
    reads = {("W", "N", 0): [4000, 4000, 1], ("W", "T", 0): [4000, 4000, 1]}
    on_all = timemodel.fused_seconds(reads, roof_all)
    assert on_all == pytest.approx(timemodel.one_pass_seconds(4000, 4000, 2, roof_all))
    on_one = timemodel.fused_seconds(reads, roof1)
    assert on_one == pytest.approx(timemodel.one_pass_seconds(4000, 4000, 2, roof1))
    assert on_all < on_one
    single = {("W", "T", 0): [4000, 4000, 1]}
    assert timemodel.fused_seconds(single, roof_all) == pytest.approx(
        timemodel.thin_seconds(4000, 4000, 1, roof_all))
