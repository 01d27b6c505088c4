"""torch.autograd.functional: vjp, jvp, vhp, hvp, jacobian, hessian of a function of tensors (`inputs` a tensor or a
tuple of them; the function returns a tensor or a tuple of them), built on autograd.grad. The results carry no graph
unless create_graph=True; an input the outputs do not depend on gets zeros (strict=True raises instead, as PyTorch
does). jvp is the double-vjp trick; jacobian takes one backward pass per output element, hessian is the jacobian of
the gradient; hvp equals vhp (the Hessian of a twice-differentiable function is symmetric)."""
import tracejit as tj

from .engine import grad as _grad


def _as_tuple(x, what, api):
    single = not isinstance(x, (tuple, list))
    xs = (x,) if single else tuple(x)
    for i, t in enumerate(xs):
        if not isinstance(t, tj.Tensor):
            raise TypeError(f"The {what} given to {api} must be either a Tensor or a tuple of Tensors but the value "
                            f"at index {i} has type {type(t)}.")
    return xs, single


def _prepare(inputs, create_graph):
    """Inputs to differentiate: views of them that keep their history (create_graph), else fresh leaves."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_(True)
                 for x in inputs)


def _finish(xs, single, create_graph):
    xs = tuple(x if create_graph else x.detach() for x in xs)
    return xs[0] if single else xs


def _grads(outs, ins, vs, create_graph, strict, api):
    if strict:
        for i, o in enumerate(outs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The "
                                   f"outputs must be computed in a differentiable manner from the input when running "
                                   f"in strict mode.")
    live = [k for k, o in enumerate(outs) if o.requires_grad]
    gs = _grad([outs[k] for k in live], ins, [vs[k] for k in live], create_graph=True, allow_unused=True) \
        if live else [None] * len(ins)
    if strict:
        for i, g in enumerate(gs):
            if g is None:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   f"not allowed in strict mode.")
    return tuple(tj.zeros_like(x) if g is None else g for g, x in zip(gs, ins))


def _call(func, inputs, create_graph, api):
    ins, single_in = _as_tuple(inputs, "inputs", api)
    ins = _prepare(ins, create_graph)
    with tj.enable_grad():
        out = func(*ins)
    outs, single_out = _as_tuple(out, "outputs of the user-provided function", api)
    return ins, single_in, outs, single_out


def _vectors(v, outs, api):
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
        return (tj.ones_like(outs[0]),)
    vs, _ = _as_tuple(v, "v", api)
    if len(vs) != len(outs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outs)} but got {len(vs)}.")
    for i, (a, o) in enumerate(zip(vs, outs)):
        if tuple(a.shape) != tuple(o.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(o.shape)} but got "
                               f"{tuple(a.shape)}.")
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product with v shaped as the outputs."""
    ins, single_in, outs, single_out = _call(func, inputs, create_graph, "vjp")
    with tj.enable_grad():
        gs = _grads(outs, ins, _vectors(v, outs, "vjp"), create_graph, strict, "vjp")
    return _finish(outs, single_out, create_graph), _finish(gs, single_in, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product with v shaped as the inputs (two reverse passes: the vjp
    with a dummy cotangent u is linear in u, and its vjp with v is J v)."""
    ins, single_in, outs, single_out = _call(func, inputs, create_graph, "jvp")
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        vs = (tj.ones_like(ins[0]),)
    else:
        vs = _vectors(v, ins, "jvp")
    with tj.enable_grad():
        us = tuple(tj.zeros_like(o).requires_grad_(True) for o in outs)
        gs = _grads(outs, ins, us, True, strict, "jvp")
        live = [k for k, g in enumerate(gs) if g.requires_grad]
        jv = _grad([gs[k] for k in live], us, [vs[k] for k in live], create_graph=create_graph, allow_unused=True) \
            if live else [None] * len(us)
    jv = tuple(tj.zeros_like(o) if j is None else j for j, o in zip(jv, outs))
    return _finish(outs, single_out, create_graph), _finish(jv, single_out, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d outputs / d inputs: a tensor of shape output.shape + input.shape for one of each; a tuple over the inputs
    for several inputs, inside a tuple over the outputs for several outputs. (vectorize and strategy change only
    how PyTorch computes it.)"""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                         'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer '
                         'to use "reverse-mode".')
    ins, single_in, outs, single_out = _call(func, inputs, create_graph, "jacobian")
    jac = []
    with tj.enable_grad():
        for i, o in enumerate(outs):
            rows = [[] for _ in ins]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                gs = _grads((flat[k],), ins, (tj.ones_like(flat[k]),), create_graph, strict, "jacobian")
                for r, g in zip(rows, gs):
                    r.append(g)
            jac.append(tuple((tj.stack(r) if r else tj.zeros((0,) + tuple(x.shape), dtype=x.dtype))
                             .reshape(tuple(o.shape) + tuple(x.shape)) for r, x in zip(rows, ins)))
    jac = [_finish(j, single_in, create_graph) for j in jac]
    return jac[0] if single_out else tuple(jac)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The second derivatives of func (a single-element output): a tensor of shape input.shape * 2 for one input, a
    tuple of tuples (i, j: d2 f / dx_i dx_j) for several."""
    ins, single_in = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, tj.Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single element Tensor but the given "
                               f"function returned a Tensor with {getattr(out, 'numel', lambda: '?')()} elements.")
        gs = _grads((out.reshape(()),), xs, (tj.ones((), dtype=out.dtype),), True, strict, "hessian")
        return gs[0] if single_in else gs
    return jacobian(gradient, ins[0] if single_in else ins, create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a single-element output."""
    ins, single_in, outs, single_out = _call(func, inputs, create_graph, "vhp")
    if len(outs) != 1 or outs[0].numel() != 1:
        raise RuntimeError("The function given to vhp should return a single element Tensor but the given function "
                           f"returned a Tensor with {outs[0].numel()} elements.")
    vs = _vectors(v, ins, "vhp") if v is not None or len(ins) != 1 or ins[0].numel() != 1 else (tj.ones_like(ins[0]),)
    with tj.enable_grad():
        gs = _grads((outs[0].reshape(()),), ins, (tj.ones((), dtype=outs[0].dtype),), True, strict, "vhp")
        live = [k for k, g in enumerate(gs) if g.requires_grad]
        hv = _grad([gs[k] for k in live], ins, [vs[k] for k in live], create_graph=create_graph, allow_unused=True) \
            if live else [None] * len(ins)
    hv = tuple(tj.zeros_like(x) if h is None else h for h, x in zip(hv, ins))
    return _finish(outs, single_out, create_graph), _finish(hv, single_in, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): equal to vhp, the Hessian being symmetric."""
    return vhp(func, inputs, v, create_graph=create_graph, strict=strict)
