"""``linview explain PROG.m --against STATE``: what resuming a state file or a checkpoint
with this (edited) program would reuse and recompute, before anything runs.

Each view's key (:mod:`linview.compiler.keys`) is bound to the saved inputs' content and
looked up among the saved views' keys; a view that is not found is recomputed, priced by
the cost model in seconds.  Early cutoff (a recomputed view equal to a saved one) may
reuse more than this lists; nothing listed as reused is recomputed.
"""

from __future__ import annotations

from pathlib import Path

from linview import statefile
from linview.compiler import keys
from linview.compiler.calibrate import rates
from linview.compiler.optimize import Sizes
from linview.compiler.timemodel import Roof, expr_seconds
from linview.errors import StateError


def state_path(path) -> Path:
    """A state file, or the ``state.npz`` of a ``linview run`` checkpoint folder."""
    p = Path(path)
    return p / "state.npz" if p.is_dir() else p


def listing(compiled, against) -> str:
    """The text ``explain --against`` prints for ``compiled`` and a saved state."""
    path = state_path(against)
    meta, arrays = statefile.read(path)
    saved = meta.get("keys")
    if not isinstance(saved, dict):
        raise StateError(f"{path} holds no view keys (written by an older linview): "
                         "everything would be recomputed")
    program = compiled.program
    missing = [d.name for d in program.inputs if d.name not in arrays]
    if missing:
        raise StateError(f"{path} does not hold the inputs {', '.join(missing)} of "
                         f"{program.name}: it cannot be resumed with this program")
    shaped = compiled if hasattr(compiled, "plan") else compiled.specialize(
        **{d.name: arrays[d.name].shape for d in program.inputs})  # sizes from the data
    program = shaped.program  # as load() and restore() run it
    sizes = Sizes(bindings={k: v for k, v in (meta.get("dims") or {}).items()})
    tokens = {d.name: keys.input_token(statefile.content_digest(arrays[d.name]), d.dynamic)
              for d in program.inputs}
    ks = keys.bind(program, tokens)
    have = set(saved.values())
    transient = set(getattr(shaped.plan, "transient", ()))
    r = rates()
    roof = Roof(r.gemm_flops, r.stream_bytes, r.thin_bytes, r.call_s)
    width = max((len(st.name) for st in program.statements), default=4)
    lines = [f"against {path} (saved by {meta.get('program')!r}, "
             f"{meta.get('updates', 0)} updates):"]
    total = 0.0
    for st in program.statements:
        key = keys.short(ks[st.name])
        if ks[st.name] in have and st.name not in transient:
            lines.append(f"  {st.name:<{width}}  {key}  reused")
        elif st.name in transient:
            lines.append(f"  {st.name:<{width}}  {key}  not kept: computed only if a "
                         "recomputed view reads it")
        else:
            s = expr_seconds(st.expr, sizes.value, roof, set(), frozenset())
            total += s
            lines.append(f"  {st.name:<{width}}  {key}  recomputed (~{_fmt(s)})")
    gone = sorted(set(saved) - {d.name for d in program.inputs}
                  - {n for n, k in saved.items() if k in set(ks.values())})
    if gone:
        lines.append(f"  dropped (no longer defined): {', '.join(gone)}")
    lines.append(f"predicted: ~{_fmt(total)} to recompute (cost model; early cutoff may "
                 "reuse more)")
    return "\n".join(lines)


def _fmt(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"
