"""The backward engine: walks grad_fn nodes in reverse topological order, applying VJP rules.

It runs on eager tensors and, unchanged, on tracers (then every VJP op it runs is recorded into the IR:
this is how a `loss.backward()` inside a traced function becomes part of the static graph).
"""
import sys
import threading

import numpy as np

from .._dtype import _FROM_NP
from .._keep import REFCOUNTS_EXACT, kept
from .._state import STATE
from .._tensor import Tensor
from .graph import AccumulateGrad, OpNode, edge_of


def _topo(roots):
    """Nodes reachable from `roots`, each before the nodes it feeds gradients to."""
    if len(roots) != 1:
        return _dfs(roots)
    # one root: walk down while each node feeds a single node (a chain, the common case), then search the rest.
    # Same order as _dfs(roots): nothing below the walked nodes can reach them back (the graph has no cycles).
    order = []
    node = roots[0]
    while node is not None:
        nxt = None
        for e in node.edges:
            if e is not None and e[0] is not nxt:
                if nxt is not None:
                    return order + _dfs([node])
                nxt = e[0]
        order.append(node)
        node = nxt
    return order


def _dfs(roots):
    """_topo by depth-first search: reverse post-order."""
    order, seen = [], set()     # nodes hash by identity, like id() but without the call
    for root in roots:
        if root is None or root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root.edges))]
        while stack:
            node, it = stack[-1]
            for e in it:
                if e is not None and e[0] not in seen:
                    nxt = e[0]
                    seen.add(nxt)
                    stack.append((nxt, iter(nxt.edges)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return _leaves_early(order)


def _leaves_early(order):
    """Each AccumulateGrad right after the last node that feeds it, as PyTorch's engine runs them first once
    ready: a leaf's .grad and its hooks (DDP's bucket all-reduce) come as soon as its gradient is complete. (In
    reverse post-order nn.Linear's bias, the first edge of its node, came after the whole backward.)"""
    last = {}
    for i, node in enumerate(order):
        for e in node.edges:
            if e is not None and type(e[0]) is AccumulateGrad:
                last[e[0]] = i
    if not last:
        return order
    out = []
    after = {}
    for leaf, i in last.items():
        after.setdefault(i, []).append(leaf)
    for i, node in enumerate(order):
        if node not in last:
            out.append(node)
            out.extend(after.get(i, ()))
    return out


def _fit(g, shape, dtype):
    """Sum a broadcast gradient back to `shape` and cast it to `dtype` (done once, here, for all ops)."""
    if g.shape != shape:
        from ..ops.shape_ops import sum_to
        g = sum_to(g, shape)
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g


def _add(a, b):
    return b if a is None else a + b


_creation = None   # tracejit.creation, once _make_grads first needs it
_ONES = {}         # numpy dtype -> 0-d one (copied for each implicit gradient of a scalar loss)


def run_backward(roots, grads, retain_graph, create_graph, inputs=None, accumulate=True):
    """Core of backward() and grad(). Returns the gradients captured for `inputs` (grad mode only)."""
    root_edges = []
    for r, g in zip(roots, grads):
        e = edge_of(r)
        if e is None:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        root_edges.append((e, g))
    order = _topo([e[0] for e, _ in root_edges])

    capture = None
    if inputs is not None:
        capture = {}    # (node, output_nr) -> indices into inputs
        for i, t in enumerate(inputs):
            e = edge_of(t)
            if e is not None:
                capture.setdefault(e, []).append(i)
        # run only nodes on a path to a captured edge
        targets = {k[0] for k in capture}
        needed = set()
        for node in reversed(order):
            if node in targets or any(e is not None and e[0] in needed for e in node.edges):
                needed.add(node)
        order = [n for n in order if n in needed]
    results = [None] * (len(inputs) if inputs is not None else 0)

    buffers = {}    # node -> the gradients of its outputs, summed so far
    for (node, nr), g in root_edges:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * (node.nout or 1)
        buf[nr] = _add(buf[nr], g)

    prev = STATE.grad_enabled
    STATE.grad_enabled = bool(create_graph)
    stack = _callbacks()
    stack.append([])
    try:
        for node in order:
            buf = buffers.pop(node, None)
            if buf is None:
                continue
            leaf = type(node) is AccumulateGrad
            if node._pre_hooks or node._tensor_hooks or node._retained or (leaf and node.variable._hooks):
                buf = _pre_hooks(node, buf, create_graph)
            if capture is not None:
                for nr, g in enumerate(buf):
                    for i in capture.get((node, nr), ()):
                        results[i] = g
            if leaf:
                if accumulate and (capture is None or (node, 0) in capture):
                    t = node.variable
                    _accumulate(t, buf[0], create_graph)
                    if buf[0] is not None and "_post_acc_hooks" in t.__dict__:
                        for h in list(t.__dict__["_post_acc_hooks"].values()):
                            h(t)
                continue
            if isinstance(node, OpNode):
                grads_in = node.op.vjp(node, *buf)      # node.apply(buf), one call less
            else:
                grads_in = node.apply(buf)
            if type(grads_in) is not tuple and not isinstance(grads_in, (tuple, list)):
                grads_in = (grads_in,)
            if node._post_hooks:
                grads_in = _post_hooks(node, grads_in, buf)
            if STATE.anomaly and STATE.anomaly_nan:
                _check_nan(node, grads_in)
            shapes = node.shapes
            dtypes = node.dtypes
            i = -1
            for e, g in zip(node.edges, grads_in):
                i += 1
                if e is None or g is None:
                    continue
                if shapes is not None and shapes[i] is not None:
                    sh, d = shapes[i], g._data
                    # _fit(g, ...), skipped when a plain array already has the shape and dtype
                    if type(d) is not np.ndarray or d.shape != sh or _FROM_NP[d.dtype] is not dtypes[i]:
                        g = _fit(g, sh, dtypes[i])
                nxt, nr = e
                nb = buffers.get(nxt)
                if nb is None:
                    nb = buffers[nxt] = [None] * (nxt.nout or 1)
                old = nb[nr]
                nb[nr] = g if old is None else old + g
            grads_in = g = old = d = None   # only the buffers hold gradients now (see _unseen)
            if not retain_graph:
                node.release()
        cbs = stack[-1]
        while cbs:
            cbs.pop(0)()
    finally:
        stack.pop()
        STATE.grad_enabled = prev
    return results


_LOCAL = threading.local()     # .callbacks: per backward running in this thread (innermost last), the callbacks


def _callbacks():
    s = getattr(_LOCAL, "callbacks", None)
    if s is None:
        s = _LOCAL.callbacks = []
    return s


def queue_callback(callback):
    """Run `callback()` when the backward now running (in this thread) has finished (PyTorch's
    Variable._execution_engine.queue_callback, as DistributedDataParallel uses it to wait for its all-reduces)."""
    s = _callbacks()
    if not s:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    s[-1].append(callback)


def _pre_hooks(node, buf, create_graph):
    """PyTorch's order: hooks of the output tensors, then retain_grad, then the node's own pre-hooks."""
    if node._tensor_hooks:
        for nr, hooks in node._tensor_hooks.items():
            for h in list(hooks.values()):
                if buf[nr] is not None:
                    r = h(buf[nr])
                    if r is not None:
                        buf[nr] = r
    if node._retained:
        for nr, ref in node._retained.items():
            t = ref()
            if t is not None and buf[nr] is not None:
                g = buf[nr] if create_graph else buf[nr].detach()
                t._grad = g if t._grad is None else t._grad + g
    if type(node) is AccumulateGrad and node.variable._hooks and buf[0] is not None:
        for h in list(node.variable._hooks.values()):
            r = h(buf[0])
            if r is not None:
                buf[0] = r
    if node._pre_hooks:
        for h in list(node._pre_hooks.values()):
            r = h(tuple(buf))
            if r is not None:
                buf = list(r)
    return buf


def _post_hooks(node, grads_in, buf):
    """Node.register_hook hooks: fn(grad_inputs, grad_outputs), grad_inputs as the node's next_functions."""
    pos = node._visible() if isinstance(node, OpNode) else range(len(grads_in))
    grads_in = list(grads_in)
    for h in list(node._post_hooks.values()):
        r = h(tuple([grads_in[i] for i in pos]), tuple(buf))
        if r is not None:
            if len(r) != len(pos):
                raise RuntimeError(f"hook '{getattr(h, '__name__', h)}' has returned an incorrect number of values "
                                   f"(got {len(r)}, but expected {len(pos)})")
            for i, g in zip(pos, r):
                grads_in[i] = g
    return tuple(grads_in)


def _accumulate(t, g, create_graph):
    if g is None:
        return
    if not create_graph and g._requires_grad:
        g = g.detach()      # a gradient tensor the user passed in: the leaf's .grad carries no graph
    if STATE.tracer is None:
        old = t._grad
        if old is None and not create_graph and _fits(g, t):
            # (what the .grad setter would check, on plain arrays.) A gradient others hold is copied in the leaf's
            # layout, PyTorch's layout contract: a Linear weight's gradient, a transposed view, becomes row-major
            # as its weight (so the fused optimizer step can take it)
            if not _unseen(g):
                a = np.empty_like(t._data)
                np.copyto(a, g._data)
                g = Tensor._wrap(a)
            t._grad = g
            return
    else:
        old = t.grad
    if old is None:
        t.grad = g if create_graph or _unseen(g) else g.clone()
    else:
        t.grad = old + g


def _fits(g, t):
    a, b = g._data, t._data
    return type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype


def _unseen(g):
    """Can the leaf take `g` over as its .grad (PyTorch's AccumulateGrad steals a gradient nobody else holds)?

    Yes for a tracer, and for a tensor only the engine holds (references: the engine's buffer slot, our
    caller's argument, ours, getrefcount's) whose array owns its memory and is held by that tensor alone
    (references: its slot, our `a`, getrefcount's). A gradient the user passed in, a retained grad, a view
    or a tensor a hook kept fails one of these and is copied. One more reference to the array is fine when it
    is a compiled program's Keeper (tracejit/_keep.py): it reuses the array only once nobody else holds it."""
    a = g._data
    if a is None:
        return True
    if not REFCOUNTS_EXACT or type(a) is not np.ndarray or a.base is not None or sys.getrefcount(g) > 4:
        return False
    n = sys.getrefcount(a)
    return n <= 3 or (n == 4 and kept(a))


def _check_nan(node, grads):
    import numpy as np
    for i, g in enumerate(grads):
        if g is not None and g._data is not None and g.dtype.is_floating_point and np.isnan(g._data).any():
            where = "".join(node._trace[-4:]) if node._trace else "(forward trace not recorded)"
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.\n"
                               f"The forward op that created it was called at:\n{where}")


def _make_grads(outputs, grad_outputs):
    global _creation
    if _creation is None:
        from .. import creation as _creation   # imports the op registry, which imports autograd: bound late
    out = []
    for t, g in zip(outputs, grad_outputs):
        if g is None and type(t._data) is np.ndarray and t._data.ndim == 0:
            one = _ONES.get(t._data.dtype)
            if one is None:
                one = _ONES[t._data.dtype] = np.ones((), t._data.dtype)
            g = Tensor._wrap(one.copy())       # ones_like(t), without its wrappers
        elif g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = _creation.ones_like(t)
        elif not isinstance(g, Tensor):     # (PyTorch's check: a number or an array is no gradient)
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        elif tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {tuple(g.shape)} and output[0] "
                               f"has a shape of {tuple(t.shape)}.")
        elif g.dtype is not t.dtype:       # PyTorch casts a given gradient to its output's dtype
            g = g.to(t.dtype)
        out.append(g)
    return out


def _as_tuple(x):
    if x is None:
        return None
    return (x,) if isinstance(x, Tensor) else tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(tensors, grad_tensors)
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    outputs = _as_tuple(outputs)
    single = not isinstance(inputs, (tuple, list))
    inputs = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _make_grads(outputs, grad_outputs)
    res = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs, accumulate=False)
    if allow_unused is None:
        allow_unused = materialize_grads
    for i, r in enumerate(res):
        if r is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                from ..creation import zeros_like
                res[i] = zeros_like(inputs[i])
        elif not create_graph:
            res[i] = r.detach()
    return tuple(res)
