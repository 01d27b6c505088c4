"""The op registry: every op is defined exactly once, here, and serves every part of the system.

An `Op` holds
  - `impl(*arrays, **attrs)`: the numpy implementation (eager mode and the IR interpreter),
  - `meta(*avals, **attrs)`: the shape/dtype rule (tracer, IR verifier); avals have `.shape`/`.dtype`,
  - `vjp(ctx, *grads)`: the derivative, written with tracejit ops so that it runs on eager tensors
    (autograd, create_graph, higher order) and on tracers (the symbolic autodiff pass) alike,
  - `expr`: for elementwise ops, the scalar expression template the fusion code generator inlines.

`apply(op, *args, **attrs)` is the single dispatch point: eager run or tracer recording, then autograd
recording. The engine sums broadcast gradients back to input shapes and casts them to input dtypes, so
VJP rules never repeat that.

Traits: facts about an op that passes and backends ask for, given as keywords of `defop` (never patched onto an
entry later, never kept as a set of op names in `passes/` or `backends/`). Each has a default, so an op sets only
the ones that hold for it (`TRAITS` lists them; an unknown keyword is an error):

  reads(i, args) -> bool   which saved inputs the VJP reads the values of (only those are version-checked: an
                           in-place change of an input the rule does not read is no error, as in PyTorch);
                           None: all of them
  fusible                  False: an elementwise op with a template that no code generator handles yet (bitwise
                           ops); it stays a node of its own
  broadcasts               a shape op a fused loop absorbs by reading its input with broadcast strides (expand)
  window(node) -> (offset, strides) | None
                           a view op a CPU loop kernel absorbs by reading its C-contiguous input in place: the
                           element offset and the element stride per output dim, or None for this node (slice)
  places(node) -> [(offset, strides)]
                           its output is its operands placed at windows of it (cat): per operand, where its elements
                           land in the C-contiguous output; a CPU loop kernel stores them there directly
  passthrough              its scalar code is its first operand, converted to the output dtype (cast, expand)
  int_identity             the identity on integer inputs (floor, ceil, trunc, round)
  bool_operands            its operands are converted to bool and it computes in bool (logical_and/or/xor/not)
  literal_exponent         a Python number operand stays a literal of the generated code, never a kernel argument
                           (pow: `x ** 2.0` with the exponent an argument is a libm pow per element)
  int_div_raises           on integers it divides and raises on a zero divisor (floor_divide, remainder, fmod)
  unit                     u with `x op u == x` (mul: 1, add: 0, sub: 0, div: 1, pow: 1); None: no such unit
  commutative              `a op b == b op a` (so a unit on the left is one too)
  involution               `op(op(x)) == x` (neg)
  noop(attrs, out) -> bool its output is its input whenever shape and dtype do not change and this holds
                           (reshape, view, cast, contiguous, expand always; permute when its dims are in order)
  reshapes                 its output is its input's elements, in C order, under a new shape (reshape, view): a
                           chain of them is one reshape
  row_reduce               the attributes with which a row kernel can compute this reduction (sum, mean, amax,
                           amin, var, logsumexp, softmax, log_softmax); None: it is no row reduction
  row_exp                  a row reduction computed from exp(x - row max) (logsumexp, softmax, log_softmax)
  host_indices             its index operands may be host numpy arrays (a tensor index made from a Python list)
  saved_outputs            the output indices the VJP reads (saves="o"): only those are kept and version-checked
  scalar_edges             False: a Python number operand is no edge of its grad_fn (pow, lerp: PyTorch's Scalar);
                           a callable (position) -> bool: only at the positions where it holds (sub: `1 - x` is
                           PyTorch's rsub(x, 1), whose number is a Scalar)
  makes_contiguous         its output is row-major whatever its operand's strides (contiguous; clone keeps its
                           operand's layout, order="K"): the tracer's layout model does not carry the dim order over
  decompose(*args, **attrs) the op written with other registry ops, on tensors (same arguments as impl); it must
                           give the numpy `impl`'s results. A backend with no kernel of its own for the op runs it
                           (the CUDA backend: var, std, logsumexp, vector_norm, nll_loss...)
  aliases                  its output may be (a view of) an operand's array though it is no view op (see
                           `Op.may_alias`, which also covers views, noops, shape ops and collectives)
  fuses_in_parts           its decomposition fuses with the work around it (row kernels): a backend that fuses
                           lowers the op by it after autodiff (passes/decompose.py: batch_norm, to_memory_format, addmm
                           and mv/dot, whose matmul and add the backend fuses or runs as BLAS as before)

Adding an elementwise op with a scalar template (`expr`) needs one entry: eager mode runs `impl`, the CPU and
CUDA code generators inline `expr` (its helpers come from the backends' scalar runtimes).
"""
import numpy as np

from .. import _dtype as D
from .._state import STATE
from .._tensor import Tensor
from ..autograd.graph import record


# the traits (see the module docstring) and their defaults
TRAITS = {"reads": None, "fusible": True, "broadcasts": False, "passthrough": False, "int_identity": False,
          "bool_operands": False, "literal_exponent": False, "int_div_raises": False, "unit": None,
          "commutative": False, "involution": False, "noop": None, "reshapes": False, "row_reduce": None,
          "row_exp": False, "host_indices": False, "saved_outputs": None, "decompose": None,
          "makes_contiguous": False, "scalar_edges": True, "fuses_in_parts": False, "aliases": False,
          "window": None, "places": None}


class Op:
    __slots__ = ("name", "kind", "impl", "meta", "vjp", "expr", "nout", "saves", "view", "random",
                 "data_dependent", "grad_name", "dtype_rule", "__dict__")

    def __init__(self, name, impl, meta, vjp=None, *, kind="other", expr=None, nout=1, saves="i",
                 view=False, random=False, data_dependent=False, grad_name=None, dtype_rule=None, **traits):
        for k, v in traits.items():
            if k not in TRAITS:
                raise TypeError(f"op {name!r}: unknown trait {k!r} (known: {', '.join(TRAITS)})")
            setattr(self, k, frozenset(v) if k == "row_reduce" else v)
        self.name = name
        self.kind = kind
        self.impl = impl
        self.meta = meta
        self.vjp = vjp
        self.expr = expr
        self.nout = nout
        self.saves = saves
        self.view = view
        self.random = random
        self.data_dependent = data_dependent
        self.grad_name = grad_name or (_camel(name) + "Backward0")
        self.dtype_rule = dtype_rule

    def __repr__(self):
        return f"<op {self.name}>"

    @property
    def may_alias(self):
        """Its outputs may share memory with its array operands (a view, the operand itself when nothing
        changes, a collective's handle the communication thread reads the operand through): the buffer plan
        keeps an operand's buffer alive while such an output lives. tests/ops/conftest.py checks, on every
        eager call in tests/ops, that an op whose output shares an operand's memory says so."""
        return self.view or self.aliases or self.noop is not None or self.kind in ("shape", "collective")


for _k, _v in TRAITS.items():     # class-level defaults: an entry stores only the traits it sets
    setattr(Op, _k, _v)


def _camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_"))


OPS = {}


def defop(name, impl, meta, vjp=None, **kw):
    if name in OPS:
        raise ValueError(f"op {name!r} is defined twice")
    op = Op(name, impl, meta, vjp, **kw)
    OPS[name] = op
    return op


def call(name, *args, **attrs):
    """`apply` by op name: what decompositions are written with."""
    return apply(OPS[name], *args, **attrs)


class AVal:
    """An abstract value: what the shape rule sees and returns."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"


def apply(op, *args, **attrs):
    """Run `op` on tensors/scalars: eagerly on numpy, or record it when tracing; then record autograd."""
    # the hot path of every eager op: no imports, no property calls, no comprehensions (each is a frame in 3.11)
    state = STATE
    if state.tracer is not None:
        outs = state.tracer.record(op, args, attrs)
    else:
        arrays = list(args)
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                arrays[i] = a._data
            elif type(a) not in _SCALARS:
                check_operand(op, a, i)
        if state.profiler is not None:
            res = state.profiler.run(op, arrays, attrs)
        else:
            try:
                if state.cuda is None:
                    res = op.impl(*arrays, **attrs)
                else:                   # a cuda tensor exists somewhere: route by device
                    res = state.cuda(op, arrays, attrs)
            except (WordedIndexError, WordedValueError):
                raise
            except (ValueError, IndexError, TypeError) as e:
                raise _user_error(op, args, e) from None
        if op.nout == 1:
            outs = (_wrap(res),)
        else:
            outs = tuple([_wrap(r) for r in res])
        if op.view:
            base = args[0]
            for o in outs:
                o._version = base._version
                o._base = base if base._base is None else base._base
                if base._inference:         # a view of an inference tensor is one
                    o._inference = True
            if base._requires_grad and state.grad_enabled:
                _note_view(op, base, outs[0], attrs)
    if state.grad_enabled and op.vjp is not None:
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                for b in args:
                    if isinstance(b, Tensor) and b._base is not None and b._data is not None:
                        _fresh_view(b)
                record(op, args, outs, attrs)
                break
    return outs[0] if op.nout == 1 else outs


_wrap = Tensor._wrap
_SCALARS = frozenset((int, float, bool))


def check_operand(op, a, i):
    """A non-tensor operand of an op (eager, or traced: tracer.record) is a real Python or numpy scalar, else
    PyTorch's TypeError naming the argument (before numpy, numba or a kernel sees it). Complex scalars raise:
    tracejit has no complex dtypes (PyTorch would compute in complex64)."""
    if isinstance(a, (complex, np.complexfloating)):
        raise RuntimeError(f"{op.name}(): result type ComplexFloat is not supported (complex scalar {a!r}): "
                           f"tracejit has no complex dtypes")
    if isinstance(a, np.ndarray) or (op.kind == "elementwise" and not isinstance(a, (int, float, np.generic))):
        t = type(a)
        name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"
        raise TypeError(f"{op.name}(): argument '{'input' if i == 0 else 'other'}' (position {i + 1}) must be "
                        f"Tensor, not {name}")


# Eager views of tensors that require grad remember how they were made from their base (the chain of view
# ops) and the version they were made at. When the base, or another view of it, is updated in place later,
# a view read by an op gets its autograd history again from the base's new one (PyTorch regenerates a view's
# grad_fn the same way), so the gradient flows through the update. (Tracers: TraceContext.sync.)
def _note_view(op, src, out, attrs):
    sd = src.__dict__
    if src._base is not None and "_vchain" not in sd:
        return
    d = out.__dict__
    d["_vchain"] = (sd["_vchain"] if src._base is not None else ()) + ((op, attrs),)
    d["_vver"] = src._version.v


def _fresh_view(t):
    d = t.__dict__
    ver = d.get("_vver")
    if ver is None or ver == t._version.v:
        return
    v = t._base
    for op, attrs in d["_vchain"]:
        v = apply(op, v, **attrs)
    t.grad_fn, t._output_nr, t._requires_grad = v.grad_fn, v._output_nr, v._requires_grad
    d["_vver"] = t._version.v


class WordedIndexError(IndexError):
    """An IndexError an op's impl raises in PyTorch's own words: apply passes it on as it is (any other numpy
    error is reworded by _user_error, naming the op)."""


class WordedValueError(ValueError):
    """A ValueError already in PyTorch's words (the use of an uninitialized lazy parameter): apply passes it on."""


def _user_error(op, args, e):
    """Turn a numpy error into PyTorch's kind of error, naming the op and the shapes."""
    from .._tensor import Tensor
    shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
    msg = str(e)
    if isinstance(e, IndexError):
        return IndexError(f"{op.name}: {msg}")
    if "broadcast" in msg and len(shapes) >= 2:
        try:                        # name the first pair of operands that does not broadcast
            broadcast_shapes(*shapes)
        except RuntimeError as b:
            return b
        return RuntimeError(broadcast_error(shapes[0], shapes[1]))
    return RuntimeError(f"{op.name}: invalid arguments for input shapes {shapes}: {msg}")


# ---------------------------------------------------------------- shape-rule helpers shared by ops

def broadcast_error(a, b):
    a, b = tuple(a), tuple(b)
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            return (f"The size of tensor a ({pa[i]}) must match the size of tensor b ({pb[i]}) at "
                    f"non-singleton dimension {i} (shapes {list(a)} and {list(b)})")
    return f"shapes {list(a)} and {list(b)} cannot be broadcast together"


def broadcast_shapes(*shapes):
    out = ()
    for s in shapes:
        s = tuple(s)
        if s == out:
            continue
        n = max(len(out), len(s))
        pa, pb = (1,) * (n - len(out)) + out, (1,) * (n - len(s)) + s
        r = []
        for x, y in zip(pa, pb):
            if x == y or y == 1:
                r.append(x)
            elif x == 1:
                r.append(y)
            else:
                raise RuntimeError(broadcast_error(out, s))
        out = tuple(r)
    return out


def norm_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def norm_dims(dim, ndim):
    """None -> all dims; int or sequence -> sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    out = tuple(sorted(norm_dim(d, ndim) for d in dim))
    if len(set(out)) != len(out):       # PyTorch names the first dim given again (normalized)
        given = [norm_dim(d, ndim) for d in dim]
        d = next(d for i, d in enumerate(given) if d in given[:i])
        raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out if ndim else ()


def aval_of(x):
    """Shape/dtype of a tensor, tracer or Python scalar (scalars are 0-d with their weak dtype)."""
    if hasattr(x, "dtype") and isinstance(x.dtype, D.dtype):
        return x
    if isinstance(x, np.ndarray):
        return AVal(x.shape, D.from_numpy_dtype(x.dtype))
    return AVal((), D.result_type(x))
