"""`tracejit.scan`: a loop over the leading (or a chosen) dimension that carries state, like JAX's `lax.scan`
and PyTorch's `torch._higher_order_ops.scan`.

    final_carry, ys = tracejit.scan(combine_fn, init, xs, dim=0, reverse=False, checkpoint=False)

`combine_fn(carry, x) -> (next_carry, y)` is called once per slice `x` of `xs` along `dim` (from the last
slice to the first with `reverse=True`); `carry` starts as `init`; the `y`s are stacked along `dim` in the
order of `xs` (with `reverse=True` too). `init`, `xs` and what `combine_fn` returns may be a tensor or a
(nested) tuple/list of tensors; the structure and the shapes of `next_carry` must match `init`'s.

Gradients flow through the carries, the `xs` and whatever `combine_fn` reads (module parameters), eagerly
and inside `@trace`. Eagerly the loop runs in Python, one call of `combine_fn` per step (define-by-run, like
every eager op). Inside `@trace`, `combine_fn` is traced once into a graph of its own and the loop is one `scan`
node of the program (ops/control.py): compiled once and run as a loop, its backward a reverse loop over what the
forward loop kept of each step, so a trace of a 1000-step sequence costs what a trace of one step does. There `combine_fn` must be a
pure function of its carry, its x and what it reads: an in-place update of a tensor from outside is an error.
`as_op=True` runs that one op eagerly too: combine_fn is traced once, each step runs its graph, and autograd
records one ScanBackward0 node. What the loop keeps of each step for its backward: the residuals its derivative
reads (values PyTorch's autograd would save, less the elementwise ones, recomputed from the others), or
with `checkpoint=True` the carries alone, each backward step then recomputing its forward step (less memory, more
work); the Python loop keeps every intermediate of every step.
"""
from ._state import STATE
from ._tensor import Tensor


def _leaves(tree, out):
    if isinstance(tree, Tensor):
        out.append(tree)
        return None
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(_leaves(t, out) for t in tree))
    raise TypeError(f"scan: expected a tensor or a (nested) tuple/list of tensors, got {type(tree).__name__}")


def _build(spec, it):
    if spec is None:
        return next(it)
    kind, parts = spec
    return kind(_build(p, it) for p in parts)


def scan(combine_fn, init, xs, *, dim=0, reverse=False, as_op=False, checkpoint=False):
    """Run `combine_fn(carry, x) -> (next_carry, y)` over the slices of `xs` along `dim`; returns
    `(final_carry, ys)` with the `y`s stacked along `dim`. See the module docstring. `as_op=True` runs it as
    the one `scan` op eagerly too (combine_fn traced once, one ScanBackward0 node); `checkpoint=True` makes the
    op keep only the carries of each step for its backward, which recomputes the steps."""
    from .ops.shape_ops import stack
    init_leaves, xs_leaves = [], []
    carry_spec = _leaves(init, init_leaves)
    xs_spec = _leaves(xs, xs_leaves)
    if not xs_leaves:
        raise ValueError("scan: xs must hold at least one tensor")
    lengths = set()
    for x in xs_leaves:
        if x.dim() == 0:
            raise RuntimeError("scan: every tensor of xs needs the scanned dimension; got a 0-d tensor")
        lengths.add(x.shape[dim])
    if len(lengths) != 1:
        raise RuntimeError(f"scan: the tensors of xs differ in size along dim {dim}: {sorted(lengths)}")
    n = lengths.pop()
    if n == 0:
        raise RuntimeError("scan: xs is empty along the scanned dimension")
    if as_op or STATE.tracer is not None:
        return _as_op(combine_fn, init_leaves, carry_spec, xs_leaves, xs_spec, n, dim, reverse, checkpoint)
    slices = [x.unbind(dim) for x in xs_leaves]
    carry = init
    ys = [None] * n
    y_spec = None
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        out = combine_fn(carry, _build(xs_spec, iter([s[t] for s in slices])))
        carry, _, y_leaves, y_spec = _step_result(out, carry_spec, init_leaves)
        ys[t] = y_leaves
    stacked = [stack([ys[t][k] for t in range(n)], dim) for k in range(len(ys[0]))]
    return carry, _build(y_spec, iter(stacked))


def _step_result(out, carry_spec, init_leaves):
    """combine_fn's result checked: (next_carry, its leaves, y's leaves, y's structure)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise RuntimeError("scan: combine_fn must return a pair (next_carry, y)")
    carry, y = out
    new_leaves = []
    spec = _leaves(carry, new_leaves)
    if spec != carry_spec or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(new_leaves, init_leaves)):
        raise RuntimeError("scan: combine_fn's next_carry must have the structure, shapes and dtypes of init "
                           f"(got {[(a.dtype.name, tuple(a.shape)) for a in new_leaves]}, expected "
                           f"{[(b.dtype.name, tuple(b.shape)) for b in init_leaves]})")
    y_leaves = []
    y_spec = _leaves(y, y_leaves)
    return carry, new_leaves, y_leaves, y_spec


def _as_op(combine_fn, init_leaves, carry_spec, xs_leaves, xs_spec, n, dim, reverse, checkpoint):
    """combine_fn traced once into a body graph, the loop one `scan` op (ops/control.py): inside a trace, a node
    of the program; eagerly, one op on the tensors."""
    from .ops.control import run_scan
    from .ops.shape_ops import movedim
    from .tracing.body import trace_body
    from .tracing.trace import run_passes
    xs0 = [x if dim == 0 or dim == -x.dim() else movedim(x, dim, 0) for x in xs_leaves]
    nc = len(init_leaves)
    inputs = [(tuple(t.shape), t.dtype, f"carry{i}") for i, t in enumerate(init_leaves)]
    inputs += [(tuple(x.shape[1:]), x.dtype, f"x{i}") for i, x in enumerate(xs0)]

    def body(*ts):
        return combine_fn(_build(carry_spec, iter(ts[:nc])), _build(xs_spec, iter(ts[nc:])))
    ctx, out = trace_body(body, inputs, STATE.tracer)
    _, carry_leaves, y_leaves, y_spec = _step_result(out, carry_spec, init_leaves)
    g = ctx.graph
    g.outputs = [ctx.value_of(t) for t in carry_leaves + y_leaves]
    g.output_names = [f"carry{i}" for i in range(nc)] + [f"y{i}" for i in range(len(y_leaves))]
    ctx.check_captures("scan")
    del out, carry_leaves, y_leaves
    res = run_scan(run_passes(g), init_leaves, xs0, ctx.captures, n, reverse, checkpoint)
    carry = _build(carry_spec, iter(res[:nc]))
    ys = [y if dim == 0 else movedim(y, 0, dim) for y in res[nc:]]
    return carry, _build(y_spec, iter(ys))
