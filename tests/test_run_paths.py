"""``linview run``: --updates, --checkpoint and --out are paths on the driver's own
filesystem; a URI is refused by name (before it could become a local directory called
``hdfs:``), and ``--help`` says so."""

import numpy as np
import pytest

from linview.app.cli import main


@pytest.mark.parametrize("flag", ["--updates", "--checkpoint", "--out"])
@pytest.mark.parametrize("uri", ["hdfs://nn:8020/ck", "s3a://bucket/x", "file:///tmp/x",
                                 "hdfs:/ck"])
@pytest.mark.parametrize("backend", ["numpy", "spark"])
def test_uris_are_refused_by_name_and_create_nothing(tmp_path, monkeypatch, capsys, flag,
                                                     uri, backend):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.m").write_text("function B = f(A)\n B = A' * A;\nend\n")
    (tmp_path / "u.jsonl").write_text('{"input": "A", "row": 1, "add": [1, 2]}\n')
    args = {"--updates": "u.jsonl", "--checkpoint": "ck", "--out": "out", flag: uri}
    argv = ["run", "f.m", "--backend", backend, "--input", "A=1",
            *(x for kv in args.items() for x in kv)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {flag} {uri}: a URI, but linview run reads and writes" in err
    assert "driver's own filesystem" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.m", "u.jsonl"]


def test_a_local_path_with_a_colon_is_still_a_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.m").write_text("function B = f(A)\n B = A' * A;\nend\n")
    (tmp_path / "u.jsonl").write_text('{"input": "A", "row": 1, "add": [1, 2]}\n')
    np.save(tmp_path / "A.npy", np.eye(2))
    assert main(["run", "f.m", "--input", "A=A.npy", "--updates", "u.jsonl", "--out",
                 "out:1", "--quiet"]) == 0
    A = np.array([[2.0, 2.0], [0.0, 1.0]])
    np.testing.assert_allclose(np.load(tmp_path / "out:1" / "latest.npz")["B"], A.T @ A)


def test_help_states_that_paths_are_on_the_drivers_filesystem(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--updates, --checkpoint and --out are paths on the driver's own filesystem" in out
    assert "hdfs:// or s3a:// are refused" in out
