"""A busy machine cannot poison the calibration cache: noisy calibrations (a spread between
trials, a high load average) serve one process and are not cached, and a cache that a
fresh probe contradicts is measured again.  Trial results, load averages and probes are
injected: nothing here depends on the speed of the machine running it."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linview.app import cli
from linview.compiler import calibrate
from linview.compiler.calibrate import Calibration, Rates

QUIET = Rates(gemm_flops=4e10, gemm1_flops=2e10, stream_bytes=9e9, stream1_bytes=7e9,
              thin_bytes=4e9, thin1_bytes=3e9, call_s=2e-6)
PROBE = {"stream": 1e10, "gemm1": 2e10, "stream1": 8e9}


def scaled(r: Rates, f: float) -> Rates:
    """``r`` with every rate times ``f`` (the call overhead divided by it)."""
    d = {k: v * f for k, v in r.as_dict().items()}
    d["call_s"] = r.call_s / f
    return Rates(**d)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A private cache, calibration on, and injected trials, load average and probe:
    ``trials`` (the Rates each trial returns, in turn), ``load`` (per core), ``probe``."""
    monkeypatch.setenv("LINVIEW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LINVIEW_CALIBRATION", raising=False)
    fake = {"trials": [QUIET] * 3, "load": 0.0, "probe": dict(PROBE), "measured": 0}

    def trial(_ops):
        fake["measured"] += 1
        return fake["trials"][(fake["measured"] - 1) % len(fake["trials"])]

    monkeypatch.setattr(calibrate, "_Operands", lambda scale: None)
    monkeypatch.setattr(calibrate, "_trial", trial)
    monkeypatch.setattr(calibrate, "load_average", lambda: fake["load"])
    monkeypatch.setattr(calibrate, "probe", lambda: dict(fake["probe"]))
    calibrate.reset()
    yield tmp_path / "calibration.json", fake
    calibrate.reset()


def test_a_quiet_calibration_is_cached(machine):
    path, fake = machine
    assert calibrate.rates() == QUIET
    assert calibrate.load(path) == (QUIET, "")
    assert calibrate.status()["cached"] and fake["measured"] == calibrate.TRIALS


def test_trials_that_disagree_make_a_noisy_calibration_that_is_not_cached(machine):
    path, fake = machine
    fake["trials"] = [scaled(QUIET, 1 / 3), QUIET, scaled(QUIET, 0.9)]
    cal = calibrate.measure()
    assert "trials differ" in cal.noisy and cal.rates == QUIET  # the best of each rate
    assert calibrate.rates() == QUIET  # used by this process
    assert not path.exists()
    assert calibrate.status()["cached"] is False and "trials differ" in calibrate.status()["noisy"]
    calibrate.reset()  # the next process measures again, as nothing was cached
    calibrate.rates()
    assert fake["measured"] == 3 * calibrate.TRIALS


def test_a_high_load_average_makes_a_noisy_calibration(machine):
    path, fake = machine
    fake["load"] = 1.0  # every core busy with other work
    assert "load average" in calibrate.measure().noisy
    calibrate.rates()
    assert not path.exists()


def test_cli_calibrate_says_a_noisy_calibration_is_not_cached(machine, capsys):
    path, fake = machine
    fake["load"] = 2.0
    assert cli.main(["calibrate"]) == 0
    out = capsys.readouterr().out
    assert "noisy calibration" in out and "not cached" in out
    assert not path.exists()
    assert cli.main(["calibrate", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cached"] is False and "load average" in doc["noisy"]
    fake["load"] = 0.0
    assert cli.main(["calibrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] is True
    assert calibrate.load(path) == (QUIET, "")


@pytest.mark.parametrize("factor", [2.0, 0.5, 1.6, 1 / 1.6])
def test_a_cache_the_probe_contradicts_is_measured_again_and_replaced(machine, factor):
    path, fake = machine
    calibrate.save(Calibration(scaled(QUIET, 0.3), dict(PROBE)), path)  # a poisoned cache
    fake["probe"] = {**PROBE, "stream": PROBE["stream"] * factor}
    assert calibrate.rates() == QUIET  # measured again, not the cached rates
    assert fake["measured"] == calibrate.TRIALS
    assert calibrate.load(path) == (QUIET, "")  # and the cache replaced
    assert "probe differs" in calibrate.status()["because"]


@pytest.mark.parametrize("factor", [1.0, 1.4, 1 / 1.4])
def test_a_cache_the_probe_agrees_with_is_used(machine, factor):
    path, fake = machine
    cached = scaled(QUIET, 0.3)
    calibrate.save(Calibration(cached, dict(PROBE)), path)
    fake["probe"] = {k: v * factor for k, v in PROBE.items()}
    assert calibrate.rates() == cached and fake["measured"] == 0
    assert calibrate.status()["source"] == "cache"


def test_a_noisy_remeasurement_keeps_the_old_cache_file(machine):
    """The probe contradicts the cache while the machine is busy: the process uses the
    new (noisy) rates, and the file is left for a quieter run to judge."""
    path, fake = machine
    old = scaled(QUIET, 0.5)
    calibrate.save(Calibration(old, dict(PROBE)), path)
    fake["probe"] = {k: v / 3 for k, v in PROBE.items()}
    fake["load"] = 1.5
    assert calibrate.rates() == QUIET
    assert calibrate.load(path) == (old, "")


@given(st.lists(st.floats(0.05, 20.0), min_size=1, max_size=5))
def test_best_of_takes_each_best_rate_and_the_spread(factors):
    trials = [scaled(QUIET, f) for f in factors]
    best, spread = calibrate.best_of(trials)
    assert best.gemm_flops == max(t.gemm_flops for t in trials)
    assert best.call_s == min(t.call_s for t in trials)
    assert math.isclose(spread, max(factors) / min(factors), rel_tol=1e-9)


def test_probes_of_other_rates_never_agree():
    assert calibrate.probe_disagreement({"stream": 1.0}, dict(PROBE)) == math.inf
    assert calibrate.probe_disagreement({**PROBE, "gemm1": -1.0}, dict(PROBE)) == math.inf
    assert calibrate.probe_disagreement(dict(PROBE), dict(PROBE)) == 1.0


class _Clock:
    """A fake clock that runs of a probed function advance by given durations, in turn."""

    def __init__(self, durations):
        self.t, self.durations, self.runs = 0.0, list(durations), 0

    def __call__(self):
        return self.t

    def run(self):
        self.t += self.durations[self.runs % len(self.durations)]
        self.runs += 1


def test_the_probe_sees_a_core_shared_with_cpu_bound_work():
    """Every other run waits for the core (1 ms of work, then 3 ms): the best single run
    says 1000 runs/s, the machine gives 500; the sustained blocks say 500."""
    clock = _Clock([0.001, 0.003])
    rate = calibrate.sustained(clock.run, seconds=0.02, blocks=3, clock=clock)
    assert rate == pytest.approx(500, rel=0.1)


def test_one_disturbed_block_does_not_make_the_probe_slow():
    """A quiet machine with one disturbance (a 30 ms stall inside one block): the best of
    the blocks is the quiet rate."""
    quiet = [0.001] * 25
    clock = _Clock([0.001] * 25 + [0.001] * 5 + [0.030] + [0.001] * 19 + quiet + quiet)
    rate = calibrate.sustained(clock.run, seconds=0.02, blocks=3, clock=clock)
    assert rate == pytest.approx(1000, rel=0.1)


@pytest.mark.parametrize("busy", [0.2, 0.4, 0.6])
def test_a_poisoned_cache_is_replaced_once_the_machine_is_quiet(machine, busy):
    """A calibration under CPU-bound processes that the noise check let through (trials
    alike, the load average not yet risen) caches slow rates with its slow probe.  When
    the processes stop, the first use measures again; while the load average still
    lags, that measurement serves the process but is not cached; once it has fallen, the
    cache is replaced, and then used."""
    path, fake = machine
    fake["trials"], fake["probe"] = [scaled(QUIET, busy)] * 3, {
        k: v * busy for k, v in PROBE.items()}
    assert calibrate.rates(refresh=True) == scaled(QUIET, busy)
    assert calibrate.load(path) == (scaled(QUIET, busy), "")  # poisoned
    fake["trials"], fake["probe"], fake["load"] = [QUIET] * 3, dict(PROBE), 1.2
    calibrate.reset()
    assert calibrate.rates() == QUIET and "probe differs" in calibrate.status()["because"]
    assert calibrate.load(path) == (scaled(QUIET, busy), "")  # the load average lags
    fake["load"] = 0.1
    calibrate.reset()
    assert calibrate.rates() == QUIET and calibrate.status()["cached"] is True
    assert calibrate.load(path) == (QUIET, "")  # replaced
    measured = fake["measured"]
    calibrate.reset()
    assert calibrate.rates() == QUIET and fake["measured"] == measured  # and trusted
    assert calibrate.status()["source"] == "cache"
