"""The store folder (``load(store=...)``): which entries a load writes, writing them while
the caller goes on without ever storing a view changed after its key was bound, and
products reused inside a recomputed view evaluated as the module evaluates them."""

from __future__ import annotations

import time

import numpy as np
import pytest

import linview
from linview.backends.numpy import store as _store

OLS = "function beta = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\nend\n"
RIDGE = "function b = ridge(X, Y)\n  b = (X' * X + 0.5 * eye(columns(X))) \\ (X' * Y);\nend\n"


def data(seed: int = 11):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((40, 9)), rng.standard_normal((40, 1))


def entries(store) -> set[str]:
    return {p.stem for p in store.rglob("*.npz")}


def test_a_load_stores_what_is_worth_reading_back(tmp_path):
    """OLS stores ``X'*X`` (a product, evaluated only to be inverted), its inverse, ``X'*Y``
    and beta; ridge through that store takes ``X'*X`` and computes ``X'*X + λI`` from it by
    one pass: that sum is not stored (reading it back costs as much), its inverse is."""
    X, Y = data()
    store = tmp_path / "store"
    ols = linview.compile(OLS, name="ols").load(X=X, Y=Y, store=store)
    ols.wait_for_store()
    k = ols.reuse_report.keys
    assert entries(store) == {k["beta_arg"], k["beta_inv"], k["beta_p1"], k["beta"]}
    ridge = linview.compile(RIDGE, name="ridge").load(X=X, Y=Y, store=store)
    ridge.wait_for_store()
    r = ridge.reuse_report.keys
    assert ridge.reuse_report.partly == {"b_arg": 1}
    assert entries(store) == {k["beta_arg"], k["beta_inv"], k["beta_p1"], k["beta"],
                              r["b_inv"], r["b"]}
    # a ridge through an empty store computes X'*X + λI by a product: stored
    alone = linview.compile(RIDGE, name="ridge").load(X=X, Y=Y, store=tmp_path / "other")
    alone.wait_for_store()
    assert alone.reuse_report.keys["b_arg"] in entries(tmp_path / "other")


def test_the_sum_around_a_reused_product_is_the_modules_own_arithmetic(tmp_path):
    """``X'*X + λI`` computed around OLS's stored ``X'*X`` by the generated module's code
    gives the very bits a fresh ridge load computes (the same expression, the same
    kernels), and so does its inverse and what reads it."""
    X, Y = data(12)
    store = tmp_path / "store"
    linview.compile(OLS, name="ols").load(X=X, Y=Y, store=store).wait_for_store()
    ridge = linview.compile(RIDGE, name="ridge")
    got, fresh = ridge.load(X=X, Y=Y, store=store), ridge.load(X=X, Y=Y)
    assert got.reuse_report.partly == {"b_arg": 1}
    assert np.array_equal(got["b"], fresh["b"])
    assert np.array_equal(got._views["b_inv"], fresh._views["b_inv"])


def test_an_update_right_after_the_load_waits_for_its_store_entries(tmp_path, monkeypatch):
    """The entries are written on a thread of their own; an update that follows the load
    at once waits for them, so the store holds the views as loaded (their keys' values),
    never the updated ones; a load in the same process waits for an entry being written."""
    X, Y = data(13)
    slow = _store.statefile.write

    def write(*a, **k):  # a slow disk: the update would come first without the wait
        time.sleep(0.3)
        slow(*a, **k)

    monkeypatch.setattr(_store.statefile, "write", write)
    store = tmp_path / "store"
    ols = linview.compile(OLS, name="ols")
    views = ols.load(X=X, Y=Y, store=store)
    as_loaded = views._views["beta_inv"].copy()
    views.update("X", np.eye(40)[3], np.ones(9))
    key = views.reuse_report.keys["beta_inv"]
    assert np.array_equal(_store.read_entry(store, key), as_loaded)
    assert views.verify() < 1e-9
    again = ols.load(X=X, Y=Y, store=tmp_path / "s2")  # another store, read at once:
    second = ols.load(X=X, Y=Y, store=tmp_path / "s2")  # waits for the first's writes
    assert sorted(second.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
    again.wait_for_store()


def test_a_failed_store_write_is_a_warning_not_an_error(tmp_path, monkeypatch):
    X, Y = data(14)

    def broken(*a, **k):
        raise OSError("no space left on device")

    monkeypatch.setattr(_store.statefile, "write", broken)
    views = linview.compile(OLS, name="ols").load(X=X, Y=Y, store=tmp_path / "store")
    with pytest.warns(UserWarning, match="not written .*no space left"):
        views.update("Y", np.eye(40)[0], np.ones(1))
    assert views.verify() < 1e-9


OLS_R = ("function [beta, r] = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\n"
         "  yhat = X * beta;\n  r = Y - yhat;\nend\n")


def test_take_over_keeps_the_old_arrays_and_closes_the_old_views():
    """``load(reuse=old, take_over=True)`` keeps old's inverse and input X without a copy
    (the given X is compared with old's, equal, and old's is kept), equals a fresh load
    of the edited program, stays correct under updates; old refuses every use after."""
    X, Y = data(15)
    old = linview.compile(OLS, name="ols").load(X=X, Y=Y)
    for i in range(3):
        old.update("X", np.eye(40)[i], 0.1 * np.ones(9))
    Xc, Yc = old["X"], old["Y"]
    inv, x = old._views["beta_inv"], old._views["X"]
    edited = linview.compile(OLS_R, name="ols")
    new = edited.load(X=Xc, Y=Yc, reuse=old, take_over=True)
    assert new._views["beta_inv"] is inv and new._views["X"] is x
    assert sorted(new.reuse_report.reused) == ["beta", "beta_inv", "beta_p1"]
    fresh = edited.load(X=Xc, Y=Yc)
    for k in ("beta", "r"):
        np.testing.assert_allclose(new[k], fresh[k], rtol=0, atol=1e-12)
    for use in (lambda: old["beta"], lambda: old.update("Y", np.eye(40)[0], np.ones(1)),
                lambda: old.save("never.npz"), lambda: old.verify(), lambda: "beta" in old):
        with pytest.raises(linview.StateError, match="taken over by another load"):
            use()
    new.update("X", np.eye(40)[5], np.ones(9))
    assert new.verify() < 1e-9
    # without take_over the old views stay the old module's: copies
    other = linview.compile(OLS, name="ols").load(X=X, Y=Y)
    kept = edited.load(X=other["X"], Y=other["Y"], reuse=other)
    assert not np.shares_memory(kept._views["beta_inv"], other._views["beta_inv"])
    assert not np.shares_memory(kept._views["X"], other._views["X"])
    other.update("Y", np.eye(40)[0], np.ones(1))
    assert other.verify() < 1e-9 and kept.verify() < 1e-9


def test_take_over_with_another_input_copies_it(tmp_path):
    """An input that differs from the old module's is the new load's own copy (and the
    views that read it are recomputed)."""
    X, Y = data(16)
    old = linview.compile(OLS, name="ols").load(X=X, Y=Y)
    X2 = X.copy()
    X2[0, 0] += 1.0
    new = linview.compile(OLS_R, name="ols").load(X=X2, Y=Y, reuse=old, take_over=True)
    assert not np.shares_memory(new._views["X"], X2)
    assert new.reuse_report.reused == []  # XᵀX, XᵀY: all read X
    np.testing.assert_allclose(new["beta"], np.linalg.lstsq(X2, Y, rcond=None)[0], atol=1e-10)


def test_restore_keeps_the_inputs_it_read_without_a_copy(tmp_path, monkeypatch):
    """``restore(path, program=edited)`` keeps the arrays it read from the file: the
    inputs too (no defensive copy: nobody else holds them)."""
    from linview import statefile

    X, Y = data(17)
    views = linview.compile(OLS, name="ols").load(X=X, Y=Y)
    views.update("X", np.eye(40)[1], np.ones(9))
    views.save(tmp_path / "s.npz")
    read, seen = statefile.read, {}

    def spy(path):
        meta, arrays = read(path)
        seen.update(arrays)
        return meta, arrays

    monkeypatch.setattr(statefile, "read", spy)
    got = linview.restore(tmp_path / "s.npz", program=linview.compile(OLS_R, name="ols"))
    assert got._views["X"] is seen["X"] and got._views["beta_inv"] is seen["beta_inv"]
    got.update("X", np.eye(40)[2], np.ones(9))
    assert got.verify() < 1e-9


OLS_G = "function [beta, G] = ols(X, Y)\n  G = X' * X;\n  beta = G \\ (X' * Y);\nend\n"


def _predicted(capsys, prog_text: str, tmp_path, name: str) -> dict[str, str]:
    from linview.app.cli import main

    (tmp_path / f"{name}.m").write_text(prog_text)
    assert main(["explain", str(tmp_path / f"{name}.m"), "--against",
                 str(tmp_path / "state.npz")]) == 0
    out = capsys.readouterr().out
    return {line.split()[0]: line for line in out.splitlines()
            if line.startswith("  ") and not line.startswith("  dropped")}


def _matches(rows: dict[str, str], report) -> None:
    """Every row of ``explain --against`` says what the load did with that view."""
    for name, row in rows.items():
        if row.endswith("reused") and "recomputed" not in row:
            assert name in report.reused, row
        elif "recomputed (~" in row:
            assert name in report.recomputed, row
            parts = int(row.split(", ")[1].split()[0]) if "sub-expression" in row else 0
            assert report.partly.get(name, 0) == parts, row
        else:
            assert "not computed" in row, row
            assert name not in report.reused and name not in report.recomputed, row


@pytest.mark.parametrize("saved, edited, partly", [
    (OLS_G, RIDGE, {"b_arg": 1}),  # X'X inside X'X + λI, from the kept G
    (OLS, RIDGE, {}),              # OLS kept no X'X: ridge computes it
    (OLS, OLS_R, {}),              # the inverse's argument is not computed at all
])
def test_explain_against_predicts_the_sub_expressions_a_restore_reuses(
        tmp_path, capsys, saved, edited, partly):
    """``explain --against`` lists, before anything runs, exactly what ``restore(path,
    program=edited)`` then reuses, recomputes, takes inside a recomputed view, or leaves
    uncomputed (a view evaluated only to be inverted, when nothing recomputed reads it)."""
    X, Y = data(18)
    views = linview.compile(saved, name="ols").load(X=X, Y=Y)
    views.update("X", np.eye(40)[4], 0.1 * np.ones(9))
    views.save(tmp_path / "state.npz")
    rows = _predicted(capsys, edited, tmp_path, "edited")
    got = linview.restore(tmp_path / "state.npz", program=linview.compile(edited, name="e"))
    assert got.reuse_report.partly == partly
    assert set(rows) == {st.name for st in got.KEY_PROGRAM.statements}
    _matches(rows, got.reuse_report)
