"""View keys and reuse across program edits (``load(reuse=...)``, ``restore(program=...)``,
``load(store=...)``): a reused load equals a fresh load of the edited program, and what it
recomputes is exactly what the edit changed.

Programs are scripts over two dynamic inputs, one statement per line; the generator knows
which statement reads which, so the statements an edit affects (the edited one and
everything downstream of it) come from the script text, not from the keys under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.compiler import keys

N = 6
#: expression templates over two operands (a, b) and a constant c
FORMS = ["{a} * {b}", "{a} + {c} * {b}", "{a}' - {b}", "{c} * {a} * {b}'", "{a} + {b}'"]


@st.composite
def programs(draw):
    """``[(name, form, a, b, c)]``: statement i reads inputs A, B and earlier statements."""
    stmts = []
    for i in range(draw(st.integers(2, 5))):
        pool = ["A", "B"] + [s[0] for s in stmts]
        stmts.append((f"s{i}", draw(st.sampled_from(FORMS)), draw(st.sampled_from(pool)),
                      draw(st.sampled_from(pool)), draw(st.integers(2, 5))))
    return stmts


def text(stmts) -> str:
    lines = ["%#linview input A(n,n) B(n,n)", "%#linview dynamic A B"]
    lines += [f"{n} = {f.format(a=a, b=b, c=c)};" for n, f, a, b, c in stmts]
    lines += [f"%#linview output {n}" for n, *_ in stmts]
    return "\n".join(lines) + "\n"


def downstream(stmts, changed: set[str]) -> set[str]:
    """The statements that read (directly or not) one in ``changed``, and those."""
    out = set(changed)
    for n, _, a, b, _ in stmts:
        if a in out or b in out:
            out.add(n)
    return out


def edit(stmts, kind: str, i: int):
    """``(edited statements, names of statements whose values change, renaming)``."""
    stmts = list(stmts)
    i %= len(stmts)
    name = stmts[i][0]
    if kind == "constant":  # a different constant: a different value
        n, f, a, b, c = stmts[i]
        stmts[i] = (n, f if "{c}" in f else "{c} * " + f, a, b, c + 7)
        return stmts, downstream(stmts, {name}), {}
    if kind == "add":
        stmts.append(("extra", "{a} * {b} + {c} * {a}", name, "B", 3))
        return stmts, {"extra"}, {}
    if kind == "rename":
        new = "renamed"

        def r(x):
            return new if x == name else x

        return [(r(n), f, r(a), r(b), c) for n, f, a, b, c in stmts], set(), {name: new}
    if kind == "remove":  # the last statement (nothing reads it)
        return stmts[:-1], set(), {}
    # reorder: move the last statement up as far as its operands allow
    last = stmts.pop()
    at = max([k + 1 for k, s in enumerate(stmts) if s[0] in (last[2], last[3])] or [0])
    stmts.insert(at, last)
    return stmts, set(), {}


def line_of(prog, stmts) -> dict[str, str]:
    """``{view: source statement}``: the statement on the view's line (two leading
    pragma lines)."""
    return {s.name: stmts[s.line - 3][0] for s in prog.plan.program.statements}


def update_stream(views, rng, count: int) -> None:
    for _ in range(count):
        x = str(rng.choice(["A", "B"]))
        u = np.zeros(N)
        u[rng.integers(N)] = 1.0
        views.update(x, u, 0.1 * rng.standard_normal(N))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(["constant", "add", "rename", "remove", "reorder"]),
       st.integers(0, 10), st.integers(0, 2 ** 31 - 1))
def test_an_edit_recomputes_exactly_what_it_changed(stmts, kind, i, seed):
    rng = np.random.default_rng(seed)
    old_prog = linview.compile(text(stmts), name="p")
    old = old_prog.load(A=rng.standard_normal((N, N)), B=rng.standard_normal((N, N)))
    update_stream(old, rng, 4)
    new_stmts, changed, renamed = edit(stmts, kind, i)
    new_prog = linview.compile(text(new_stmts), name="p")
    inputs = {"A": old["A"], "B": old["B"]}
    reused = new_prog.load(**inputs, reuse=old)
    fresh = new_prog.load(**inputs)
    for name in new_prog.module_class.OUTPUTS:
        np.testing.assert_allclose(reused[name], fresh[name], rtol=1e-12, atol=1e-12)
    origin = line_of(new_prog, new_stmts)
    recomputed = {origin[v] for v in reused.reuse_report.recomputed}
    assert recomputed == changed & set(origin.values())
    # and it goes on maintaining: the reused views follow updates as fresh ones do (an
    # absolute bound too: a view may be exactly zero, s1 + s1' of an antisymmetric s1)
    update_stream(reused, rng, 3)
    again = new_prog.load(A=reused["A"], B=reused["B"])
    for name in new_prog.module_class.OUTPUTS:
        np.testing.assert_allclose(reused[name], again[name], rtol=1e-9, atol=1e-9)


def test_keys_ignore_names_and_order_but_not_constants_or_roles():
    base = [("s0", "{a} * {b}", "A", "B", 2), ("s1", "{a} + {c} * {b}", "A", "s0", 3)]
    k = keys.structural(linview.compile(text(base), name="p").plan.program)
    renamed = [("t", "{a} * {b}", "A", "B", 2), ("s1", "{a} + {c} * {b}", "A", "t", 3)]
    k2 = keys.structural(linview.compile(text(renamed), name="p").plan.program)
    assert k2["t"] == k["s0"] and k2["s1"] == k["s1"]
    other = [("s0", "{a} * {b}", "A", "B", 2), ("s1", "{a} + {c} * {b}", "A", "s0", 4)]
    k3 = keys.structural(linview.compile(text(other), name="p").plan.program)
    assert k3["s0"] == k["s0"] and k3["s1"] != k["s1"]
    static = text(base).replace("%#linview dynamic A B", "%#linview dynamic A")
    k4 = keys.structural(linview.compile(static, name="p").plan.program)
    assert k4["s0"] != k["s0"]  # B's role changed: everything that reads B


def test_changed_input_data_is_never_reused():
    prog = linview.compile(text([("s0", "{a} * {b}", "A", "B", 2)]), name="p")
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((N, N)), rng.standard_normal((N, N))
    old = prog.load(A=A, B=B)
    B2 = B.copy()
    B2[0, 0] += 1e-9  # outside the update stream
    again = prog.load(A=A, B=B2, reuse=old)
    assert again.reuse_report.reused == []
    np.testing.assert_allclose(again["s0"], A @ B2, rtol=1e-14)


OLS = "function beta = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\nend\n"
OLS_R = ("function [beta, r] = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\n"
         "  yhat = X * beta;\n  r = Y - yhat;\nend\n")
RIDGE = "function b = ridge(X, Y)\n  b = (X' * X + 0.5 * eye(columns(X))) \\ (X' * Y);\nend\n"


@pytest.fixture
def ols_views():
    rng = np.random.default_rng(7)
    views = linview.compile(OLS, name="ols").load(X=rng.standard_normal((40, 12)),
                                                  Y=rng.standard_normal((40, 1)))
    for i in range(5):
        u = np.zeros(40)
        u[i] = 1.0
        views.update("X", u, 0.1 * rng.standard_normal(12))
    return views


def test_restore_an_edited_program_from_a_state_file(tmp_path, ols_views):
    ols_views.save(tmp_path / "s.npz")
    edited = linview.compile(OLS_R, name="ols")
    views = linview.restore(tmp_path / "s.npz", program=edited)
    assert sorted(views.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
    assert sorted(views.reuse_report.recomputed) == ["r", "yhat"]
    fresh = edited.load(X=ols_views["X"], Y=ols_views["Y"])
    np.testing.assert_allclose(views["r"], fresh["r"], rtol=1e-12, atol=1e-12)
    # the reused inverse keeps being probed and maintained
    views.update("X", np.eye(40)[3], 0.1 * np.ones(12))
    assert views.verify() < 1e-9


def test_a_reused_inverse_brings_its_probe_state(ols_views):
    edited = linview.compile(OLS_R, name="ols")
    views = edited.load(X=ols_views["X"], Y=ols_views["Y"], reuse=ols_views)
    assert "beta_inv" in views.reuse_report.reused
    assert views._prober.seeds.keys() == ols_views._prober.seeds.keys()
    views.update("X", np.eye(40)[5], 0.2 * np.ones(12))
    assert "beta_inv" in views.probes  # probed at the first update, as after a fresh load


def test_ridge_edit_reuses_what_it_can(ols_views):
    ridge = linview.compile(RIDGE, name="ridge")
    views = ridge.load(X=ols_views["X"], Y=ols_views["Y"], reuse=ols_views)
    assert views.reuse_report.reused == ["b_p1"]  # XᵀY; XᵀX was never kept by OLS
    assert views.verify() < 1e-9


def test_a_store_is_shared_between_programs(tmp_path):
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((30, 8)), rng.standard_normal((30, 1))
    store = tmp_path / "store"
    first = linview.compile(OLS, name="ols").load(X=X, Y=Y, store=store)
    assert first.reuse_report.reused == []
    second = linview.compile(OLS_R, name="ols2").load(X=X, Y=Y, store=store)
    assert sorted(second.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
    assert sorted(second.reuse_report.recomputed) == ["r", "yhat"]
    np.testing.assert_allclose(second["r"], Y - X @ np.linalg.solve(X.T @ X, X.T @ Y),
                               rtol=1e-9, atol=1e-12)


def test_corrupt_or_foreign_store_entries_are_recomputed_with_a_warning(tmp_path):
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((30, 8)), rng.standard_normal((30, 1))
    store = tmp_path / "store"
    prog = linview.compile(OLS, name="ols")
    prog.load(X=X, Y=Y, store=store).wait_for_store()  # written while the load returned
    entries = sorted(store.rglob("*.npz"))
    assert entries
    entries[0].write_bytes(entries[0].read_bytes()[:100])  # truncated
    if len(entries) > 1:  # a foreign entry: another key's file under this name
        entries[1].write_bytes(entries[-1].read_bytes())
    with pytest.warns(UserWarning, match="not used, the view is recomputed"):
        views = prog.load(X=X, Y=Y, store=store)
    np.testing.assert_allclose(views["beta"], np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)


def test_reuse_of_a_file_that_is_no_state_is_refused(tmp_path):
    bad = tmp_path / "nokeys.npz"
    bad.write_text("not a state file")
    with pytest.raises(linview.StateError):
        linview.compile(OLS, name="ols").load(X=np.eye(3), Y=np.ones((3, 1)), reuse=bad)


def test_explain_against_a_checkpoint_lists_reuse_before_anything_runs(tmp_path, capsys,
                                                                        ols_views):
    from linview.app.cli import main

    ols_views.save(tmp_path / "state.npz")
    (tmp_path / "ed.m").write_text(OLS_R)
    assert main(["explain", str(tmp_path / "ed.m"), "--against", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert rows["beta_inv"].endswith("reused") and rows["beta"].endswith("reused")
    assert "recomputed (~" in rows["yhat"] and "recomputed (~" in rows["r"]
    assert "predicted: ~" in out
    # what it predicted is what a restore does
    views = linview.restore(tmp_path / "state.npz", program=linview.compile(OLS_R, name="ols"))
    assert sorted(views.reuse_report.recomputed) == sorted(
        n for n, line in rows.items() if "recomputed (~" in line)
    assert main(["explain", str(tmp_path / "ed.m"), "--against",
                 str(tmp_path / "missing.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_run_store_shares_views_between_programs(tmp_path, capsys):
    from linview.app.cli import main

    rng = np.random.default_rng(5)
    np.save(tmp_path / "X.npy", rng.standard_normal((30, 6)))
    np.save(tmp_path / "Y.npy", rng.standard_normal((30, 1)))
    (tmp_path / "u.jsonl").write_text('{"input": "Y", "row": 2, "add": [0.5]}\n')
    (tmp_path / "ols.m").write_text(OLS)
    (tmp_path / "ed.m").write_text(OLS_R)
    args = ["--input", f"X={tmp_path / 'X.npy'}", "--input", f"Y={tmp_path / 'Y.npy'}",
            "--updates", str(tmp_path / "u.jsonl"), "--store", str(tmp_path / "store")]
    assert main(["run", str(tmp_path / "ols.m"), *args]) == 0
    assert "reused: none" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "ed.m"), *args]) == 0
    err = capsys.readouterr().err
    assert "reused: beta_inv, beta_p1, beta" in err and "recomputed: yhat" in err


def test_early_cutoff_keeps_what_reads_a_recomputed_but_equal_view():
    """``A + A`` and ``2 * A`` differ as definitions but not in content (doubling is
    exact): the edited statement is recomputed, what reads it is reused."""
    before = ("%#linview input A(n,n) B(n,n)\n%#linview dynamic A B\n"
              "s0 = A + A;\ns1 = s0 * B;\n%#linview output s1\n%#linview output s0\n")
    after = before.replace("s0 = A + A;", "s0 = 2 * A;")
    rng = np.random.default_rng(2)
    old = linview.compile(before, name="p").load(A=rng.standard_normal((N, N)),
                                                B=rng.standard_normal((N, N)))
    new = linview.compile(after, name="p")
    assert keys.structural(new.plan.program)["s0"] != keys.structural(
        linview.compile(before, name="p").plan.program)["s0"]
    views = new.load(A=old["A"], B=old["B"], reuse=old)
    assert list(views.reuse_report.recomputed) == ["s0"]
    assert views.reuse_report.reused == ["s1"]


def test_views_of_another_kind_offer_nothing():
    """Solve views have no keys yet: a load that offers them reuses nothing (and says so),
    it does not fail."""
    rng = np.random.default_rng(6)
    solve = ("function r = f(M, b)\n  %#linview sparse M\n  r = (eye(rows(M)) - 0.5 * M) \\ b;"
             "\nend\n")
    import scipy.sparse as sps

    M = sps.random(20, 20, density=0.1, random_state=1, format="csr") * 0.1
    old = linview.compile(solve, name="f").load(M=M, b=rng.standard_normal((20, 1)))
    prog = linview.compile(OLS, name="ols")
    views = prog.load(X=rng.standard_normal((30, 6)), Y=rng.standard_normal((30, 1)),
                      reuse=old)
    assert views.reuse_report.reused == []


@pytest.mark.parametrize("edited", [False, True])
def test_a_restored_inverse_is_probed_as_strictly_as_the_saved_one(tmp_path, edited):
    """The probe state is saved with the views: an inverse whose argument is not kept
    (OLS's ``X'X``) is probed at the first update after ``restore()`` (the same program,
    or an edited one that reuses it), and an error in it is caught there exactly as in the
    module that saved it (without its probe vectors it was not probed until the next
    re-evaluation)."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((40, 12)), rng.standard_normal((40, 1))
    prog = linview.compile(OLS, name="ols")
    views = prog.load(X=X, Y=Y)
    views.update("X", np.eye(40)[2], 0.1 * rng.standard_normal(12))
    views.save(tmp_path / "good.npz")
    views._views["beta_inv"][0, 0] += 1e-5  # a wrong maintained inverse
    views.save(tmp_path / "bad.npz")
    target = linview.compile(OLS_R, name="ols") if edited else prog
    u, v = np.eye(40)[4], 0.1 * np.ones(12)
    for name, fails in (("good", 0), ("bad", 1)):
        got = linview.restore(tmp_path / f"{name}.npz", program=target)
        got.update("X", u, v)
        assert "beta_inv" in got.probes
        assert got.stats["probe_failures"] == fails
        assert got.verify() < 1e-9  # the failed probe re-evaluated the chain
    views.update("X", u, v)  # the module that saved it catches it the same way
    assert views.stats["probe_failures"] == 1


def test_a_tampered_probe_state_is_refused(tmp_path, ols_views):
    ols_views.save(tmp_path / "s.npz")

    def tamper(doc, parts):
        assert any(n.startswith("side:state:beta_inv") for n in parts)
        doc["probe"]["arg_of"] = {"beta_inv": "beta_inv", "nowhere": "X"}

    _rewrite(tmp_path / "s.npz", tmp_path / "t.npz", tamper)
    with pytest.raises(linview.StateError, match="probe state does not fit"):
        linview.restore(tmp_path / "t.npz")


def test_ridge_takes_the_gram_matrix_ols_stored_inside_its_own_argument(tmp_path):
    """Ridge's inverse argument ``X'*X + λI`` is a view of its own, but ``X'*X`` inside it
    has the key of OLS's (stored) ``X'*X``: ridge computes only the sum, the inverse and
    what reads it, and equals a fresh ridge load; a ridge with another X takes nothing."""
    rng = np.random.default_rng(9)
    X, Y = rng.standard_normal((30, 8)), rng.standard_normal((30, 1))
    store = tmp_path / "store"
    linview.compile(OLS, name="ols").load(X=X, Y=Y, store=store)
    ridge = linview.compile(RIDGE, name="ridge")
    views = ridge.load(X=X, Y=Y, store=store)
    assert views.reuse_report.reused == ["b_p1"]
    assert views.reuse_report.partly == {"b_arg": 1}
    np.testing.assert_allclose(views["b"], ridge.load(X=X, Y=Y)["b"], rtol=1e-12, atol=1e-14)
    views.update("X", np.eye(30)[2], 0.1 * np.ones(8))
    assert views.verify() < 1e-9
    other = ridge.load(X=X + 1e-9, Y=Y, store=store)
    assert other.reuse_report.partly == {} and other.reuse_report.reused == []


def test_ridge_edit_of_ols_that_keeps_its_gram_matrix_reuses_it(ols_views):
    """An OLS that keeps ``G = X'*X`` (a statement and an output: maintained) offers it
    live: the ridge edit takes it inside ``X'*X + λI`` and ``X'*Y`` whole, and equals a
    fresh ridge load after the updates."""
    olsg = "function [beta, G] = ols(X, Y)\n  G = X' * X;\n  beta = G \\ (X' * Y);\nend\n"
    rng = np.random.default_rng(10)
    old = linview.compile(olsg, name="ols").load(X=ols_views["X"], Y=ols_views["Y"])
    for i in range(3):
        old.update("X", np.eye(40)[i], 0.1 * rng.standard_normal(12))
    ridge = linview.compile(RIDGE, name="ridge")
    views = ridge.load(X=old["X"], Y=old["Y"], reuse=old)
    assert views.reuse_report.reused == ["b_p1"] and views.reuse_report.partly == {"b_arg": 1}
    np.testing.assert_allclose(views["b"], ridge.load(X=old["X"], Y=old["Y"])["b"],
                               rtol=1e-10, atol=1e-12)


def _rewrite(src, dst, change) -> None:
    """Copy state file ``src`` to ``dst`` with ``change(doc, parts)`` applied to its
    manifest (a dict) and members ({name: bytes})."""
    import io
    import json
    import zipfile

    with zipfile.ZipFile(src) as z:
        doc = json.loads(str(np.load(z.open("__manifest__.npy"))))
        parts = {n: z.read(n) for n in z.namelist()}
    change(doc, parts)
    buf = io.BytesIO()
    np.save(buf, np.array(json.dumps(doc)))
    parts["__manifest__.npy"] = buf.getvalue()
    with zipfile.ZipFile(dst, "w") as z:
        for n, data in parts.items():
            z.writestr(n, data)


def test_older_checksums_are_still_read_and_corrupt_probe_vectors_refused(tmp_path,
                                                                         ols_views):
    """A file with the C-order checksums of earlier versions restores (and reuses by
    key); a probe vector that does not match its checksum is refused, never used."""
    from linview import statefile

    ols_views.save(tmp_path / "s.npz")
    meta, arrays = statefile.read(tmp_path / "s.npz")
    assert all(h.startswith("cm:") for h in meta["hashes"].values())

    def legacy(doc, parts):
        doc["hashes"] = {f"view:{k}": statefile._c_digest(a) for k, a in arrays.items()}

    _rewrite(tmp_path / "s.npz", tmp_path / "old.npz", legacy)
    views = linview.restore(tmp_path / "old.npz", program=linview.compile(OLS_R, name="ols"))
    assert sorted(views.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
    np.testing.assert_allclose(views["beta"], ols_views["beta"], rtol=1e-15)

    def flip(doc, parts):
        name = next(n for n in parts if n.startswith("side:state:"))
        data = bytearray(parts[name])
        data[-3] ^= 0x40
        parts[name] = bytes(data)

    _rewrite(tmp_path / "s.npz", tmp_path / "flipped.npz", flip)
    with pytest.raises(linview.StateError, match="does not match its checksum"):
        linview.restore(tmp_path / "flipped.npz")


def test_a_state_saved_right_after_load_restores_its_seeded_probe(tmp_path):
    """Saved before any update, the only probe state is the vector seeded for ``X'X``
    (not kept, not yet tied to its inverse): it is restored (same program or edited) and
    the first update is probed with it."""
    rng = np.random.default_rng(15)
    prog = linview.compile(OLS, name="ols")
    views = prog.load(X=rng.standard_normal((40, 12)), Y=rng.standard_normal((40, 1)))
    views.save(tmp_path / "s.npz")
    for target in (prog, linview.compile(OLS_R, name="ols")):
        got = linview.restore(tmp_path / "s.npz", program=target)
        got.update("X", np.eye(40)[1], 0.1 * np.ones(12))
        assert "beta_inv" in got.probes and got.stats["probe_failures"] == 0
