"""torch.func: function transforms (grad, vjp, jvp, jacrev, jacfwd, hessian, vmap) and functional_call.

Everything is built on the eager autograd engine (`tracejit.autograd.grad` with `create_graph`), so transforms
compose (grad of grad, vmap of grad, grad of vmap) and work on tracer tensors under `tracejit.trace` too.
Each transform lifts the tensors it differentiates to tensors of its own: a fresh leaf for a tensor without
gradient history, an alias (a view) for one that has it, so the result stays differentiable by an enclosing
transform or by a `.backward()` outside, and a closure over the same tensor is not confused with the argument.
Results that depend on nothing outside the transform are detached, as PyTorch's are.

Differences from PyTorch, by design of this small implementation:
- `vmap` runs `func` once per index of the mapped dimension and stacks the results (no batching rules); the
  numbers are the same, the speed is a Python loop's. `out_dims=None` returns the first sample's value without
  checking that it is unbatched. `randomness='error'` notices a change of the default generator's state, and
  'same' restores it before each sample: both work eagerly, not under `trace` (a traced random op draws when the
  program runs, not while it is traced). `chunk_size` is checked and otherwise ignored (as by jacrev).
- `jvp` uses the double-vjp trick and `jacfwd` is computed by reverse mode (the same numbers as forward mode).
"""
import functools

from . import autograd as _autograd
from ._tensor import Tensor
from .autograd import enable_grad, is_grad_enabled
from .autograd.graph import AccumulateGrad
from .utils._pytree import _broadcast_to_and_flatten, tree_flatten, tree_map, tree_unflatten, treespec_pprint

__all__ = ["functional_call", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "stack_module_state"]


# ---------------------------------------------------------------------------------------------------- levels
class _Level:
    """The tensors one transform call lifted, so that results depending only on them can be detached."""

    def __init__(self):
        self.outer = is_grad_enabled()      # an enclosing computation may differentiate the results
        self.own = {}                       # id -> the lifted leaf (kept alive so that its id stays its own)

    def lift(self, t):
        if not isinstance(t, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        if t.requires_grad:                 # keep the outer history: an enclosing transform differentiates us
            u = t.view_as(t)
        else:
            u = t.detach().requires_grad_()
            self.own[id(u)] = u
        return u

    def lift_tree(self, tree):
        return tree_map(self.lift, tree)

    def grads(self, outputs, inputs, grad_outputs=None):
        """Gradients of `outputs` (weighted by `grad_outputs`) for each input, zeros where one is unused."""
        from .creation import ones_like, zeros_like
        if grad_outputs is None:
            grad_outputs = [ones_like(o) for o in outputs]
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        res = [None] * len(inputs)
        if pairs:
            with enable_grad():
                res = _autograd.grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                                     create_graph=self.outer, allow_unused=True)
        return [zeros_like(x) if r is None else r for r, x in zip(res, inputs)]

    def reaches_outside(self, t):
        """Whether t's gradient history reaches a tensor this level did not create."""
        if t.grad_fn is None:
            return id(t) not in self.own
        seen, todo = set(), [t.grad_fn]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                if id(node.variable) not in self.own:
                    return True
                continue
            todo.extend(e[0] for e in node.edges if e is not None)
        return False

    def result(self, tree):
        """`tree` with the tensors that depend only on this level's lifted tensors detached."""
        def fix(t):
            if isinstance(t, Tensor) and t.requires_grad and not (self.outer and self.reaches_outside(t)):
                return t.detach()
            return t
        return tree_map(fix, tree)


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    for x in tree_flatten(out[1])[0]:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
    return out


def _tensor_outputs(out, api):
    leaves, spec = tree_flatten(out)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type {type(x)}")
    return leaves, spec


def _argnums(argnums, nargs):
    """argnums as a tuple of non-negative positions, with PyTorch's errors."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not all(isinstance(n, int) for n in nums):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    if len(set(nums)) != len(nums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    for n in nums:
        if not -nargs <= n < nargs:
            raise RuntimeError(f"Got argnum={n}, but only {nargs} positional inputs")
    return tuple(n % nargs for n in nums)


def _lift_args(level, args, argnums):
    """args with the ones at `argnums` lifted; the lifted pytrees, in argnums order."""
    nums = _argnums(argnums, len(args))
    args = list(args)
    for n in nums:
        args[n] = level.lift_tree(args[n])
    return args, [args[n] for n in nums]


def _by_argnums(argnums, flat, values):
    """`values` (one per leaf of the flattened differentiated arguments `flat`) in the arguments' structures: one
    pytree for an int argnums, a tuple of them for a tuple."""
    per_arg, k = [], 0
    for leaves, spec in flat:
        per_arg.append(tree_unflatten(values[k:k + len(leaves)], spec))
        k += len(leaves)
    return per_arg[0] if isinstance(argnums, int) else tuple(per_arg)


# ---------------------------------------------------------------------------------------------------- grad
def grad_and_value(func, argnums=0, has_aux=False):
    """Returns a function computing (gradient of func's scalar output with respect to the arguments at `argnums`,
    that output), or (gradient, (output, aux)) with has_aux. argnums: an int (one gradient) or a tuple of ints
    (a tuple of gradients); each argument may be a pytree of tensors (its gradient has its structure)."""
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        level = _Level()
        with enable_grad():
            args, diff = _lift_args(level, args, argnums)
            out, aux = _split_aux(func(*args, **kwargs), has_aux, api)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with {out.dim()} "
                                   "dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            flat = [tree_flatten(d) for d in diff]
            grads = level.grads([out], [x for leaves, _ in flat for x in leaves])
        g = level.result(_by_argnums(argnums, flat, grads))
        value = level.result(out)
        return (g, (value, level.result(aux))) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """Returns a function computing the gradient of func's scalar output with respect to the arguments at
    `argnums` (and aux with has_aux). Composes: grad(grad(f)) is the second derivative."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# ---------------------------------------------------------------------------------------------------- vjp / jvp
def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents) returns the tuple of cotangent-weighted gradients for
    the primals (pytrees), cotangents having the structure of func's output. vjp_fn may be called repeatedly."""
    api = "vjp(f, *primals)"
    level = _Level()
    with enable_grad():
        lifted = level.lift_tree(primals)
        out, aux = _split_aux(func(*lifted), has_aux, api)
        outs, out_spec = _tensor_outputs(out, api)
    p_leaves, p_spec = tree_flatten(lifted)

    def vjp_fn(cotangents):
        cts, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function. cotangents: {treespec_pprint(ct_spec)}, primal output: "
                               f"{treespec_pprint(out_spec)}")
        for i, (c, o) in enumerate(zip(cts, outs)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and output[{i}] "
                                   f"has a shape of {o.shape}.")
        level.outer = is_grad_enabled()
        return level.result(tree_unflatten(level.grads(outs, p_leaves, cts), p_spec))

    res = (level.result(out), vjp_fn)
    return res + (level.result(aux),) if has_aux else res


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), the Jacobian of func at primals applied to tangents[, aux]). primals and tangents are
    tuples of the same structure. Computed by reverse mode twice (the double-vjp trick): the vjp is linear in its
    cotangent u, and the gradient of <vjp(u), tangents> with respect to u is J @ tangents."""
    api = "jvp(f, primals, tangents)"
    for name, t in (("primals", primals), ("tangents", tangents)):
        if not isinstance(t, tuple):
            raise RuntimeError(f"{api}: Expected {name} to be a tuple. E.g. it should be valid to call f(*primals).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For example, "
                           "if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{treespec_pprint(p_spec)} and tangents with structure {treespec_pprint(t_spec)}")
    for name, leaves in (("primals", p_leaves), ("tangents", t_leaves)):
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{api}: Expected {name} to only contain Tensors, got {type(x)}")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    level = _Level()
    with enable_grad():
        lifted = [level.lift(p) for p in p_leaves]
        out, aux = _split_aux(func(*tree_unflatten(lifted, p_spec)), has_aux, api)
        outs, out_spec = _tensor_outputs(out, api)
        us = [level.lift(o.detach().new_zeros(o.shape)) for o in outs]
        outer, level.outer = level.outer, True          # the vjp must stay differentiable in u
        vjps = level.grads(outs, lifted, us)
        level.outer = outer
        pairs = [(v, t) for v, t in zip(vjps, t_leaves) if v.requires_grad]
        jvps = level.grads([v for v, _ in pairs], us, [t for _, t in pairs])
    res = (level.result(out), level.result(tree_unflatten(jvps, out_spec)))
    return res + (level.result(aux),) if has_aux else res


# ---------------------------------------------------------------------------------------------------- jacobians
def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """Returns a function computing the Jacobian of func with respect to the arguments at argnums, one backward
    pass per output element. For each output leaf of shape S and input leaf of shape P the block has shape S + P;
    the result has func's output structure, each leaf holding the argnums structure (as in PyTorch)."""
    from .creation import eye, zeros
    from .ops.shape_ops import stack

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        level = _Level()
        with enable_grad():
            args, diff = _lift_args(level, args, argnums)
            out, aux = _split_aux(func(*args, **kwargs), has_aux, "vjp(f, *primals)")
            outs, out_spec = _tensor_outputs(out, "vjp(f, *primals)")
            flat = [tree_flatten(d) for d in diff]
            inputs = [x for leaves, _ in flat for x in leaves]
            blocks = []
            for o in outs:
                n = o.numel()
                if n == 0:
                    rows = [zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype) for x in inputs]
                else:
                    basis = eye(n, dtype=o.dtype).reshape((n,) + tuple(o.shape))
                    per_row = [level.grads([o], inputs, [basis[k]]) for k in range(n)]
                    rows = [stack([r[i] for r in per_row]).reshape(tuple(o.shape) + tuple(x.shape))
                            for i, x in enumerate(inputs)]
                blocks.append(_by_argnums(argnums, flat, rows))
        jac = level.result(tree_unflatten(blocks, out_spec))
        return (jac, level.result(aux)) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of func (see jacrev). tracejit computes it by reverse mode: the same numbers as PyTorch's
    forward mode, a different cost (one backward pass per output element)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """Returns a function computing the Hessian of func's scalar output: jacfwd(jacrev(func, argnums), argnums)."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------------------------------------------- vmap
def _fname(func):
    return getattr(func, "__name__", repr(func))


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Returns a function mapping func over a dimension of its inputs: in_dims gives, per positional argument (an
    int or None for all of it, or a pytree of them matching the argument), the mapped dimension or None (not
    mapped); keyword arguments are not mapped. out_dims places the mapped dimension in each output.

    tracejit runs func once per index of the mapped dimension on slices (`select`) and stacks the outputs: the
    semantics of PyTorch's vmap (nested vmap, vmap of grad for per-sample gradients), not its batched speed.
    randomness: 'error' raises if func draws from the default generator, 'same' gives every sample the same
    draws, 'different' independent ones."""
    from .creation import zeros
    from .ops.shape_ops import stack
    from .random import default_generator
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = _fname(func)

    def flat_in_dims(args):
        api = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"{api}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                             f"structure of inputs, got: {type(in_dims)}.")
        leaves, spec = tree_flatten(args)
        dims = _broadcast_to_and_flatten(in_dims, spec)
        if dims is None:
            raise ValueError(f"{api}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                             f"{tree_flatten(in_dims)[1]} but inputs has structure {spec}.")
        for x, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(d, int):
                raise ValueError(f"{api}: Got in_dim={d} for an input but in_dim must be either an integer dimension "
                                 "or None.")
            if not isinstance(x, Tensor):
                raise ValueError(f"{api}: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot "
                                 "vmap over non-Tensor arguments, please use None as the respective in_dim")
            if not -x.dim() <= d < x.dim():
                raise ValueError(f"{api}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                                 f"{x.dim()} so expected in_dim to satisfy -{x.dim()} <= in_dim < {x.dim()}.")
        return leaves, spec, [None if d is None else d % x.dim() for x, d in zip(leaves, dims)]

    def stack_outputs(results, n):
        leaves0, spec = tree_flatten(results[0])
        ok = isinstance(out_dims, (int, tuple, list)) or out_dims is None
        dims = _broadcast_to_and_flatten(out_dims, spec) if ok else None
        if dims is None:
            if not ok:
                raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                                 "python collection of ints representing where in the outputs the vmapped dimension "
                                 "should appear.")
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                             f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but "
                             f"outputs has structure {spec}.")
        per_sample = [tree_flatten(r)[0] for r in results]
        out = []
        for i, (x, d) in enumerate(zip(leaves0, dims)):
            if d is None:
                out.append(x)
            elif not isinstance(x, Tensor):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(x)}. Did you "
                                 "mean to set out_dims= to None for output?")
            else:
                y = stack([s[i] for s in per_sample], dim=d)
                out.append(y if n else y.narrow(d % y.dim(), 0, 0))
        return tree_unflatten(out, spec)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                             "trying to vmap over a function with no inputs. The latter is unsupported.")
        leaves, spec, dims = flat_in_dims(args)
        sizes = [x.shape[d] for x, d in zip(leaves, dims) if d is not None]
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        n = sizes[0]

        def sample(b):
            if b is None:       # an empty mapped dimension: run func once on zeros to learn the output shapes
                return [x if d is None else zeros(tuple(x.shape[:d]) + tuple(x.shape[d + 1:]), dtype=x.dtype)
                        for x, d in zip(leaves, dims)]
            return [x if d is None else x.select(d, b) for x, d in zip(leaves, dims)]

        bits = default_generator._rng.bit_generator      # (its state as a dict: no tensor, so it traces)
        results, start = [], bits.state
        for b in range(n) if n else [None]:
            if randomness == "same":
                bits.state = start
            results.append(func(*tree_unflatten(sample(b), spec), **kwargs))
            if randomness == "error" and bits.state != start:
                bits.state = start
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                                   "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        return stack_outputs(results, n)
    return wrapper


# ---------------------------------------------------------------------------------------------------- modules
class _Reparametrized:
    """Puts tensors in place of a module's parameters and buffers (by dotted name) and puts the old ones back."""

    def __init__(self, module, tensors, tie_weights, strict):
        named = list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False))
        tensors = dict(tensors)
        if tie_weights:
            tied = {}
            for n, t in named:
                tied.setdefault(id(t), []).append(n)
            for names in tied.values():
                given = [n for n in names if n in tensors]
                if len({id(tensors[n]) for n in given}) > 1:
                    raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, which are tied. "
                                     "Consider using tie_weights=False")
                for n in names if given else ():
                    tensors[n] = tensors[given[0]]
        if strict:
            known = [n for n, _ in named]
            unexpected = sorted(n for n in tensors if n not in known)
            missing = sorted(n for n in known if n not in tensors)
            msgs = ([f"Unexpected key(s): {', '.join(map(repr, unexpected))}."] if unexpected else []) + \
                ([f"Missing key(s): {', '.join(map(repr, missing))}."] if missing else [])
            if msgs:
                raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(msgs))
        self.module, self.tensors, self.saved = module, tensors, []

    def __enter__(self):
        missing = object()
        for name, t in self.tensors.items():
            prefix, _, attr = name.rpartition(".")
            owner = self.module.get_submodule(prefix) if prefix else self.module
            d = owner.__dict__
            store = d["_parameters"] if attr in d["_parameters"] else d["_buffers"] if attr in d["_buffers"] else None
            if store is None:       # another attribute (a parametrized tensor: set through its right_inverse)
                self.saved.append((owner, attr, getattr(owner, attr, missing), missing))
                setattr(owner, attr, t)
            else:
                self.saved.append((store, attr, store[attr], missing))
                store[attr] = t
        return self

    def __exit__(self, *exc):
        for where, attr, old, missing in reversed(self.saved):
            if isinstance(where, dict):
                where[attr] = old
            elif old is missing:
                delattr(where, attr)
            else:
                setattr(where, attr, old)
        self.saved = []


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the tensors of `parameter_and_buffer_dicts` (a dict, or a tuple/list of dicts
    with distinct keys, by dotted name) in place of its parameters and buffers; they are restored afterwards, also
    when the call raises. tie_weights: a tensor given for one of tied names is used for all of them. strict:
    every parameter and buffer must be given, and nothing else."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        tensors = dicts
    elif isinstance(dicts, (list, tuple)) and all(isinstance(d, dict) for d in dicts):
        tensors, dup = {}, set()
        for d in dicts:
            dup.update(k for k in d if k in tensors)
            tensors.update(d)
        if dup:
            raise ValueError(f"{sorted(dup)} appeared in multiple dictionaries; behavior of functional call is "
                             "ambiguous")
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(dicts)}")
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _Reparametrized(module, tensors, tie_weights, strict):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """(params, buffers): dicts from each name to the models' tensors stacked along a new first dimension, for
    vmap over an ensemble (with functional_call). Stacked parameters are new leaves that require grad."""
    from . import no_grad
    from .ops.shape_ops import stack
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named):
        per_model = [dict(named(m)) for m in models]
        out = {}
        for name, t in per_model[0].items():
            ts = [d[name] for d in per_model]
            if len({x.requires_grad for x in ts}) > 1:
                raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
            with no_grad():
                s = stack(ts)
            out[name] = s.requires_grad_() if t.requires_grad else s
        return out
    return stacked(lambda m: m.named_parameters()), stacked(lambda m: m.named_buffers())
