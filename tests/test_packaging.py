"""The wheel ships backends/ and grammar/ inside the linview package."""

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True)
    (whl,) = out.glob("linview-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "linview/backends/numpy/codegen.py" in names
    assert "linview/backends/spark/codegen.py" in names
    assert "linview/grammar/linview.lark" in names
    assert not any(n.startswith(("backends/", "grammar/", "tests/")) for n in names)
    # every module of the source tree is in the wheel (a package missing from pyproject's
    # list would be missing there)
    sources = [f"linview/{p.relative_to(ROOT / 'linview')}" for p in (ROOT / "linview").rglob(
        "*.py")] + [f"linview/backends/{p.relative_to(ROOT / 'backends')}"
                    for p in (ROOT / "backends").rglob("*.py")]
    assert sorted(set(sources) - set(names)) == []


def test_wheel_installs_and_imports_backends_outside_the_repo(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    target = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                             "['purelib'])"], capture_output=True, text=True,
                            check=True).stdout.strip()
    with zipfile.ZipFile(wheel) as z:  # what pip does for a pure wheel: unpack it
        z.extractall(target)
    # dependencies come from this test environment's site-packages (not its editable linview)
    deps = os.pathsep.join(site.getsitepackages())
    code = ("import linview, linview.backends.numpy, linview.grammar, pathlib;"
            "assert 'site-packages' in linview.__file__, linview.__file__;"
            "p = linview.compile('function y = f(A)\\n y = A*A;\\nend\\n');"
            "import numpy as np; v = p.load(A=np.eye(2)); v.update('A', np.ones(2), np.ones(2));"
            "print(v.verify() < 1e-12)")
    env = {**os.environ, "PYTHONPATH": deps}
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
