"""`tracejit.scan`: a loop over the leading (or a chosen) dimension that carries state, like JAX's `lax.scan`
and PyTorch's `torch._higher_order_ops.scan`.

    final_carry, ys = tracejit.scan(combine_fn, init, xs, dim=0, reverse=False)

`combine_fn(carry, x) -> (next_carry, y)` is called once per slice `x` of `xs` along `dim` (from the last
slice to the first with `reverse=True`); `carry` starts as `init`; the `y`s are stacked along `dim` in the
order of `xs` (with `reverse=True` too). `init`, `xs` and what `combine_fn` returns may be a tensor or a
(nested) tuple/list of tensors; the structure and the shapes of `next_carry` must match `init`'s.

Gradients flow through the carries, the `xs` and whatever `combine_fn` reads (module parameters), eagerly
and inside `@trace`. Where tracejit differs: it runs the loop in Python, eagerly and when traced, so inside
`@trace` the loop is unrolled into the graph (one copy of `combine_fn`'s ops per step): a trace of a long
sequence costs time in proportion to its length.
"""
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


def scan(combine_fn, init, xs, *, dim=0, reverse=False):
    """Run `combine_fn(carry, x) -> (next_carry, y)` over the slices of `xs` along `dim`; returns
    `(final_carry, ys)` with the `y`s stacked along `dim`. See the module docstring."""
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
    slices = [x.unbind(dim) for x in xs_leaves]
    carry = init
    ys = [None] * n
    y_spec = None
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        out = combine_fn(carry, _build(xs_spec, iter([s[t] for s in slices])))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise RuntimeError("scan: combine_fn must return a pair (next_carry, y)")
        carry, y = out
        new_leaves = []
        spec = _leaves(carry, new_leaves)
        if spec != carry_spec or any(a.shape != b.shape for a, b in zip(new_leaves, init_leaves)):
            raise RuntimeError("scan: combine_fn's next_carry must have the structure and shapes of init "
                               f"(got {[tuple(a.shape) for a in new_leaves]}, expected "
                               f"{[tuple(b.shape) for b in init_leaves]})")
        y_leaves = []
        y_spec = _leaves(y, y_leaves)
        ys[t] = y_leaves
    stacked = [stack([ys[t][k] for t in range(n)], dim) for k in range(len(ys[0]))]
    return carry, _build(y_spec, iter(stacked))
