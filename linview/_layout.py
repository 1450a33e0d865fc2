"""Make ``linview.backends`` and ``linview.grammar`` importable from a plain source checkout.

In the repository, ``backends/`` and ``grammar/`` are top-level folders; a wheel or an
editable install maps them into the package (``[tool.setuptools.package-dir]`` in
pyproject.toml).  When linview is imported straight from the repository root with nothing
installed, this module registers the two folders as the subpackages they become on install,
so ``import linview.backends.numpy`` works the same in all three cases.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def register_source_subpackages() -> None:
    here = Path(__file__).resolve().parent
    for sub in ("backends", "grammar"):
        full = f"linview.{sub}"
        if full in sys.modules or (here / sub).is_dir():
            continue
        try:
            if importlib.util.find_spec(full) is not None:
                continue  # provided by an install (wheel or editable finder)
        except (ImportError, ValueError):
            pass
        folder = here.parent / sub
        init = folder / "__init__.py"
        if not init.is_file():
            continue
        spec = importlib.util.spec_from_file_location(
            full, init, submodule_search_locations=[str(folder)])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
