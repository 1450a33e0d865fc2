"""``linview explain PROG.m --against STATE``: what resuming a state file or a checkpoint
with this (edited) program would reuse and recompute, before anything runs.

Each view's key (:mod:`linview.compiler.keys`) is bound to the saved inputs' content and
looked up among the saved views' keys as a reusing load looks them up (:func:`predict`),
products and sums inside a recomputed view too; a view that is not found is recomputed,
priced by the cost model in seconds for what it does not take.  Early cutoff (a
recomputed view equal to a saved one) may reuse more than this lists; nothing listed as
reused is recomputed.
"""

from __future__ import annotations

from pathlib import Path

from linview import statefile
from linview.compiler import ir, keys
from linview.compiler.calibrate import rates
from linview.compiler.ir import Op
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
    transient = set(getattr(shaped.plan, "transient", ()))
    r = rates()
    roof = Roof(r.gemm_flops, r.stream_bytes, r.thin_bytes, r.call_s)
    width = max((len(st.name) for st in program.statements), default=4)
    lines = [f"against {path} (saved by {meta.get('program')!r}, "
             f"{meta.get('updates', 0)} updates):"]
    status = predict(program, ks, transient, {k: arrays[n].shape for n, k in saved.items()
                                             if n in arrays}, sizes, roof)
    total = 0.0
    for st in program.statements:
        key, what = keys.short(ks[st.name]), status.get(st.name)
        if what is None:
            lines.append(f"  {st.name:<{width}}  {key}  not kept, not computed: no "
                         "recomputed view reads it")
        elif what == "reused":
            lines.append(f"  {st.name:<{width}}  {key}  reused")
        else:
            total += what[0]
            part = f", {what[1]} sub-expression{'s' * (what[1] > 1)} reused" * (what[1] > 0)
            lines.append(f"  {st.name:<{width}}  {key}  recomputed (~{_fmt(what[0])}{part})")
    gone = sorted(set(saved) - {d.name for d in program.inputs}
                  - {n for n, k in saved.items() if k in set(ks.values())})
    if gone:
        lines.append(f"  dropped (no longer defined): {', '.join(gone)}")
    lines.append(f"predicted: ~{_fmt(total)} to recompute (cost model; early cutoff may "
                 "reuse more)")
    return "\n".join(lines)


def predict(program, ks: dict, transient: set, shapes: dict, sizes, roof) -> dict:
    """``{view: "reused" | (predicted seconds, sub-expressions reused)}`` as a load that
    reuses saved views by key (``backends/numpy/reuse.py``) goes: a kept view on offer is
    reused, any other computed; a view evaluated only to be inverted (``transient``) is
    taken or computed only when a computed view reads it (absent otherwise); a computed
    view takes the largest products and sums inside it that are on offer
    (:func:`keys.largest_parts`) and is priced for the rest."""
    defs = {st.name: st.expr for st in program.statements}
    status: dict[str, object] = {}
    pending: set[str] = set()

    def shape(n) -> tuple[int, ...]:
        return tuple(int(sizes.value(e)) for e in n.shape)

    def compute(name: str) -> None:
        for n in defs[name].walk():  # transient views it reads: taken, else computed
            if n.op is Op.VIEW and n.attr in pending:
                pending.discard(n.attr)
                if shapes.get(ks[n.attr]) == shape(n):
                    status[n.attr] = "reused"
                else:
                    compute(n.attr)
        parts = keys.largest_parts(defs[name], ks, program,
                                   lambda n, k: shapes.get(k) == shape(n))
        around = ir.substitute(defs[name], {id(p): ir.view(f"part{i}", p.shape)
                                            for i, p in enumerate(parts)})
        status[name] = (expr_seconds(around, sizes.value, roof, set(), frozenset()),
                        len(parts))

    for st in program.statements:
        if st.name in transient:
            pending.add(st.name)
        elif shapes.get(ks[st.name]) == shape(st.expr):
            status[st.name] = "reused"
        else:
            compute(st.name)
    return status


def _fmt(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"
