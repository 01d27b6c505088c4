"""Tracing a function into a graph of its own inside a trace: the body of a loop (tracejit.scan).

`BodyTrace` is a TraceContext whose graph is the body; tensors the function reads from outside (tracers of the
enclosing trace, or module parameters, which the enclosing trace lifts) become inputs of the body, its
*captures*, one per value, in the order first read. Outside any trace (`outer` None) the real tensors it reads
are the captures. The body is traced without autograd recording: it is a pure function of its inputs,
differentiated later as a whole (ops/control.py).
"""
from .._tensor import Tensor
from .tracer import TraceContext


class BodyTrace(TraceContext):
    def __init__(self, outer):
        super().__init__()
        self.outer = outer
        self.captures = []       # the tensors from outside, one per capture input
        self._values = []        # what each stood for when first read (the value of a tracer; None: a real tensor)
        self._index = {}         # id(its value in the enclosing trace), or id(tensor) outside any -> capture input

    def value_of(self, a):
        if not isinstance(a, Tensor) or (a._data is None and a._value.graph is self.graph) or \
                (a._data is not None and a._serial > self.start_serial):
            return super().value_of(a)
        ov = self.outer.value_of(a) if self.outer is not None else None
        key = id(ov) if ov is not None else id(a)
        v = self._index.get(key)
        if v is None:
            shape = a._value.shape if a._data is None else a._data.shape
            v = self._index[key] = self.graph.add_input(shape, a.dtype, f"capture{len(self.captures)}")
            self.captures.append(a)
            self._values.append(a._value if a._data is None else None)
        return v

    # what the body reads of Python state guards the enclosing program (a module's training flag, an lr)
    def note_module(self, m):
        (self.outer if self.outer is not None else super()).note_module(m)

    def guard_value(self, container, key, value):
        (self.outer if self.outer is not None else super()).guard_value(container, key, value)

    def check_captures(self, what):
        """The captured tensors still stand for what they stood for: the body updated none of them in place."""
        mine = {id(t) for t in self.captures}
        changed = any(id(t) in mine for t, _ in self.adopted)           # a real tensor (outer None)
        for t, ov in zip(self.captures, self._values):
            if ov is not None and t._value is not ov:                   # a tracer of the enclosing trace
                t._value = ov
                changed = True
        if changed:
            raise RuntimeError(f"{what}: the function updated a tensor from outside it in place (an optimizer "
                               f"step, x.add_(...), a buffer); a loop body must be a pure function of its carry, "
                               f"its x and what it reads")


def trace_body(fn, inputs, outer):
    """Trace `fn(*tracers)` for `inputs` ((shape, dtype, name) each): (the BodyTrace, whose graph's inputs are
    `inputs` then the captures, and fn's result, tracers of that graph). The graph's outputs are the caller's to
    set (ctx.value_of of the result's tensors)."""
    from ..autograd.grad_mode import no_grad
    with BodyTrace(outer) as ctx:
        ts = [ctx.tracer(ctx.graph.add_input(shape, dtype, name)) for shape, dtype, name in inputs]
        with no_grad():
            out = fn(*ts)
    return ctx, out
