"""Calibration cache: measured once per machine, validated before it is trusted."""

import json

import pytest

from linview.app import cli
from linview.compiler import calibrate
from linview.compiler.calibrate import Calibration, Rates

FIXED = Rates(gemm_flops=4e10, gemm1_flops=2e10, stream_bytes=9e9, stream1_bytes=7e9,
              thin_bytes=4e9, thin1_bytes=3e9, call_s=2e-6)
#: the probe measured with FIXED, and what the fake probe measures now (they agree)
PROBE = {"stream": 1e10, "gemm1": 2e10, "stream1": 8e9}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache folder, calibration on, and a measurement and probe that are
    instant and counted (so a test sees whether rates() measured)."""
    monkeypatch.setenv("LINVIEW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LINVIEW_CALIBRATION", raising=False)
    calls = []

    def fake_measure(scale=1.0):
        calls.append(scale)
        return Calibration(FIXED, dict(PROBE))

    monkeypatch.setattr(calibrate, "measure", fake_measure)
    monkeypatch.setattr(calibrate, "probe", lambda: dict(PROBE))
    calibrate.reset()
    yield tmp_path / "calibration.json", calls
    calibrate.reset()


def test_measure_gives_plausible_rates():
    cal = calibrate.measure(scale=0.1, trials=2)
    for k, (lo, hi) in calibrate.RANGES.items():
        assert lo <= getattr(cal.rates, k) <= hi, k
    assert set(cal.probe) == {"stream", "gemm1", "stream1"}
    assert all(v > 0 for v in cal.probe.values()) and cal.spread >= 1.0


def test_first_use_measures_and_caches_then_reuses(cache):
    path, calls = cache
    assert calibrate.rates() == FIXED and len(calls) == 1
    assert calibrate.load(path) == (FIXED, "")
    calibrate.reset()
    assert calibrate.rates() == FIXED and len(calls) == 1  # read back, not measured


def _rewrite(path, edit, fix_checksum: bool):
    doc = json.loads(path.read_text())
    edit(doc)
    if fix_checksum:
        payload = {k: v for k, v in doc.items() if k != "checksum"}
        doc["checksum"] = calibrate._checksum(payload)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("damage,why", [
    (lambda p: p.write_text("{not json"), "unreadable"),
    (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "unreadable"),
    (lambda p: p.write_text("[1, 2]"), "another format"),
    (lambda p: _rewrite(p, lambda d: d["rates"].update(gemm_flops=1e13), False), "checksum"),
    (lambda p: _rewrite(p, lambda d: d["fingerprint"].update(host="elsewhere"), True),
     "another machine"),
    (lambda p: _rewrite(p, lambda d: d["fingerprint"].update(blas=["mkl 2024 64"]), True),
     "another machine"),
    (lambda p: _rewrite(p, lambda d: d["rates"].update(call_s=-1.0), True), "out of range"),
    (lambda p: _rewrite(p, lambda d: d["rates"].update(stream_bytes="fast"), True),
     "out of range"),
    (lambda p: _rewrite(p, lambda d: d["rates"].pop("gemm1_flops"), True), "lacks rates"),
    (lambda p: _rewrite(p, lambda d: d.update(version=0), True), "another format"),
    (lambda p: _rewrite(p, lambda d: d.pop("probe"), True), "lacks its probe"),
])
def test_corrupt_or_foreign_cache_is_remeasured(cache, damage, why):
    path, calls = cache
    calibrate.save(Calibration(Rates(1e11, 1e11, 1e11, 1e11, 1e10, 1e10, 1e-5), PROBE), path)
    damage(path)
    r, reason = calibrate.load(path)
    assert r is None and why in reason
    assert calibrate.rates() == FIXED and len(calls) == 1  # measured, not trusted
    assert calibrate.load(path) == (FIXED, "")  # and the cache is valid again


def test_calibration_off_uses_the_reference_rates(cache, monkeypatch):
    _, calls = cache
    monkeypatch.setenv("LINVIEW_CALIBRATION", "off")
    assert calibrate.rates() == calibrate.REFERENCE and not calls


def test_cli_calibrate_show_names_a_bad_cache(cache, capsys):
    path, _ = cache
    path.write_text("{oops")
    assert cli.main(["calibrate", "--show"]) == 0
    assert "unreadable calibration file" in capsys.readouterr().out
    assert cli.main(["calibrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rates"]["gemm_flops"] == FIXED.gemm_flops
    assert calibrate.load(path)[0] == FIXED
