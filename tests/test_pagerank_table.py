"""``bench/pagerank_graph.py --table``: the ratio of means with a paired bootstrap
interval per cell, every batch's times and work counts kept, the measured side decided only
outside the interval, and ``--markdown`` recomputing the table from the recorded samples."""

import json
import re
import sys

import numpy as np
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
table_mod = pytest.importorskip("pagerank_table")
graph_mod = pytest.importorskip("pagerank_graph")


def test_ratio_of_means_is_totals_and_its_interval_holds_it():
    rng = np.random.default_rng(3)
    push = rng.lognormal(0, 1, 40)
    power = push * rng.uniform(1.5, 2.5, 40)
    r = table_mod.ratio_of_means(power, push)
    assert r["ratio"] == pytest.approx(power.sum() / push.sum())
    assert r["low"] <= r["ratio"] <= r["high"] and r["batches"] == 40
    assert table_mod.measured_side(r["low"], r["high"]) == "pays"
    # every batch the same ratio: no spread
    same = table_mod.ratio_of_means(3 * push, push)
    assert same["low"] == pytest.approx(3) and same["high"] == pytest.approx(3)


def test_a_skewed_cell_whose_interval_holds_one_has_no_side():
    """Most batches cheap for push, one in ten expensive: the median says 4x, the total
    says even, and the interval of the total's ratio holds 1x."""
    push = np.array([1.0] * 9 + [30.0])
    power = np.array([4.0] * 10)
    r = table_mod.ratio_of_means(power, push)
    assert np.median(power) / np.median(push) == 4
    assert r["ratio"] == pytest.approx(40 / 39)
    assert r["low"] < 1 < r["high"]
    assert table_mod.measured_side(r["low"], r["high"]) == "even, within the spread"
    assert table_mod.measured_side(0.5, 0.9) == "does not pay"


def test_table_keeps_every_batch_and_markdown_recomputes_from_it(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert graph_mod.main(["--table", "--nodes", "3000", "--tolerances", "1e-3,1e-5",
                           "--batches", "1,10", "--changes", "20", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert set(res["rates"]) >= {"stream1_bytes", "call_s"}
    for c in res["cells"]:
        s = c["samples"]
        assert len(s["linview_s"]) == len(s["power_s"]) == len(s["sweeps"]) == c["batches"]
        assert c["speedup_per_change"] == pytest.approx(sum(s["power_s"]) / sum(s["linview_s"]))
        iv = c["speedup_interval"]
        assert iv["low"] <= c["speedup_per_change"] <= iv["high"]
        assert c["bound_held"]
    capsys.readouterr()
    assert graph_mod.main(["--markdown", str(out)]) == 0
    text = capsys.readouterr().out
    assert len(re.findall(r"predicted [0-9.]+×", text)) == 4 and "Sides agree in" in text
    assert "no spread recorded" not in text
