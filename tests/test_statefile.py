"""State files are data: a manifest, arrays and checksums; restore never runs stored code."""

import io
import json
import zipfile

import numpy as np
import pytest

import linview
from linview import statefile

OLS = "function beta = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\nend\n"


def _views(tmp_path):
    prog = linview.compile(OLS, name="ols", dims={"cols_X": 5}, model="exp")
    rng = np.random.default_rng(7)
    v = prog.load(X=rng.standard_normal((30, 5)), Y=rng.standard_normal((30, 2)))
    v.update("X", rng.standard_normal(30) * 0.1, rng.standard_normal(5) * 0.1)
    path = tmp_path / "state.npz"
    v.save(path, extra={"offset": 3})
    return prog, v, path


def test_restore_compiles_the_stored_source_and_round_trips(tmp_path):
    prog, v, path = _views(tmp_path)
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        doc = json.loads(str(np.load(io.BytesIO(z.read("__manifest__.npy")))))
    assert "__module__.npy" not in names and "__manifest__.npy" in names
    assert doc["source"] == OLS and doc["options"]["dims"] == {"cols_X": 5}
    assert doc["options"]["model"] == "exp" and doc["version"] == statefile.FORMAT_VERSION
    assert set(doc["hashes"]) == {f"view:{k}" for k in v._views}
    r = linview.restore(path)
    assert r.SOURCE_HASH == v.SOURCE_HASH and r.updates == 1
    assert r.saved_meta["extra"] == {"offset": 3}
    for k in v._views:
        np.testing.assert_array_equal(r._views[k], v._views[k])
    r.update("Y", np.ones(30), np.ones(2))
    assert r.verify() < 1e-10


def _plant(tmp_path, marker, **manifest_changes):
    """A state file written with a manipulated manifest (hashes still valid)."""
    prog, v, _ = _views(tmp_path)
    manifest = {"program": v.PROGRAM, "hash": v.SOURCE_HASH, "updates": 1,
                "dims": dict(v.dims), "extra": {}, **v.PROGRAM_INFO, **manifest_changes}
    path = tmp_path / "planted.npz"
    statefile.write(path, v._views, manifest)
    return path


def test_planted_code_in_a_state_file_does_not_run(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\n"
    # 1. a manifest field holding a Python module: ignored, the state restores
    path = _plant(tmp_path, marker, module=f"import builtins\n{code}")
    r = linview.restore(path)
    assert r.updates == 1
    # 2. Python code in place of the .m source: it does not compile as linview
    path = _plant(tmp_path, marker, source=code)
    with pytest.raises(linview.StateError, match="does not compile"):
        linview.restore(path)
    # 3. code smuggled into a name that reaches the generated module's text
    for field in ("filename", "name"):
        path = _plant(tmp_path, marker, **{field: f'x"""\n{code}"""'})
        with pytest.raises(linview.StateError, match="malformed"):
            linview.restore(path)
    # 4. the old format, which stored the generated module: refused, never imported
    _, v, _ = _views(tmp_path)
    old = tmp_path / "old.npz"
    np.savez(old, __meta__=np.array(repr({"program": "ols", "hash": v.SOURCE_HASH,
                                          "updates": 1, "dims": dict(v.dims)})),
             __module__=np.array(code), **{f"view:{k}": a for k, a in v._views.items()})
    with pytest.raises(linview.StateError, match="older linview"):
        linview.restore(old)
    assert not marker.exists()


def test_foreign_version_and_program_are_refused(tmp_path):
    prog, v, path = _views(tmp_path)
    other = linview.compile("function C = p(A)\n C = A * A;\nend\n", name="p")
    with pytest.raises(linview.StateError, match="written by program 'ols'"):
        linview.restore(path, program=other)
    newer = _plant(tmp_path, None)
    data = newer.read_bytes()
    with zipfile.ZipFile(newer) as z:
        doc = json.loads(str(np.load(io.BytesIO(z.read("__manifest__.npy")))))
    doc["version"] = 99
    arrays = {n[:-4]: np.load(io.BytesIO(zipfile.ZipFile(io.BytesIO(data)).read(n)))
              for n in zipfile.ZipFile(newer).namelist()}
    arrays["__manifest__"] = np.array(json.dumps(doc))
    np.savez(newer, **arrays)
    with pytest.raises(linview.StateError, match="format 99"):
        linview.restore(newer)
    with pytest.raises(linview.StateError, match="does not exist"):
        linview.restore(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(linview.StateError, match="truncated or corrupt"):
        linview.restore(tmp_path / "text.npz")


def test_truncated_and_flipped_state_files_give_state_error(tmp_path):
    prog, v, path = _views(tmp_path)
    data = path.read_bytes()
    bad = tmp_path / "bad.npz"
    for cut in (0, 10, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1):
        bad.write_bytes(data[:cut])
        with pytest.raises(linview.StateError):
            linview.restore(bad)
    rng = np.random.default_rng(0)
    refused = 0
    for pos in rng.choice(len(data), size=60, replace=False):
        flipped = bytearray(data)
        flipped[pos] ^= 0x5A
        bad.write_bytes(bytes(flipped))
        try:
            r = linview.restore(bad)
        except linview.StateError:
            refused += 1
            continue
        # a byte the archive does not read back (zip padding, timestamps): same state
        for k in v._views:
            np.testing.assert_array_equal(r._views[k], v._views[k])
    assert refused > 30
