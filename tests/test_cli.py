"""The command line: every verb end to end, and errors without tracebacks."""

import json
import subprocess
import sys

import pytest

from linview.app.cli import main

OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


@pytest.fixture
def ols_file(tmp_path):
    p = tmp_path / "ols.m"
    p.write_text(OLS)
    return p


def test_compile_writes_a_module(ols_file, tmp_path, capsys):
    out = tmp_path / "ols_trigger.py"
    assert main(["compile", str(ols_file), "-o", str(out)]) == 0
    text = out.read_text()
    assert "class Ols(rt.TriggerModule)" in text and "def on_update_X" in text
    assert main(["compile", str(ols_file)]) == 0
    assert "def on_update_Y" in capsys.readouterr().out


def test_explain_prints_triggers_and_passes(ols_file, capsys):
    assert main(["explain", str(ols_file)]) == 0
    out = capsys.readouterr().out
    assert "ON UPDATE X BY (U, V)" in out and "Woodbury" in out
    assert main(["explain", str(ols_file), "--after", "lower"]) == 0
    assert "beta_inv := inv(beta_arg)" in capsys.readouterr().out


def test_cost_json_and_table(ols_file, capsys):
    assert main(["cost", str(ols_file), "--dims", "m=4000,n=2000,p=1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (tx, ty) = report["triggers"]
    assert tx["input"] == "X" and tx["predicted_speedup"] > 10
    assert {v["view"]: v["chosen"] for v in tx["views"]}["beta_inv"] == "incr"
    assert main(["cost", str(ols_file), "--dims", "m=400,n=200,p=1", "--formulas"]) == 0
    out = capsys.readouterr().out
    assert "predicted speedup" in out and "re-evaluation flops = " in out


def test_bench_json_has_documented_fields(ols_file, tmp_path, capsys):
    js, png = tmp_path / "b.json", tmp_path / "b.png"
    assert main(["bench", str(ols_file), "--dims", "m=60,n=30,p=2", "--updates", "5",
                 "--json", str(js), "--plot", str(png)]) == 0
    r = json.loads(js.read_text())
    assert set(r["strategies"]) == {"reeval", "reeval_other_threads", "incr", "hybrid", "auto"}
    # the as-written baseline on every BLAS thread and on one: the faster is compared
    both = r["baseline_threads"]
    assert r["strategies"]["reeval"]["mean_s"] == min(both["all_threads_s"],
                                                      both["one_thread_s"])
    assert r["strategies"]["reeval_other_threads"]["mean_s"] == max(both["all_threads_s"],
                                                                    both["one_thread_s"])
    for s in r["strategies"].values():
        for field in ("median_s", "p10_s", "p90_s", "speedup_vs_reeval", "floor_s",
                      "trigger_over_floor", "max_rel_error", "peak_temp_bytes",
                      "predicted_flops"):
            assert field in s
        assert s["max_rel_error"] < 1e-8
    assert r["ranking"]["measured"] and r["ranking"]["predicted"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "ranking, fastest first" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["cost", "{f}"], "missing: m, n, p"),
    (["cost", "{f}", "--dims", "n=oops"], "bad --dims item"),
    (["compile", "{f}", "--strategy", "fast"], "valid strategies: incr, hybrid, reeval"),
    (["compile", "{f}", "--model", "cubic"], "valid models: exp, linear, skip=S, written, auto"),
    (["compile", "{bad}"], "bad.m:2:"),
    (["compile", "{missing}"], "cannot read"),
    (["explain", "{f}", "--after", "nope"], "passes: lower"),
])
def test_errors_exit_2_without_traceback(ols_file, tmp_path, args, needle):
    bad = tmp_path / "bad.m"
    bad.write_text("function y = f(A)\n y = A +* A;\nend\n")
    argv = [a.format(f=ols_file, bad=bad, missing=tmp_path / "none.m") for a in args]
    proc = subprocess.run([sys.executable, "-m", "linview.app.cli", *argv], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_demo_runs():
    proc = subprocess.run([sys.executable, "-m", "linview.app.cli", "demo", "--n", "60"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "ON UPDATE X" in proc.stdout and "ranking, fastest first" in proc.stdout
