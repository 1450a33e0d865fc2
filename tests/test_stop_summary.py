"""The summary of ``linview run``: the same fields for every run (an empty stream too, with
its ``"seconds"``), and ``"batches"`` counts this run's batches from the source, apart from
those replayed from the log.  (Spark's fields are compared with these in
``tests/test_spark_stream.py``.)"""

import json

import numpy as np

from linview.app.cli import main

SRC = "function B = f(A)\n B = A' * A;\nend\n"


def run(tmp, capsys, *extra):
    assert main(["run", str(tmp / "f.m"), "--input", f"A={tmp / 'A.npy'}", "--updates",
                 str(tmp / "u.jsonl"), "--checkpoint", str(tmp / "ck"), "--quiet",
                 "--checkpoint-every", "2", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_empty_and_resumed_streams_have_the_same_fields(tmp_path, capsys):
    (tmp_path / "f.m").write_text(SRC)
    np.save(tmp_path / "A.npy", np.eye(3))
    (tmp_path / "u.jsonl").write_text("")
    empty = run(tmp_path, capsys)
    assert empty["seconds"] == 0.0 and empty["batches"] == 0 and empty["check"] is not None
    (tmp_path / "u.jsonl").write_text("".join(
        json.dumps({"input": "A", "row": i % 3 + 1, "add": [1.0, 0.0, 2.0]}) + "\n"
        for i in range(5)))
    full = run(tmp_path, capsys)
    assert set(full) == set(empty)
    assert full["batches"] == 5 and full["replayed_batches"] == 0 and full["batch"] == 5
    assert full["seconds"] > 0 and full["backend"] == "numpy" and full["spark"] is None
    assert full["interrupted"] is None and full["verify"] is None
    with open(tmp_path / "u.jsonl", "a") as f:
        f.write(json.dumps({"input": "A", "row": 1, "add": [0.0, 1.0, 0.0]}) + "\n")
    again = run(tmp_path, capsys, "--verify")
    assert set(again) == set(empty)
    assert again["batches"] == 1 and again["batch"] == 6 and again["resumed_at"] == 5
    assert again["verify"]["error"] < 1e-12 and again["verify"]["seconds"] >= 0
