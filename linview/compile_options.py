"""Compile options and program facts that :mod:`linview.api` reads and stores: the
``model=`` and ``strategy=`` options, what a state file stores to compile a program again,
the names of sources and programs."""

from __future__ import annotations

import re
from pathlib import Path

from linview.compiler.delta import STRATEGIES, Strategy, TriggerOptions
from linview.compiler.lower import Options
from linview.errors import CompileError


def parse_model(model: str) -> Options:
    """``exp``, ``linear``, ``written``, ``skip=S`` (or ``skip`` for s = 4)."""
    if model.startswith("skip"):
        _, _, s = model.partition("=")
        try:
            skip = int(s) if s else 4
        except ValueError:
            skip = 0
        if skip < 2:
            raise CompileError(f"bad skip size in model '{model}'",
                               hint="write e.g. --model skip=4 (s >= 2)")
        return Options(model="skip", skip=skip)
    if model not in ("exp", "linear", "written"):
        raise CompileError(f"unknown iterative model '{model}'",
                           hint="valid models: exp, linear, skip=S, written, auto")
    return Options(model=model)


def parse_strategy(strategy) -> TriggerOptions:
    """``None`` (cost-based), one strategy name for every view, or ``{view: name}``."""
    def one(s) -> Strategy:
        if isinstance(s, Strategy):
            return s
        if s not in STRATEGIES:
            raise CompileError(f"unknown strategy '{s}'",
                               hint="valid strategies: " + ", ".join(STRATEGIES))
        return Strategy(s)

    if strategy is None or strategy == "auto":
        return TriggerOptions()
    if isinstance(strategy, dict):
        return TriggerOptions(strategies={k: one(v) for k, v in strategy.items()})
    return TriggerOptions(default=one(strategy))


def plain_strategy(strategy):
    """The strategy option as JSON (strings), for state files."""
    if isinstance(strategy, dict):
        return {k: getattr(v, "value", v) for k, v in strategy.items()}
    return getattr(strategy, "value", strategy)


def program_info(source: str, name: str, filename: str, dims: dict, model: str, rank: int,
                  backend: str, strategy, shapes, least_squares: str = "auto") -> dict:
    """What a state file stores to recompile the program (:mod:`linview.statefile`)."""
    stored_name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).name).lstrip(".-") or "_"
    info = {"source": source, "name": name, "filename": stored_name,
            "options": {"dims": {k: int(v) for k, v in dims.items()}, "model": model,
                        "rank": int(rank), "backend": backend,
                        "strategy": plain_strategy(strategy)}}
    if shapes:  # a program specialised to its data's shapes (linview.specialize)
        info["options"]["shapes"] = [[str(n), int(r), int(c)] for n, r, c in shapes]
    if least_squares != "auto":  # chosen by the user, or by load() (lstsq.py)
        info["options"]["least_squares"] = least_squares
    return info


def module_ast_name(module_ast, filename: str) -> str:
    return getattr(module_ast, "name", None) or \
        filename.rsplit("/", 1)[-1].removesuffix(".m") or "script"


def open_inputs(module_ast) -> bool:
    """Whether some input's sizes are left to the data (no pragma gives them)."""
    given = {s.name for p in module_ast.pragmas if p.kind in ("dims", "input")
             for s in p.specs}
    given |= {n for p in module_ast.pragmas if p.kind == "scalar" for n in p.names}
    params = getattr(module_ast, "params", ())
    return any(p not in given for p in params)

def shown_path(p: Path) -> str:
    """How messages and generated modules name a source file: relative to the working
    directory when it is below it, else by its file name (never a machine's absolute path)."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return p.name
def decode_source(data: bytes) -> str:
    """The text of a ``.m`` file: UTF-8 with or without a byte-order mark, else Latin-1
    (Octave's traditional encoding), so that accented comments are accepted either way;
    a non-ASCII character outside a comment is then a parse error at its line and
    column."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")
