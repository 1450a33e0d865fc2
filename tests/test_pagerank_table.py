"""``bench/pagerank_graph.py --table``: the ratio of means with a paired bootstrap
interval per cell, every batch's times and work counts kept, the measured side decided only
outside the interval, and ``--markdown`` recomputing the table from the recorded samples."""

import importlib
import json
import re
import sys

import numpy as np
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
table_mod = importlib.import_module("pagerank_table")
graph_mod = importlib.import_module("pagerank_graph")


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


def test_table_keeps_every_batch_and_markdown_recomputes_from_it(tmp_path, capsys,
                                                                 monkeypatch):
    """Without --json the result is named by its graph's size and seed (two seeds' tables
    at one size used to overwrite each other)."""
    monkeypatch.setattr(graph_mod, "HERE", tmp_path)
    (tmp_path / "results").mkdir()
    assert graph_mod.main(["--table", "--nodes", "3000", "--tolerances", "1e-3,1e-5",
                           "--batches", "1,10", "--changes", "20", "--seed", "5"]) == 0
    out = tmp_path / "results" / "pagerank_table_n3000_seed5.json"
    assert [p.name for p in (tmp_path / "results").iterdir()] == [out.name]
    res = json.loads(out.read_text())
    assert res["graph"]["seed"] == 5
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
    assert len(re.findall(r"predicted [0-9.]+×", text)) == 4
    assert "The prediction's side agrees with the measured side in" in text or (
        "No cell decides a side" in text)
    assert "no spread recorded" not in text


def cell(tol, batch, power, push):
    """A recorded cell with these per-batch times (seconds), nothing else measured."""
    return {"tolerance": tol, "batch": batch, "batches": len(power),
            "samples": {"power_s": power, "linview_s": push},
            "linview_per_batch": {"mean": float(np.mean(push))},
            "warm_power_per_batch": {"mean": float(np.mean(power))},
            "l1_error": 0.0, "linf_error": 0.0, "top100_equal": True}


def test_markdown_counts_a_cell_where_the_point_disagrees_as_disagreeing(capsys):
    """Four constructed cells on the recorded 10⁵-node graph and rates: at 1e-3 single
    changes (predicted 3.1x, pays, the band above 1x) measured 10x: agrees; at 1e-6
    batches of 100 (predicted 0.86x, does not pay, a close call) measured 5x: disagrees;
    at 1e-5 single changes (predicted 1.2x, pays, a close call) measured 0.2x: disagrees,
    the close call no excuse either way; at 1e-4 batches of 10 measured even within the
    spread: counted apart, not as agreeing."""
    rec = json.loads((ROOT / "bench/results/pagerank_table_n100000_seed7_means.json")
                     .read_text())
    rng = np.random.default_rng(1)
    push = list(rng.uniform(1e-3, 2e-3, 20))
    res = {**{k: rec[k] for k in ("graph", "rates", "damping")}, "seed_columns": 0,
           "cells": [cell(1e-3, 1, [10 * t for t in push], push),
                     cell(1e-6, 100, [5 * t for t in push], push),
                     cell(1e-5, 1, [0.2 * t for t in push], push),
                     cell(1e-4, 10, [t * (0.6 + 0.8 * (i % 2)) for i, t in enumerate(push)], push)]}
    tally = table_mod.Tally()
    text = table_mod.markdown(res)
    assert text.count("**disagrees**") == 2 and text.count(", agrees") == 1
    assert "does not pay, close call, **disagrees**" in text
    assert " pays, close call, **disagrees**" in text
    assert ("The prediction's side agrees with the measured side in 1 of the 3 cells where "
            "the measurement decides a side (1 cell measured even within the spread)") in text
    assert "Its band lies wholly on one side in 1 of those 3 cells" in text
    assert "on the measured side in 1 of them" in text
    # the tally alone: the point's side counts, a close call included
    close = {"verdict": "pays", "close_call": True}
    assert tally.count("does not pay", close) == ", **disagrees**"
    assert tally.count("pays", close) == ", agrees"
    assert tally.count("even, within the spread", close) == ""
    assert tally.n["agree"] == tally.n["disagree"] == tally.n["even"] == 1
    assert tally.n["band_decides"] == 0


def test_markdown_of_a_result_without_rates_prices_with_the_rates_given(capsys):
    """A result recorded before its rates were kept is priced with another result's rates
    (``--rates-from``), not with this machine's calibration of the moment: the same table
    wherever it is printed, with the predictions of those rates."""
    old = ROOT / "bench/results/pagerank_table_n1000000_rerun.json"
    given = ROOT / "bench/results/pagerank_table_n1000000_seed12_means.json"
    assert "rates" not in json.loads(old.read_text())
    assert graph_mod.main(["--markdown", str(old), "--rates-from", str(given)]) == 0
    text = capsys.readouterr().out
    res = {**json.loads(old.read_text()), "rates": json.loads(given.read_text())["rates"]}
    assert text.strip() == table_mod.markdown(res).strip()
    assert len(re.findall(r"predicted [0-9.]+×", text)) == 12
