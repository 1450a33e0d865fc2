"""Bad input is a LinviewError with a sentence a user can act on: encodings, arguments,
complex updates, oversized programs; outputs are snapshots that later updates leave alone."""

import numpy as np
import pytest

import linview
from linview.app.cli import main

POWERS = "function C = p(A)\n  %#linview dims A(n,n)\n  C = A * A;\nend\n"


def _cli(argv, capsys):
    """(exit status, stderr) of the CLI; argparse's own errors exit through SystemExit."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return code, err


@pytest.mark.parametrize("content", [
    b"\xef\xbb\xbffunction C = p(A)\n  % caf\xc3\xa9\n  C = A * A;\nend\n",  # UTF-8 + BOM
    b"function C = p(A)\n  % caf\xe9 (Latin-1)\n  C = A * A;\nend\n",
])
def test_bom_and_latin1_comments_are_accepted(tmp_path, content, capsys):
    path = tmp_path / "p.m"
    path.write_bytes(content)
    prog = linview.compile_file(path)
    np.testing.assert_array_equal(prog.load(A=np.eye(2) * 3)["C"], np.eye(2) * 9)
    assert _cli(["compile", str(path), "-o", str(tmp_path / "p.py")], capsys)[0] == 0


def test_a_non_ascii_byte_in_code_is_named_with_its_place(tmp_path, capsys):
    path = tmp_path / "p.m"
    path.write_bytes(b"function C = p(A)\n  C = A * A\xe9;\nend\n")
    with pytest.raises(linview.ParseError, match=r"p\.m:2:12: unexpected character 'é'"):
        linview.compile_file(path)
    code, err = _cli(["compile", str(path)], capsys)
    assert code == 2 and "p.m:2:12" in err


@pytest.mark.parametrize("argv", [["demo", "--n", "0"], ["demo", "--n", "-5"],
                                  ["bench", "P", "--updates", "0"],
                                  ["bench", "P", "--rank", "0"]])
def test_bad_counts_are_clear_errors(tmp_path, argv, capsys):
    path = tmp_path / "p.m"
    path.write_text(POWERS)
    code, err = _cli([str(path) if a == "P" else a for a in argv], capsys)
    assert code == 2 and "must be at least 1" in err


def test_bad_counts_through_the_api():
    from linview.app.bench import run_bench
    from linview.app.demo import demo

    with pytest.raises(linview.InputError, match="at least one update"):
        run_bench(linview.compile(POWERS, name="p"), updates=0)
    with pytest.raises(linview.InputError, match="n >= 1"):
        demo(n=0)


@pytest.mark.parametrize("bad", [np.ones(3) * (1 + 1j), np.array([1, 2, 3], dtype=object),
                                 [1j, 0, 0]])
def test_complex_and_object_updates_are_refused(bad):
    v = linview.compile(POWERS, name="p").load(A=np.eye(3))
    with pytest.raises(linview.UpdateError, match="not real.*nothing was changed"):
        v.update("A", bad, np.ones(3))
    with pytest.raises(linview.UpdateError, match="not real"):
        v.update("A", np.ones(3), bad)
    np.testing.assert_array_equal(v["C"], np.eye(3))
    with pytest.raises(linview.InputError, match="complex|object"):
        linview.compile(POWERS, name="p").load(A=np.eye(3) * (1 + 0j))


def test_kept_outputs_do_not_change_under_later_updates():
    v = linview.compile(POWERS, name="p").load(A=np.eye(3))
    kept, kept_outputs, kept_input = v["C"], v.outputs, v["A"]
    v.update("A", np.ones(3), np.ones(3))
    np.testing.assert_array_equal(kept, np.eye(3))
    np.testing.assert_array_equal(kept_outputs["C"], np.eye(3))
    np.testing.assert_array_equal(kept_input, np.eye(3))
    assert not np.array_equal(v["C"], kept)
    with pytest.raises(ValueError, match="read-only"):
        kept[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        v.outputs["C"][0, 0] = 1.0


def test_programs_that_unroll_too_far_are_refused_with_a_hint():
    loop = ("function T = f(A, B)\n  %#linview dims A(n,n) B(n,n)\n  T = B;\n"
            "  for i = 1:1000\n    T = A * T * A;\n  end\nend\n")
    with pytest.raises(linview.CompileError, match=r"more than 500 statements \(at f\.m:5\)"
                       r"(.|\n)*A\^k"):
        linview.compile(loop, name="f")
    with pytest.raises(linview.CompileError, match="more than 500"):
        linview.compile(POWERS.replace("A * A", "A^100000"), name="p", model="linear")


def test_huge_powers_lower_in_log_k_statements():
    for k in (100000, 10**12):
        prog = linview.compile(POWERS.replace("A * A", f"A^{k}"), name="p")
        assert len(prog.program.statements) <= 2 * k.bit_length()
    s = linview.compile("function C = p(A, s)\n  %#linview scalar s\n  C = s^3000 * A;\nend\n",
                        name="p")
    v = s.load(A=np.eye(2), s=1.0001)
    np.testing.assert_allclose(v["C"], np.eye(2) * 1.0001 ** 3000)
