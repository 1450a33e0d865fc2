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
    assert thin.main(["--only", "cg_steps,markov30", "--n", "12", "--updates", "3",
                      "--repeat", "3", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got) == {"cg_steps", "markov30"}
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
