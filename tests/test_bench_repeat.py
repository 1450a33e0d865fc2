"""``bench/thin_iterate.py --repeat K``: each program measured K times (a fresh compile,
load and stream each), the median of the K ratios compared with the target."""

import importlib.util
import json

import numpy as np
from conftest import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_repeat_compares_the_median_of_the_runs(tmp_path, capsys):
    thin = _script("thin_iterate")
    out = tmp_path / "r.json"
    assert thin.main(["--only", "cg_steps", "--n", "12", "--updates", "3",
                      "--repeat", "3", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got) == {"cg_steps"}
    for r in got.values():
        ratios = [run["ratio"] for run in r["runs"]]
        assert len(ratios) == 3
        # each run's own ratio: its best as-written mean over AUTO's mean
        for run in r["runs"]:
            best = min(run["all_threads_s"], run["one_thread_s"])
            assert np.isclose(run["ratio"], best / run["auto_s"])
            assert run["max_rel_error"] < 1e-8
        assert r["ratio"] == float(np.median(ratios))
    text = capsys.readouterr().out
    assert "median of 3 runs" in text


def test_repeat_even_count_takes_the_middle_two(tmp_path):
    thin = _script("thin_iterate")
    out = tmp_path / "r.json"
    assert thin.main(["--only", "cg_steps", "--n", "12", "--updates", "3", "--repeat", "2",
                      "--json", str(out)]) == 0
    r = json.loads(out.read_text())["cg_steps"]
    assert np.isclose(r["ratio"], float(np.mean([x["ratio"] for x in r["runs"]])))


def test_quiet_blas_reports_the_fair_baselines(tmp_path):
    """``bench/quiet_blas.py``: beside the call back to back (the old baseline), the call
    after a busy wait as long as the update (the control) and after a read of 256 MB; the
    update's own share is right-after over the control."""
    quiet = _script("quiet_blas")
    out = tmp_path / "q.json"
    assert quiet.main(["--dims", "n=40", "--updates", "2", "--call-threads", "1",
                       "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["call_threads"] == 1
    assert set(got["calls"]) == {f"{c}, {p}" for c in ("gemv 2000", "gemm 600")
                                 for p in ("back to back", "paced")}
    for r in got["calls"].values():
        med = {k: r[k]["median_s"] for k in ("after", "alone", "control", "evicted")}
        assert all(v > 0 for v in med.values())
        assert np.isclose(r["ratio"], med["after"] / med["alone"])
        assert np.isclose(r["control_ratio"], med["control"] / med["alone"])
        assert np.isclose(r["evicted_ratio"], med["evicted"] / med["alone"])
        assert np.isclose(r["fair_ratio"], med["after"] / med["control"])


def test_quiet_blas_causes_runs_every_prelude(capsys):
    causes = _script("quiet_blas_causes")
    preludes = "none,update,spin,spin1,touch,warm,sweep,reuse,sleep"
    assert causes.main(["--dims", "n=40", "--size", "60", "--calls", "2", "--rounds", "1",
                        "--mode", "reeval", "--preludes", preludes]) == 0
    text = capsys.readouterr().out
    assert "mode reeval" in text
    for t in (2, 1):
        for p in preludes.split(","):
            assert f"threads {t} {p} " in text


def test_quiet_blas_causes_worker_spin_prints_both_cases(capsys):
    causes = _script("quiet_blas_causes")
    assert causes.main(["--worker-spin"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert sum("then a limit to one thread" in line for line in lines) == 2
