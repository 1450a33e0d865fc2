"""``linview cost``'s work laws (:func:`linview.solve.cost.push_counts`) against the counts
that push and power iteration record, on small graphs: power iteration's steps and push's
dense rounds per batch, and the speedup the laws' counts give against the recorded
counts' (both priced alike).  Counts, not times: nothing here depends on the machine's
load.  The laws were read at 2·10⁴, 10⁵ and 10⁶ nodes (``bench/pagerank_graph.py --laws``
and the tables' per-batch counts); the graph here has another seed.  The recorded results
(``bench/results/``) are checked against the laws too, and against the prices of a dense
round and a local link: recorded counts and seconds, nothing timed here."""

import importlib
import json
import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT

from linview.compiler import calibrate
from linview.solve import cost
from linview.solve.cost import law_spread

sys.path.insert(0, str(ROOT / "bench"))
table_mod = importlib.import_module("pagerank_table")
terms_mod = importlib.import_module("pagerank_terms")
graph_mod = importlib.import_module("pagerank_graph")
RESULTS = ROOT / "bench" / "results"
#: the recorded counts at each size: --laws results and the tables' per-batch samples
RECORDED = ["pagerank_laws_n20000_seed7.json", "pagerank_laws_n100000_seed7.json",
            "pagerank_laws_n100000_seed12.json", "pagerank_table_n100000_seed7_means.json",
            "pagerank_table_n100000_means.json", "pagerank_table_n1000000_seed12_means.json",
            "pagerank_table_n1000000_seed7_means.json",  # recorded after the fit
            # recorded since push's dense round is one pass on every core (sweep_kernel)
            "pagerank_table_n100000_seed7_kernel.json",
            "pagerank_table_n100000_seed12_kernel.json",
            "pagerank_table_n1000000_seed12_kernel.json",
            "pagerank_table_n1000000_seed7_kernel.json"]
KERNEL_TABLES = [f for f in RECORDED if f.endswith("_kernel.json")]
#: rates of the order of this machine's (2 cores): a step's product on one thread, a dense
#: round's on both
RATES = calibrate.Rates(gemm_flops=1.4e11, gemm1_flops=7.5e10, stream_bytes=3.5e10,
                        stream1_bytes=1.5e10, thin_bytes=9.6e9, thin1_bytes=6.1e9, call_s=1.5e-6)


@pytest.fixture(scope="module")
def recorded():
    """A batch of 10 changes at three tolerances: ρ about 0.6 (push stays local), 6 (it
    spreads part of the way) and 60 (it covers the graph), 20 batches each."""
    args = SimpleNamespace(seed=3, nodes=20_000, degree=10, damping=0.85,
                           tolerances=[1e-3, 1e-4, 1e-5], batches=[10], min_batches=20)
    return table_mod.laws(args)


def test_laws_count_what_the_solver_records(recorded):
    n, d = recorded["graph"]["nodes"], recorded["damping"]
    rhos = []
    for cell in recorded["cells"]:
        e = table_mod.law_error(n, d, cell, sweep_s=2e-3, dense_s=1.2e-3)
        law, got = e["law"], e["recorded"]
        rhos.append(e["reduction"])
        assert len(cell["dense_rounds"]) == 20
        assert 1 / 1.2 <= law["steps"] / got["power_steps"] <= 1.2
        if got["dense_rounds"] >= 0.5:
            assert 1 / 1.5 <= law["sweeps"] / got["dense_rounds"] <= 1.5
        else:
            assert abs(law["sweeps"] - got["dense_rounds"]) <= 0.5
        # the factor the band allows for the laws covers what they get wrong here
        over, under = law_spread(e["reduction"])
        assert 1 / under <= e["priced"] <= over
    assert rhos[0] < 1 < rhos[1] < 10 < rhos[2]


def test_push_does_more_dense_rounds_as_the_residual_grows(recorded):
    """The laws' shape: more dense rounds and steps as ρ grows, as recorded."""
    means = [(np.mean(c["dense_rounds"]), np.mean(c["power_steps"]))
             for c in recorded["cells"]]
    assert means == sorted(means)


@pytest.mark.parametrize("name", RECORDED)
def test_laws_count_what_was_recorded_at_every_size(name):
    """Power iteration's steps within 1.2x of the law at 2·10⁴, 10⁵ and 10⁶ nodes (the law
    without the size term read 1.43x under at 10⁶), and the laws' priced error within the
    band's LAW_ERRORS in every recorded cell."""
    res = json.loads((RESULTS / name).read_text())
    n, d = res["graph"]["nodes"], res["damping"]
    for cell in table_mod.law_cells(res):
        e = table_mod.law_error(n, d, cell, sweep_s=cost.sweep_bytes(n, cell["nnz"]) / 1.5e10,
                                dense_s=cost.dense_round_seconds(n, cell["nnz"], RATES))
        assert 1 / 1.2 <= e["recorded"]["power_steps"] / e["law"]["steps"] <= 1.2
        over, under = law_spread(e["reduction"])
        assert 1 / under <= e["priced"] <= over, (cell["tolerance"], cell["batch"])


def test_power_iteration_slows_on_larger_graphs_never_below_s():
    """At one reduction ρ, more steps on a larger graph (recorded at ρ ≈ 12: about 8.6, 9.6
    and 10.8 steps at 2·10⁴, 10⁵ and 10⁶ nodes); the residual never falls slower than s a step,
    so the rate stops at log(1/s) on graphs of any size."""
    rates = [cost.pi_rate(n, 0.85) for n in (2e4, 1e5, 1e6, 1e7, 1e12)]
    assert rates == sorted(rates, reverse=True)
    assert rates[-1] == pytest.approx(math.log(1 / 0.85))
    # the same ρ (a batch's residual against the target) on graphs of 10⁵ and 10⁶ nodes
    small = cost.push_counts(100_000, 930_000, 0.85, 1e-5, 10)
    large = cost.push_counts(1_000_000, 9_300_000, 0.85, 1e-6, 10)
    assert small["reduction"] == pytest.approx(large["reduction"])
    assert large["steps"] > small["steps"] + 1


@pytest.mark.parametrize("name", KERNEL_TABLES)
def test_a_dense_round_costs_what_it_is_priced_at_both_sizes(name):
    """Fitted over a recorded table's batches (push's time less its per-batch and per-change
    seconds, against its local links and dense rounds): a dense round within DENSE_SPREAD
    of the seconds :func:`~linview.solve.cost.dense_round_seconds` prices with the rates
    recorded with the run, at 10⁵ nodes and at 10⁶ alike, and a local round's link within
    1.5x of LOCAL_LINK_S: the seconds of the prediction, against recorded seconds."""
    t = terms_mod.terms(json.loads((RESULTS / name).read_text()))
    low, high = cost.DENSE_SPREAD
    assert low <= t["dense_ratio"] <= high
    assert 1 / 1.5 <= t["link_s"] / cost.LOCAL_LINK_S <= 1.5


def test_check_laws_reads_a_table_and_prints_its_seconds(capsys):
    assert graph_mod.main(["--check-laws", str(RESULTS / KERNEL_TABLES[-1])]) == 0
    out = capsys.readouterr().out
    assert out.count("power steps") == 12
    assert "a step of power iteration:" in out and "times the" in out and "ms priced" in out
    assert out.count("recorded counts priced") == 12


# A second variable besides ρ (bench/push_law_fit.py): fitted on the recorded counts of all
# results but one, checked on the one held out.  Counts only, nothing timed here.
fit_mod = importlib.import_module("push_law_fit")


@pytest.fixture(scope="module")
def recorded_cells():
    return [c for name in fit_mod.RECORDED for c in fit_mod.cells_of(name)]


@pytest.fixture(scope="module")
def held_out_each(recorded_cells):
    return {name: fit_mod.held_out(name, recorded_cells) for name in fit_mod.RECORDED}


@pytest.mark.parametrize("planted", [0.0, 0.1])
def test_the_fit_finds_a_second_variable_where_the_counts_have_one(recorded_cells, planted):
    """The recorded cells with their dense rounds replaced by the ρ-only law's times
    ``batch^planted`` and a deterministic scatter of ±10%: fitted without the seed-7 10⁶
    table, the batch law finds the planted exponent and, where one was planted, beats the
    ρ-only law on the held-out table by far; where none was, it finds none."""
    laws = fit_mod.fit(recorded_cells)
    rng = np.random.default_rng(5)
    cells = []
    for c in recorded_cells:
        w = fit_mod.law_counts(laws, c)["dense"] * c["batch"] ** planted
        cells.append({**c, "dense": w * math.exp(rng.uniform(-0.1, 0.1)), "dense_se": 0.1 * w})
    held = fit_mod.HELD_OUT[0]
    train = [c for c in cells if c["file"] != held]
    fitted = fit_mod.fit(train)
    assert fitted["dense"][("batch", "scale")][2] == pytest.approx(planted, abs=0.02)
    err = fit_mod.evaluate(fitted, [c for c in cells if c["file"] == held])["dense"]
    if planted:
        assert err["batch (scale)"] < 0.5 * err["rho only"]
    else:
        assert err["batch (scale)"] == pytest.approx(err["rho only"], abs=0.02)


def test_no_second_variable_is_better_on_every_held_out_result(held_out_each):
    """For every candidate (batch size, a change's mass against the target, tolerance, the
    share of nodes a batch first touches; as a factor, a head or a peak) some recorded
    result, held out, gets a larger root-mean-square error of the dense rounds than from the
    ρ-only law fitted on the same cells (docs/solve_views.md, "A second variable")."""
    errors = [r["error"]["dense"] for r in held_out_each.values()]
    for key in errors[0]:
        if key != "rho only":
            assert any(e[key] > e["rho only"] for e in errors), key


def test_the_10e6_miss_stays_under_every_law(held_out_each):
    """Certified 1e-6 in batches of 10 on the seed-12 10⁶ graph: measured below 1x, its
    interval too; every law fitted without that table puts the point above 1x and counts
    fewer dense rounds than recorded (by 1.2x or more)."""
    r = held_out_each["pagerank_table_n1000000_seed12_means.json"]
    cell = next(c for c in r["cells"] if c["tolerance"] == 1e-6 and c["batch"] == 10)
    assert cell["side"] == "does not pay"
    for law in cell["laws"].values():
        assert law["priced"] > 1
        assert cell["recorded"]["dense"] / law["dense"] > 1.2


def test_equal_rho_cells_differ_both_ways_across_sizes():
    """Batches of 10 against batches of 100 at ten times the tolerance (the same ρ): at
    10⁶ nodes the batches of 10 made more dense rounds (seed 12: 8.65 against 6.40), on the
    2·10⁴-node graph fewer (4.20 against 5.28), each more than two standard errors apart:
    the batch size (or the tolerance) moves the count one way at one size and the other way
    at another."""
    def z(name, tol):
        res = json.loads((RESULTS / name).read_text())
        cells = {(c["tolerance"], c["batch"]): np.asarray(c["dense_rounds"], float)
                 for c in table_mod.law_cells(res)}
        a = cells[next(k for k in cells if math.isclose(k[0], tol) and k[1] == 10)]
        b = cells[next(k for k in cells if math.isclose(k[0], 10 * tol) and k[1] == 100)]
        se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        return (a.mean() - b.mean()) / se
    assert z("pagerank_table_n1000000_seed12_means.json", 1e-6) > 2
    assert z("pagerank_laws_n20000_seed7.json", 1e-4) < -2
