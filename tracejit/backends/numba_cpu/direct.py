"""A generated kernel's serial function lowered to LLVM straight from its source, for the first calls of a program.

numba compiles a kernel in ~0.1-0.6 s, about half of it in its own Python (bytecode to IR, untyped passes, type
inference, lowering of its IR, the CPython wrapper) and half in LLVM. The generated kernels are a small subset of
Python (assignments, `for` over `range`, `if`, expressions of scalars, one-dimensional arrays indexed by one
integer or sliced, calls of the runtime's numba functions), so this module lowers them itself, statement by statement,
with numba's own typing and lowering of each operation (numba's `resolve_function_type` and `get_function`: the
same result types, casts and machine operations as numba's compile of the same source, and the runtime's
functions linked from numba's libraries, inlined as numba inlines them), into a library of numba's code generator
(the same target machine, optimization passes and vectorizer). What it skips is the part of numba that costs the
most Python: no bytecode analysis, no untyped passes, no type inference over the whole function, no wrapper.

A variable keeps the type of its first assignment (numba unifies them: a kernel whose variable changes type is
not lowered here, numba compiles it). Anything outside the subset raises `Unsupported`; the caller then uses numba.
The result is called through ctypes (~10-30 us a call: the numba kernel replaces it once compiled in the
background) and gives numba's bits: the same operations in the same order, no fast-math flags.
"""
import ast
import builtins
import ctypes
import hashlib
import logging
import operator
import os
import pickle

import numpy as np
from llvmlite import binding as ll
from llvmlite import ir
from numba.core import callconv, cgutils, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import cpu_target
from numba.np.arrayobj import populate_array
from numba.np.numpy_support import from_dtype
from numba import typeof

__all__ = ["DirectKernel", "Mismatch", "Unsupported", "arg_types", "key", "load", "lower_kernel", "save"]


_CTX = []          # numba's CPU target context as the generated kernels' options make it (error_model="numpy")
_TYPED = {}        # (function, argument types) -> numba's signature and implementation of the call


class Unsupported(Exception):
    """The kernel uses something this lowering does not handle (numba compiles it)."""


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.Pow: operator.pow}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}


def arg_types(args):
    """numba's types of a kernel call's arguments (numba.typeof, as its dispatcher types them): 1-d C-contiguous
    writable arrays, int64 and float64 scalars only."""
    out = []
    for a in args:
        t = typeof(a)
        if not (isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and t.mutable or
                t in (types.int64, types.float64)):
            raise Unsupported(f"argument of type {t}")
        out.append(t)
    return tuple(out)


def lower_kernel(source, namespace, fname, argtys, noalias=False):
    """The function `fname` of a kernel module's `source` (its globals: `namespace`) for numba argument types
    `argtys`, as a ctypes-callable: a DirectKernel. Raises Unsupported."""
    tree = ast.parse(source)
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fname), None)
    if fdef is None or fdef.args.vararg or fdef.args.kwarg or fdef.args.defaults or \
            len(fdef.args.args) != len(argtys):
        raise Unsupported("no such function, or not plain positional arguments")
    typingctx, base = cpu_target.typing_context, cpu_target.target_context
    with global_compiler_lock:
        if not _CTX:
            typingctx.refresh()
            base.refresh()
            _CTX.append(base.subtarget(enable_nrt=True, error_model=callconv.create_error_model("numpy", base)))
        ctx = _CTX[0]
        codegen = ctx.codegen()
        name = f"tjdirect_{fname}_{key(source, argtys, noalias)}"
        library = codegen.create_library(name)
        library.enable_object_caching()         # (for `save`)
        module = library.create_ir_module(name)
        inner_ty = ctx.call_conv.get_function_type(types.none, argtys)
        inner = cgutils.get_or_insert_function(module, inner_ty, name + "_inner")
        ctx.call_conv.decorate_function(inner, [a.arg for a in fdef.args.args], argtys, noalias=noalias)
        inner.attributes.add("alwaysinline")
        inner.linkage = "internal"
        try:
            with ctx.push_code_library(library):
                _Lowerer(ctx, typingctx, namespace, inner, fdef, argtys).lower()
                entry = _entry(ctx, module, inner, argtys, name)
            library.add_ir_module(module)
            library.finalize()
        except Unsupported:
            raise
        except Exception as e:          # (numba's lowering of something it types, LLVM's verifier: numba compiles)
            raise Unsupported(f"lowering failed: {type(e).__name__}: {e}") from e
    return DirectKernel(library, entry.name, argtys)


def key(source, argtys, noalias):
    """A lowered kernel's name: its source, argument types, options and the machine code's target."""
    text = repr((source, [str(t) for t in argtys], noalias, cpu_target.target_context.codegen().magic_tuple(),
                 ll.llvm_version_info))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def save(kernel, path):
    """Writes a lowered kernel's machine code (numba's serialized library) to `path`, atomically: a checksum, then
    the pickled (entry name, argument types, library)."""
    payload = pickle.dumps((kernel.entry, [str(t) for t in kernel.argtys],
                            kernel.library.serialize_using_object_code()))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path, key, argtys):
    """The kernel `save` wrote to `path` for `key` (its name ends with the key) and these argument types; None if
    there is none, or the file is not that (truncated, garbage, another kernel's: logged, lowered again)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    try:
        if hashlib.sha256(blob[32:]).digest() != blob[:32]:
            raise ValueError("checksum")
        entry, tys, data = pickle.loads(blob[32:])
        if not entry.endswith("_" + key) or tys != [str(t) for t in argtys]:
            raise ValueError("another kernel's")
    except Exception as e:
        logging.getLogger("tracejit").warning("tracejit: the direct kernel file %s is damaged (%s); lowering it "
                                              "again", path, e)
        return None
    with global_compiler_lock:
        library = cpu_target.target_context.codegen().unserialize_library(data)
    return DirectKernel(library, entry, argtys)


def _entry(ctx, module, inner, argtys, name):
    """`int32 name(args)`: an array as its data pointer and length, an int as int64, a float as double; calls
    the inner function with numba's array structures and returns its status (0: no error)."""
    ll_args = []
    for t in argtys:
        if isinstance(t, types.Array):
            ll_args += [ctx.get_data_type(t.dtype).as_pointer(), ir.IntType(64)]
        else:
            ll_args.append(ctx.get_value_type(t))
    fn = ir.Function(module, ir.FunctionType(ir.IntType(32), ll_args), name)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    vals, k = [], 0
    for t in argtys:
        if isinstance(t, types.Array):
            data, n = fn.args[k], fn.args[k + 1]
            k += 2
            ary = ctx.make_array(t)(ctx, builder)
            itemsize = ctx.get_constant(types.intp, ctx.get_abi_sizeof(ctx.get_data_type(t.dtype)))
            populate_array(ary, data=data, shape=[n], strides=[itemsize], itemsize=itemsize,
                           meminfo=cgutils.get_null_value(ary.meminfo.type))
            vals.append(ary._getvalue())
        else:
            vals.append(fn.args[k])
            k += 1
    status, _ = ctx.call_conv.call_function(builder, inner, types.none, argtys, vals)
    builder.ret(builder.select(status.is_ok, ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 1)))
    return fn


class DirectKernel:
    """A lowered kernel: called with the numba kernel's arguments (1-d contiguous arrays, ints, floats)."""

    def __init__(self, library, entry, argtys):
        self.library, self.entry, self.argtys = library, entry, argtys     # (the library keeps the code alive)
        c_args = []
        for t in argtys:
            c_args += [ctypes.c_void_p, ctypes.c_int64] if isinstance(t, types.Array) else \
                [ctypes.c_int64 if t == types.int64 else ctypes.c_double]
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *c_args)(library.get_pointer_to_function(entry))
        # per argument: an array's dtype, or the scalar's numba type
        self._kinds = [np.dtype(str(t.dtype)) if isinstance(t, types.Array) else t for t in argtys]

    def __call__(self, *args):
        """Runs the kernel; raises Mismatch (before running) if an argument is not of the types it was lowered
        for (the caller then calls numba's dispatcher, which compiles what it needs)."""
        flat = []
        for kind, a in zip(self._kinds, args):
            if isinstance(kind, types.Type):
                if isinstance(a, np.ndarray) or typeof(a) != kind:
                    raise Mismatch()
                flat.append(a)
            elif type(a) is np.ndarray and a.dtype == kind and a.ndim == 1 and a.flags.c_contiguous:
                flat += (a.ctypes.data, a.size)
            else:
                raise Mismatch()
        if self._cfunc(*flat):
            raise RuntimeError("a generated kernel raised an error")


class Mismatch(Exception):
    """A call's arguments are not of the types the kernel was lowered for."""


class _Lowerer:
    def __init__(self, ctx, typingctx, namespace, fn, fdef, argtys):
        self.ctx, self.typingctx, self.ns, self.fn, self.fdef = ctx, typingctx, namespace, fn, fdef
        self.builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.vars = {}                  # name -> (alloca, numba type)
        args = ctx.call_conv.decode_arguments(self.builder, argtys, fn)
        for a, t, v in zip(fdef.args.args, argtys, args):
            self._store(a.arg, v, t)

    def lower(self):
        self._block(self.fdef.body)
        if not self.builder.block.is_terminated:
            self.ctx.call_conv.return_value(self.builder, self.ctx.get_dummy_value())

    # -- statements
    def _block(self, stmts):
        for s in stmts:
            if self.builder.block.is_terminated:
                return
            self._stmt(s)

    def _stmt(self, s):
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported("chained assignment")
            val, ty = self._expr(s.value)
            self._assign(s.targets[0], val, ty)
        elif isinstance(s, ast.AugAssign):
            op = _BINOPS.get(type(s.op))     # (numba lowers x op= y of numbers as x = x op y)
            if op is None:
                raise Unsupported(f"augmented {type(s.op).__name__}")
            t = s.target
            if isinstance(t, ast.Name):
                cur = self._load(t.id)
            elif isinstance(t, ast.Subscript):
                cur = self._expr(t)
            else:
                raise Unsupported("augmented assignment target")
            rhs = self._expr(s.value)
            self._assign(t, *self._call(op, [cur, rhs]))
        elif isinstance(s, ast.For):
            self._for(s)
        elif isinstance(s, ast.If):
            self._if(s)
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):          # a docstring
                return
            self._expr(s.value)
        elif isinstance(s, ast.Return):
            if s.value is not None and not (isinstance(s.value, ast.Constant) and s.value.value is None):
                raise Unsupported("return of a value")
            self.ctx.call_conv.return_value(self.builder, self.ctx.get_dummy_value())
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def _assign(self, target, val, ty):
        if isinstance(target, ast.Name):
            self._store(target.id, val, ty)
        elif isinstance(target, ast.Subscript):
            ary = self._expr(target.value)
            idx = self._expr(target.slice)
            self._call(operator.setitem, [ary, idx, (val, ty)])
        else:
            raise Unsupported("assignment target")

    def _store(self, name, val, ty):
        if name not in self.vars:
            with self.builder.goto_entry_block():
                slot = self.builder.alloca(self.ctx.get_value_type(ty), name=name)
            self.vars[name] = (slot, ty)
        slot, vty = self.vars[name]
        if vty != ty:
            if isinstance(vty, types.Number) and isinstance(ty, types.Number) and \
                    self.typingctx.unify_types(vty, ty) == vty:
                val = self.ctx.cast(self.builder, val, ty, vty)
            else:
                raise Unsupported(f"variable {name} changes type ({vty} -> {ty})")
        self.builder.store(val, slot)

    def _load(self, name):
        slot, ty = self.vars[name]
        return self.builder.load(slot), ty

    def _for(self, s):
        it = s.iter
        if s.orelse or not isinstance(s.target, ast.Name) or not isinstance(it, ast.Call) or \
                not isinstance(it.func, ast.Name) or self.ns.get(it.func.id, range) is not range or it.keywords:
            raise Unsupported("for loop other than over range()")
        bounds = [self._int(a) for a in it.args]
        step = 1
        if len(bounds) == 3:
            a = it.args[2]
            if not (isinstance(a, ast.Constant) and type(a.value) is int and a.value > 0):
                raise Unsupported("range step other than a positive constant")
            step = a.value
            bounds = bounds[:2]
        if len(bounds) == 1:
            lo, hi = ir.Constant(ir.IntType(64), 0), bounds[0]
        elif len(bounds) == 2:
            lo, hi = bounds
        else:
            raise Unsupported("range() arguments")
        b = self.builder
        with b.goto_entry_block():
            iv = b.alloca(ir.IntType(64), name="iv." + s.target.id)
        b.store(lo, iv)
        cond = b.append_basic_block("for.cond")
        body = b.append_basic_block("for.body")
        end = b.append_basic_block("for.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.load(iv)
        b.cbranch(b.icmp_signed("<", i, hi), body, end)
        b.position_at_end(body)
        self._store(s.target.id, i, types.int64)
        self._block(s.body)
        if not b.block.is_terminated:
            b.store(b.add(b.load(iv), ir.Constant(ir.IntType(64), step)), iv)
            b.branch(cond)
        b.position_at_end(end)

    def _int(self, node):
        v, t = self._expr(node)
        if not isinstance(t, types.Integer):
            raise Unsupported("range() of a non-integer")
        return self.ctx.cast(self.builder, v, t, types.int64)

    def _truth(self, node):
        v, t = self._expr(node)
        return self.ctx.cast(self.builder, v, t, types.boolean)

    def _branch(self, test, name):
        """Branches on `test`: the (then, else, end) blocks, none of them entered yet."""
        b = self.builder
        c = self._truth(test)
        blocks = [b.append_basic_block(f"{name}.{part}") for part in ("then", "else", "end")]
        b.cbranch(c, blocks[0], blocks[1])
        return blocks

    def _if(self, s):
        b = self.builder
        then, other, end = self._branch(s.test, "if")
        for blk, stmts in ((then, s.body), (other, s.orelse)):
            b.position_at_end(blk)
            self._block(stmts)
            if not b.block.is_terminated:
                b.branch(end)
        b.position_at_end(end)

    # -- expressions: (llvm value, numba type)
    def _expr(self, e):
        if isinstance(e, ast.Constant):
            return self._const(e.value)
        if isinstance(e, ast.Name):
            if e.id in self.vars:
                return self._load(e.id)
            return self._global(e.id)
        if isinstance(e, ast.BinOp):
            op = _BINOPS.get(type(e.op))
            if op is None:
                raise Unsupported(f"operator {type(e.op).__name__}")
            return self._call(op, [self._expr(e.left), self._expr(e.right)])
        if isinstance(e, ast.UnaryOp):
            return self._call(_UNARY[type(e.op)], [self._expr(e.operand)])
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1 or type(e.ops[0]) not in _CMPOPS:
                raise Unsupported("chained or identity comparison")
            return self._call(_CMPOPS[type(e.ops[0])], [self._expr(e.left), self._expr(e.comparators[0])])
        if isinstance(e, ast.IfExp):
            return self._ifexp(e)
        if isinstance(e, ast.Subscript):
            return self._call(operator.getitem, [self._expr(e.value), self._expr(e.slice)])
        if isinstance(e, ast.Slice):            # a[lo:hi], as numba's IR has it: a[slice(lo, hi)]
            if e.lower is None or e.upper is None or e.step is not None:
                raise Unsupported("slice other than lo:hi")
            return self._call(slice, [self._expr(e.lower), self._expr(e.upper)])
        if isinstance(e, ast.Attribute):
            base = e.value
            if isinstance(base, ast.Name) and base.id in self.vars:
                v, t = self._load(base.id)
                rt = self.typingctx.resolve_getattr(t, e.attr)
                if rt is None:
                    raise Unsupported(f"attribute {e.attr} of {t}")
                impl = self.ctx.get_getattr(t, e.attr)
                return impl(self.ctx, self.builder, t, v, e.attr), rt
            return self._const(self._pyvalue(e))
        if isinstance(e, ast.Call):
            if e.keywords:
                raise Unsupported("keyword arguments")
            return self._call(self._pyvalue(e.func), [self._expr(a) for a in e.args])
        raise Unsupported(f"expression {type(e).__name__}")

    def _pyvalue(self, e):
        """The Python object a global name or dotted name (np.float32, numba.prange) stands for."""
        if isinstance(e, ast.Name):
            if e.id in self.vars:
                raise Unsupported("call of a variable")
            if e.id in self.ns:
                return self.ns[e.id]
            if hasattr(builtins, e.id):
                return getattr(builtins, e.id)
            raise Unsupported(f"unknown name {e.id}")
        if isinstance(e, ast.Attribute):
            return getattr(self._pyvalue(e.value), e.attr)
        raise Unsupported("call of an expression")

    def _global(self, name):
        return self._const(self._pyvalue(ast.Name(id=name)))

    def _const(self, v):
        if isinstance(v, (bool, np.bool_)):
            return self.ctx.get_constant(types.boolean, bool(v)), types.boolean
        if isinstance(v, int):
            return self.ctx.get_constant(types.int64, v), types.int64
        if isinstance(v, float):
            return self.ctx.get_constant(types.float64, v), types.float64
        if isinstance(v, (np.integer, np.floating)):
            t = from_dtype(v.dtype)
            return self.ctx.get_constant(t, v), t
        raise Unsupported(f"global value {type(v).__name__}")

    def _ifexp(self, e):
        b = self.builder
        then, other, end = self._branch(e.test, "ifx")
        b.position_at_end(then)
        v1, t1 = self._expr(e.body)
        then_end = b.block
        b.position_at_end(other)
        v2, t2 = self._expr(e.orelse)
        other_end = b.block
        ty = self.typingctx.unify_types(t1, t2)
        if ty is None:
            raise Unsupported(f"conditional of {t1} and {t2}")
        b.position_at_end(then_end)
        v1 = self.ctx.cast(b, v1, t1, ty)
        b.branch(end)
        b.position_at_end(other_end)
        v2 = self.ctx.cast(b, v2, t2, ty)
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(v1.type)
        phi.add_incoming(v1, then_end)
        phi.add_incoming(v2, other_end)
        return phi, ty

    def _resolve(self, fn, argtys):
        try:
            if isinstance(fn, types.Type) or getattr(fn, "__module__", None) in ("_operator", "operator"):
                key = fn                    # (operators: numba's typing and lowering take the function itself)
            elif fn is range:
                raise Unsupported("range() outside a for loop")
            else:
                key = self.typingctx.resolve_value_type(fn)
            sig = self.typingctx.resolve_function_type(key, argtys, {})
        except Unsupported:
            raise
        except Exception as err:
            raise Unsupported(f"typing {fn}{argtys}: {err}") from None
        if sig is None:
            raise Unsupported(f"no typing of {fn}{argtys}")
        if isinstance(sig.return_type, (types.Literal, types.Optional)):
            raise Unsupported(f"{fn}{argtys} returns {sig.return_type}")
        try:
            return sig, self.ctx.get_function(key, sig)
        except Exception as err:
            raise Unsupported(f"lowering {fn}{argtys}: {err}") from None

    def _call(self, fn, args):
        """numba's typing and lowering of `fn(*args)`: an operator, a numpy function or scalar type, a builtin,
        or a numba function (its library linked to ours)."""
        argtys = tuple(t for _, t in args)
        try:
            memo = (fn, argtys)
            hash(memo)
        except TypeError:
            memo = None
        found = _TYPED.get(memo) if memo is not None else None
        if found is None:
            found = self._resolve(fn, argtys)
            if memo is not None:
                _TYPED[memo] = found
        sig, impl = found
        vals = [self.ctx.cast(self.builder, v, t, at) for (v, t), at in zip(args, sig.args)]
        return impl(self.builder, vals), sig.return_type
