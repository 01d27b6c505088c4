"""Direct float32 convolutions by register tiles: no column matrix in memory, no BLAS call, no transposed copy.

kernels/cpu/conv.py copies the input into a column matrix kh*kw times its size (im2col, memory-bound) and hands
the products, short and wide ((16 x 144) @ (144 x 16384) for a 16-channel 3x3 layer), to OpenBLAS, which runs
them at 50-60 GFLOP/s on one core of an AMD EPYC (znver3, AVX2). Here one tile written in LLVM IR (`_outer`)
multiplies: rows r < MR of C[r, :NR] (+)= sum over t of A[t, r] * B[t, :NR], NR = 16 floats as two 8-float
vectors, MR x 2 accumulators in registers, one broadcast of A and two vector loads of B per step (70-80 GFLOP/s
on the same core when B sits in L1). B is a *panel*: the columns of NR consecutive output positions of one image
(K = C*kh*kw rows of NR), built in a small buffer from the zero-padded input just before use (`_panel`: runs of
contiguous input). A convolution strided along the width reads its input as column planes (`planes`: plane p
holds the padded columns p, p + S, ...), so that each kernel column is again a contiguous run of one plane.

- forward: C = out[n, o-block, panel], A = the weights (O, K);
- weight gradient: C = dw^T (K, 16 output channels) summed over every position, B = 16 output channels of g at a
  position (g laid out (positions, O rounded up to 16)), A = MR input channels at one tap read in place (or, for
  inputs of fewer channels, a panel);
- input gradient (stride 1): the forward convolution of the padded g with the flipped, transposed weights;
- 3x3 kernels of stride 1: Winograd's F(2x2, 3x3) (`_wino`, `_wino_weight_grad`), its 16 products `_outer`
  tiles too, for any even output size (`winograd`).

Used where `direct` holds (float32, one group, more than one tap, the output width a multiple or a divisor of
NR, or a shape Winograd computes); else conv.py's products. A tile row is two vectors of 8 floats (LANES = 8:
AVX2; LLVM lowers a vector to two SSE registers without AVX, and `llvm.fmuladd` to a multiply and an add without
FMA), or, where numba compiles for
512-bit vectors (AVX-512: `vector_info`), one vector of 16 (LANES = 16) with MR = 16 rows: 16 accumulators of
AVX-512's 32 registers. TRACEJIT_CONV_LANES=8 or 16 overrides the choice (16 on an AVX2 CPU runs, split by LLVM
into halves, slowly: for testing that code here); an override compiles these kernels without numba's disk cache,
whose key would not tell the two apart.
"""
import os

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import threads, vector_info
from .conv import conv_out_size
from .rows import prefetch_l2, prefetch_write


NR = 16          # output positions per panel (a tile's row: NR // LANES vectors)
VL = 8           # floats per vector of the 8-float helpers (_transpose8)
_NATURAL_LANES = 16 if vector_info()["vector_bits"] >= 512 else 8
LANES = int(os.environ.get("TRACEJIT_CONV_LANES", "").strip() or _NATURAL_LANES)
if LANES not in (8, 16):
    raise ValueError(f"TRACEJIT_CONV_LANES={LANES}: choose 8 or 16 (floats per vector of the convolution tiles)")
_CACHE = LANES == _NATURAL_LANES
ENABLED = True   # tests turn it off to reach kernels/cpu/conv.py's BLAS products for every shape
WINOGRAD = True  # tests turn it off to reach the direct tiles where `winograd` would take a convolution
WIDE = 64        # positions per panel of the weight gradient (its tiles' reduction)
# rows of an `_outer` tile: at 8 lanes 6 (12 accumulators; 4 left too few in flight: 63 vs 75 GFLOP/s, AMD EPYC
# znver3), at 16 lanes 16 (16 accumulators; two FMA units of 4 cycles' latency need 8 in flight)
MR = 6 if LANES == 8 else 16


def direct(dtype, groups, stride, padding, dilation, kernel, out_size, channels=None):
    """Whether a convolution (its forward and weight gradient) runs here: float32, one group, a kernel of more
    than one tap (a 1x1 convolution's columns are the input itself: BLAS's product was 2-3x faster there), an
    output of OH x OW positions with OW a multiple or a divisor of NR and OH*OW a multiple of NR; any strides. Or,
    given channels (C, O), where Winograd computes both (`winograd_all`: any even output size)."""
    OH, OW = out_size
    return _float32_ungrouped(dtype, groups) and (
        kernel[0] * kernel[1] > 1 and OH * OW > 0 and OH * OW % NR == 0 and (OW % NR == 0 or NR % OW == 0) or
        channels is not None and winograd_all(kernel, stride, dilation, channels, out_size))


def _float32_ungrouped(dtype, groups):
    return ENABLED and np.dtype(dtype) == np.float32 and groups == 1


def direct_input_grad(dtype, groups, stride, padding, dilation, kernel, input_size, channels=None):
    """Whether the input gradient runs here. Stride 1: a forward convolution producing the input's size, g padded
    by dilation*(kernel-1) - padding >= 0, one `direct` takes or, given channels (C, O), Winograd (of g's O
    channels). Strided: `_input_grad_cols`, where g's size is one `direct` takes (any kernel, 1x1 too)."""
    if stride == (1, 1):
        return all(d * (k - 1) >= p for d, k, p in zip(dilation, kernel, padding)) and \
            (direct(dtype, groups, stride, padding, dilation, kernel, input_size) or channels is not None and
             _float32_ungrouped(dtype, groups) and winograd(kernel, stride, dilation, channels[::-1], input_size))
    out_size = [conv_out_size(*a) for a in zip(input_size, kernel, stride, padding, dilation)]
    return direct(dtype, groups, stride, padding, dilation, (2, 1), out_size)


def _ir_types(width=VL):
    f32 = ir.FloatType()
    vt = ir.VectorType(f32, width)
    return f32, vt, ir.IntType(64)


def _fmuladd(builder, width):
    _, vt, _ = _ir_types(width)
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fmuladd.v{width}f32")


def _vload(builder, p, k, width):
    _, vt, i64 = _ir_types(width)
    return builder.load(builder.bitcast(builder.gep(p, [ir.Constant(i64, k)]), vt.as_pointer()), align=4)


def _vstore(builder, v, p, k):
    _, _, i64 = _ir_types()
    builder.store(v, builder.bitcast(builder.gep(p, [ir.Constant(i64, k)]), v.type.as_pointer()), align=4)


def _counted_loop(builder, n, carried, body):
    """for t in range(n): carried = body(t, carried); returns the final values (the initial ones when n <= 0)."""
    _, _, i64 = _ir_types()
    pre = builder.block
    loop, done = builder.append_basic_block("tile.loop"), builder.append_basic_block("tile.done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    t = builder.phi(i64)
    phis = [builder.phi(v.type) for v in carried]
    new = body(t, phis)
    t1 = builder.add(t, ir.Constant(i64, 1))
    end = builder.block
    t.add_incoming(ir.Constant(i64, 0), pre)
    t.add_incoming(t1, end)
    for p, v0, v1 in zip(phis, carried, new):
        p.add_incoming(v0, pre)
        p.add_incoming(v1, end)
    builder.cbranch(builder.icmp_signed("<", t1, n), loop, done)
    builder.position_at_end(done)
    out = [builder.phi(v.type) for v in carried]
    for p, v0, v1 in zip(out, carried, new):
        p.add_incoming(v0, pre)
        p.add_incoming(v1, end)
    return out


def _literal(t):
    return t.literal_value if isinstance(t, types.IntegerLiteral) else None


@intrinsic(prefer_literal=True)
def _outer(typingctx, a, a0, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0, c_r, q, mr, add, unroll):
    """C[c0 + r*c_r : +NR] (+)= sum over t of A[a0 + t.a_s + r*a_r] * B[b0 + t.b_s : +8, and b_h beyond : +8] for
    r < mr, t running over the three-level index range q (a_s, b_s: the strides per level): a reduction over
    (channel, kernel row, kernel column), or the weight gradient's (image, row, column), read in place. a, b, c
    are float32 arrays read and written through their data pointers (offsets and strides in floats, unchecked);
    `mr`, `add` (0: set C, 1: add to it) and `unroll` literals; B's row is two runs of 8 floats, the second b_h floats
    after the first: two vectors (LANES 8) or one, joined by a shuffle (LANES 16; a 512-bit insert per step).
    unroll > 0: the last level has that many steps, unrolled (a 3x3 kernel's three columns: the forward of the
    ResNet bench's 16-channel layer 1.50 -> 0.97 ms, one thread, AMD EPYC znver3; a loop of three steps
    mispredicts its exit), step j's B at the offset b_j[j] (the column planes of a strided convolution, see
    `planes`) or, b_j None, j*b_s[2] (three offsets held in registers slowed a stride-1 forward by ~8%: the
    32-channel 8x8 layer 0.97 -> 1.07 ms, AMD EPYC znver3)."""
    rows, adds, unrolled = _literal(mr), _literal(add), _literal(unroll)
    if rows is None or adds is None or unrolled is None or not 1 <= rows <= 16 or \
            not all(isinstance(t, types.Array) and t.dtype == types.float32 for t in (a, b, c)):
        return None
    sig = types.void(a, a0, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0, c_r, q, mr, add, unroll)

    def codegen(context, builder, sig, args):
        f32, vt, i64 = _ir_types(LANES)
        per_row = NR // LANES
        (A, a0, a_s, a_r, B, b0, b_s, b_j, b_h, C, c0, c_r, q) = args[:13]
        ints = lambda v: builder.sext(v, i64) if v.type.width < 64 else v      # noqa: E731
        levels = lambda tup: [ints(builder.extract_value(tup, d)) for d in range(3)]   # noqa: E731
        a_s, b_s, q = levels(a_s), levels(b_s), levels(q)
        b_j = None if isinstance(sig.args[7], types.NoneType) else \
            [ints(builder.extract_value(b_j, j)) for j in range(unrolled)]
        a_r, b_h, c_r = ints(a_r), ints(b_h), ints(c_r)
        av, bv, cv = [builder.gep(context.make_array(sig.args[k])(context, builder, arr).data, [ints(o)])
                      for k, arr, o in ((0, A, a0), (4, B, b0), (9, C, c0))]
        fma = _fmuladd(builder, LANES)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
        zero = ir.Constant(vt, [0.0] * LANES)
        join = ir.Constant(ir.VectorType(ir.IntType(32), NR), list(range(NR)))

        def step(ap, bp, acc):
            bs = [_vload(builder, bp, 0, 8), _vload(builder, builder.gep(bp, [b_h]), 0, 8)]
            if per_row == 1:
                bs = [builder.shuffle_vector(bs[0], bs[1], join)]
            out = []
            for r in range(rows):
                s = builder.load(builder.gep(ap, [builder.mul(a_r, ir.Constant(i64, r))]))
                v = builder.shuffle_vector(builder.insert_element(ir.Constant(vt, ir.Undefined), s,
                                                                  ir.Constant(ir.IntType(32), 0)),
                                           ir.Constant(vt, ir.Undefined), splat)
                out += [builder.call(fma, [v, bs[h], acc[per_row * r + h]]) for h in range(per_row)]
            return out

        def level(d, ap, bp, acc):
            if d == 3:
                return step(ap, bp, acc)
            if d == 2 and unrolled:
                for j in range(unrolled):
                    acc = step(builder.gep(ap, [builder.mul(ir.Constant(i64, j), a_s[2])]),
                               builder.gep(bp, [builder.mul(ir.Constant(i64, j), b_s[2]) if b_j is None else b_j[j]]),
                               acc)
                return acc
            return _counted_loop(builder, q[d], acc, lambda t, acc: level(
                d + 1, builder.gep(ap, [builder.mul(t, a_s[d])]), builder.gep(bp, [builder.mul(t, b_s[d])]), acc))

        cps = [builder.gep(cv, [builder.mul(c_r, ir.Constant(i64, r))]) for r in range(rows)]
        init = [_vload(builder, cp, h * LANES, LANES) if adds else zero for cp in cps for h in range(per_row)]
        acc = level(0, av, bv, init)
        for r, cp in enumerate(cps):
            for h in range(per_row):
                _vstore(builder, acc[per_row * r + h], cp, h * LANES)
        return context.get_dummy_value()
    return sig, codegen


def _rows(add, unroll=0):
    def rows(a, a0, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0, c_r, q, m):
        """`_outer` over m rows: tiles of MR, then a tail of (8,) 4, 2, 1 (`add`, `unroll`: _outer's)."""
        r = 0
        while r + MR <= m:
            _outer(a, a0 + r * a_r, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0 + r * c_r, c_r, q, MR, add, unroll)
            r += MR
        if MR > 8:          # (pruned by numba where MR is 6: the 8-row tile's code was dead there)
            if m - r >= 8:
                _outer(a, a0 + r * a_r, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0 + r * c_r, c_r, q, 8, add, unroll)
                r += 8
        if m - r >= 4:
            _outer(a, a0 + r * a_r, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0 + r * c_r, c_r, q, 4, add, unroll)
            r += 4
        if m - r >= 2:
            _outer(a, a0 + r * a_r, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0 + r * c_r, c_r, q, 2, add, unroll)
            r += 2
        if m - r >= 1:
            _outer(a, a0 + r * a_r, a_s, a_r, b, b0, b_s, b_j, b_h, c, c0 + r * c_r, c_r, q, 1, add, unroll)
    return numba.njit(cache=_CACHE, nogil=True, inline="always")(rows)


_outer_rows, _outer_rows_add, _outer_rows3 = _rows(0), _rows(1), _rows(0, 3)
_outer_rows_add16, _outer_rows_add8, _outer_rows_add4 = _rows(1, 16), _rows(1, 8), _rows(1, 4)


def _width(n, *arrays):
    """The literal n where every array is float32 (what the vector intrinsics below take), else None."""
    w = _literal(n)
    return w if w is not None and all(isinstance(t, types.Array) and t.dtype == types.float32 for t in arrays) \
        else None


def _vector_move(add):
    @intrinsic(prefer_literal=True)
    def move(typingctx, dst, d0, src, s0, n):
        width = _width(n, dst, src)
        if width is None:
            return None

        def codegen(context, builder, sig, args):
            d, s = [_vptr(builder, _data(context, builder, sig, args, k), args[k + 1], width) for k in (0, 2)]
            v = builder.load(s, align=4)
            builder.store(builder.fadd(builder.load(d, align=4), v) if add else v, d, align=4)
            return context.get_dummy_value()
        return types.void(dst, d0, src, s0, n), codegen
    return move


# dst[d0 : d0+n] = src[s0 : s0+n], and dst[d0 : d0+n] += src[s0 : s0+n], as vectors; n a literal (float32
# arrays, unchecked)
_move, _addv = _vector_move(False), _vector_move(True)


def _tap(j, dw, S, plane):
    """Where kernel column j reads in the column planes of `planes` (S of them, plane floats apart)."""
    return (j * dw) % S * plane + (j * dw) // S


def _panel(xp, g0, width, P, kh, kw, sh, dh, taps, OW, runs, panel):
    """panel[k*width + t] = the column row k = (c, i, j) of output position g0 + t (counted over the whole batch,
    P positions an image), read from the padded input's column planes xp (N, C, S, Hp, Wq) in runs of
    L = min(OW, NR) contiguous floats (`runs`: their offsets; `taps`: kernel column j's offset, `_tap`)."""
    C, S, Hp, Wq = xp.shape[1], xp.shape[2], xp.shape[3], xp.shape[4]
    src = xp.reshape(-1)
    L = OW if OW < NR else NR
    for q in range(width // L):
        n, pp = (g0 + q * L) // P, (g0 + q * L) % P
        runs[q] = (n * C * S * Hp + pp // OW * sh) * Wq + pp % OW
    k = 0
    for c in range(C):
        for i in range(kh):
            for j in range(kw):
                base = (c * S * Hp + i * dh) * Wq + taps[j]
                d = k * width
                if L == NR:
                    for q in range(width // NR):
                        _move(panel, d + q * NR, src, base + runs[q], 16)
                elif L == 8:
                    for q in range(width // 8):
                        _move(panel, d + q * 8, src, base + runs[q], 8)
                elif L == 4:
                    for q in range(width // 4):
                        _move(panel, d + q * 4, src, base + runs[q], 4)
                else:
                    for q in range(width // L):
                        for t in range(L):
                            panel[d + q * L + t] = src[base + runs[q] + t]
                k += 1


def _int64(builder, v):
    return builder.sext(v, ir.IntType(64)) if v.type.width < 64 else v


def _vptr(builder, p, off, width):
    """The float pointer p advanced by `off` floats, as a pointer to a vector of `width` floats."""
    return builder.bitcast(builder.gep(p, [_int64(builder, off)]), ir.VectorType(ir.FloatType(), width).as_pointer())


def _index(v):
    """The shuffle mask (an i32 vector constant) of the lane indices v."""
    return ir.Constant(ir.VectorType(ir.IntType(32), len(v)), list(v))


def _interleave(builder, a, b):
    """The vector a[0], b[0], a[1], b[1], ... of two vectors of n floats."""
    n = a.type.count
    return builder.shuffle_vector(a, b, _index([k // 2 + k % 2 * n for k in range(2 * n)]))


def _data(context, builder, sig, args, k):
    """The data pointer of the array argument k of an intrinsic."""
    return context.make_array(sig.args[k])(context, builder, args[k]).data


@intrinsic(prefer_literal=True)
def _split2(typingctx, dst, d0, d1, src, s0, n):
    """dst[d0 : d0+n] = src[s0 : s0+2n : 2] and dst[d1 : d1+n] = src[s0+1 : s0+2n : 2]: one vector load, two shuffles,
    two stores; n a literal (float32 arrays, unchecked)."""
    width = _width(n, dst, src)
    if width is None:
        return None
    sig = types.void(dst, d0, d1, src, s0, n)

    def codegen(context, builder, sig, args):
        dp, sp = _data(context, builder, sig, args, 0), _data(context, builder, sig, args, 3)
        v = builder.load(_vptr(builder, sp, args[4], 2 * width), align=4)
        for k, off in ((0, args[1]), (1, args[2])):
            half = builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), _index(range(k, 2 * width, 2)))
            builder.store(half, _vptr(builder, dp, off, width), align=4)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic(prefer_literal=True)
def _merge2(typingctx, dst, d0, src, s0, s1, n):
    """dst[d0 : d0+2n : 2] = src[s0 : s0+n] and dst[d0+1 : d0+2n : 2] = src[s1 : s1+n] (`_split2` undone): two
    vector loads, one shuffle, one store; n a literal (float32 arrays, unchecked)."""
    width = _width(n, dst, src)
    if width is None:
        return None
    sig = types.void(dst, d0, src, s0, s1, n)

    def codegen(context, builder, sig, args):
        sp = _data(context, builder, sig, args, 2)
        a, b = [builder.load(_vptr(builder, sp, o, width), align=4) for o in (args[3], args[4])]
        v = _interleave(builder, a, b)
        builder.store(v, _vptr(builder, _data(context, builder, sig, args, 0), args[1], 2 * width), align=4)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _transpose8(typingctx, dst, d0, ds, src, s0, ss):
    """dst[d0 + i*ds + j] = src[s0 + j*ss + i] for i, j < 8: eight vector loads, three rounds of shuffles (pairs of
    rows, pairs of pairs, 128-bit halves), eight stores (float32 arrays, unchecked)."""
    if not all(isinstance(t, types.Array) and t.dtype == types.float32 for t in (dst, src)):
        return None
    sig = types.void(dst, d0, ds, src, s0, ss)

    def codegen(context, builder, sig, args):
        f32, vt, i64 = _ir_types()
        dp, sp = _data(context, builder, sig, args, 0), _data(context, builder, sig, args, 3)
        d0, ds, s0, ss = (_int64(builder, a) for a in (args[1], args[2], args[4], args[5]))
        at = lambda p, o, st, r: builder.bitcast(builder.gep(p, [builder.add(o, builder.mul(st, ir.Constant(i64, r)))]),
                                                 vt.as_pointer())                                       # noqa: E731
        shuf = lambda a, b, idx: builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), VL), idx))  # noqa: E731
        rows = [builder.load(at(sp, s0, ss, r), align=4) for r in range(8)]
        t = [shuf(rows[2 * k], rows[2 * k + 1], idx) for idx in ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])
             for k in range(4)]
        u = [shuf(a, b, idx) for a, b in ((t[0], t[1]), (t[2], t[3]), (t[4], t[5]), (t[6], t[7]))
             for idx in ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])]
        # u: columns (0, 4), (1, 5) of rows 0-3, the same of rows 4-7, then columns (2, 6), (3, 7) likewise
        halves = [shuf(u[a], u[a + 2], idx) for idx in ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])
                  for a in (0, 1, 4, 5)]
        for i, v in enumerate(halves):
            builder.store(v, at(dp, d0, ds, i), align=4)
        return context.get_dummy_value()
    return sig, codegen


def _fill(x, ph, pw, out):
    """out (N, C, S, Hp, Wq) = x zero-padded as column planes (`planes`), one image's planes a task: zeroed, then
    each input row moved in vectors of 16, 8, 4 floats (S = 1) or split into the two planes (S = 2: a vector of 16
    floats, its even and odd lanes), the rest one float at a time."""
    N, C, H, W = x.shape
    S, Hp, Wq = out.shape[2], out.shape[3], out.shape[4]
    src, dst = x.reshape(-1), out.reshape(-1)
    plane, block = Hp * Wq, S * Hp * Wq
    for m in range(N * C):
        for t in range(block):
            dst[m * block + t] = 0
        for h in range(H):
            s, row = (m * H + h) * W, m * block + (ph + h) * Wq
            k = 0
            if S == 1:
                for k in range(0, W - 15, 16):
                    _move(dst, row + pw + k, src, s + k, 16)
                k = W // 16 * 16
                if k + 8 <= W:
                    _move(dst, row + pw + k, src, s + k, 8)
                    k += 8
                if k + 4 <= W:
                    _move(dst, row + pw + k, src, s + k, 4)
                    k += 4
            elif S == 2:      # columns k, k + 2, ... land in plane pw % 2, k + 1, k + 3, ... in the other
                e, o = row + pw % 2 * plane + pw // 2, row + (pw + 1) % 2 * plane + (pw + 1) // 2
                for k in range(0, W - 15, 16):
                    _split2(dst, e + k // 2, o + k // 2, src, s + k, 8)
                k = W // 16 * 16
                if k + 8 <= W:
                    _split2(dst, e + k // 2, o + k // 2, src, s + k, 4)
                    k += 8
                if k + 4 <= W:
                    _split2(dst, e + k // 2, o + k // 2, src, s + k, 2)
                    k += 4
            for w in range(k, W):
                c = w + pw
                dst[row + c % S * plane + c // S] = src[s + w]


def _ahead(a, lo, hi, k, m, write):
    """Prefetches share k of m of a[lo:hi] (1-d float32), a line of 16 floats at a time, into the outer caches
    (`write`: for writing): a kernel that works on one image after another fetches the next image's data in m
    pieces while it works on this one's m blocks. Each image started a dozen new streams (one per channel read or
    written) that the hardware prefetcher took lines to follow: the ResNet bench's 16-channel 16x16 forward with its
    data out of the caches 1.69 -> 1.11 ms (0.93 with it in the caches, unchanged); in its step at one thread the
    forward convolutions 5.64 -> 5.10 ms, the weight gradients 6.40 -> 5.75 (with each block's g transposed just
    before use, in L1, instead of the part's at once), the step 24.9 -> 23.7 ms (AMD EPYC znver4)."""
    lines = (hi - lo + 15) // 16
    per = (lines + m - 1) // m
    for t in range(k * per, min(lines, (k + 1) * per)):
        if write:
            prefetch_write(a, lo + t * 16)
        else:
            prefetch_l2(a, lo + t * 16)


def _forward(x, ph, pw, xp, w, bias, kh, kw, sh, dh, dw, out):
    """out (N, O, OH, OW) = the convolution of the padded input's column planes xp with w (O, K), plus bias
    (size 0: none). Output rows of 16 or 8 positions are read in place from xp (one or two image rows per tile
    row; with S > 1 planes, for kernels 3 wide); others through a panel. x (N, C, H, W), unless its size is 0:
    each image's planes are first filled from it (`_fill`, padding (ph, pw)), so that the copy runs on the
    threads that use it while its data is in their caches: the ResNet bench's 16-channel layer at two threads,
    the copy and the convolution, 0.77 -> 0.54 ms; its step at two threads 15.0 -> 14.7 ms, one thread the same
    (one process, the two programs alternated; AMD EPYC znver4). Filling, it fetches the next image of x ahead,
    not the planes it is about to overwrite: 0.66 -> 0.57 ms there (two threads, data in the caches)."""
    N, O, OH, OW = out.shape
    C, S, Hp, Wq = xp.shape[1], xp.shape[2], xp.shape[3], xp.shape[4]
    P, K = OH * OW, w.shape[1]
    o = out.reshape(N, O, P)
    src = xp.reshape(-1)
    wsteps, bsteps = (kh * kw, kw, 1), (S * Hp * Wq, dh * Wq, dw)
    taps = np.array([_tap(j, dw, S, Hp * Wq) for j in range(max(kw, 3))])
    taps3 = (taps[0], taps[1], taps[2])
    inplace = (OW % NR == 0 or OW == 8) and (S == 1 or kw == 3)
    img, of, blocks = C * S * Hp * Wq, out.reshape(-1), P // NR
    xf, xi = x.reshape(-1), x.size // N if x.size else 0
    for n in prange(N):
        if x.size:
            _fill(x[n:n + 1], ph, pw, xp[n:n + 1])
        panel = np.empty(K * NR, np.float32)
        runs = np.empty(NR, np.int64)
        for pb in range(blocks):
            if n + 1 < N:       # the next image's input and output, a share at every block of this one
                if x.size:      # (its planes are still to be filled: their source instead)
                    _ahead(xf, (n + 1) * xi, (n + 2) * xi, pb, blocks, False)
                else:
                    _ahead(src, (n + 1) * img, (n + 2) * img, pb, blocks, False)
                _ahead(of, (n + 1) * O * P, (n + 2) * O * P, pb, blocks, True)
            if inplace:
                b0, half = (n * C * S * Hp + pb * NR // OW * sh) * Wq + pb * NR % OW, 8 if OW != 8 else sh * Wq
                if kw == 3 and S > 1:
                    _outer_rows3(w, 0, wsteps, K, src, b0, bsteps, taps3, half, o, n * O * P + pb * NR, P,
                                 (C, kh, kw), O)
                elif kw == 3:
                    _outer_rows3(w, 0, wsteps, K, src, b0, bsteps, None, half, o, n * O * P + pb * NR, P,
                                 (C, kh, kw), O)
                else:
                    _outer_rows(w, 0, wsteps, K, src, b0, bsteps, None, half, o, n * O * P + pb * NR, P,
                                (C, kh, kw), O)
            else:
                _panel(xp, n * P + pb * NR, NR, P, kh, kw, sh, dh, taps, OW, runs, panel)
                _outer_rows(w, 0, (0, 0, 1), K, panel, 0, (0, 0, NR), None, 8, o, n * O * P + pb * NR, P,
                            (1, 1, K), O)
        if bias.size:
            for c in range(O):
                bc = bias[c]
                for t in range(P):
                    o[n, c, t] += bc


def _g_positions(gf, n0, count, O, P, O16, gd):
    """gd[(n*P + t)*O16 + c] = g[n0 + n, c, t] for n < count (g flat as gf, (N, O, P)): 8x8 blocks transposed in
    registers (the ResNet bench's 16-channel layer 0.100 -> 0.045 ms, AMD EPYC znver3)."""
    for n in range(count):
        for c in range(0, O - 7, 8):
            for t in range(0, P - 7, 8):
                _transpose8(gd, (n * P + t) * O16 + c, O16, gf, ((n0 + n) * O + c) * P + t, P)
        for c in range(O):
            for t in range(P // 8 * 8 if c < O // 8 * 8 else 0, P):
                gd[(n * P + t) * O16 + c] = gf[((n0 + n) * O + c) * P + t]


def _weight_grad(xp, g, kh, kw, sh, dh, dw, outs):
    """outs[p] (O, K) = sum over the positions of images N*p//parts .. N*(p+1)//parts (parts = len(outs)) of g (N,
    O, OH, OW) times the columns, as its transpose (K, O): tiles of (K rows x 16 channels) added into a (K, O
    rounded up to 16) sum, g laid out as (positions, O rounded up, zeros beyond O) a block at a time. With at least
    MR input channels a tile's rows are MR channels at one kernel tap, read in place from the planes (blocks of
    images of up to 256 positions and 16 KB from the part's first, the reduction over (image, row, column) with
    the row's OW columns unrolled where OW is 16, 8 or 4); with fewer, rows of a panel of WIDE positions (`_panel`:
    a 3-channel input would fill a tile's rows poorly). A part gives the same bits computed here or as a slice of
    the batch on its own. In place vs panels, 64x16x16x16 input, 16 output channels: 0.94 vs 1.16 ms; 32
    channels 8x8: 0.94 vs 0.98; 3 channels: 0.52 vs 0.35 (one thread, AMD EPYC znver3)."""
    N, O, OH, OW = g.shape
    C, S, Hp, Wq = xp.shape[1], xp.shape[2], xp.shape[3], xp.shape[4]
    P, K, kk, parts = OH * OW, outs.shape[2], kh * kw, outs.shape[0]
    O16 = (O + NR - 1) // NR * NR
    taps = np.array([_tap(j, dw, S, Hp * Wq) for j in range(kw)])
    inplace = C >= MR
    src, img = xp.reshape(-1), C * S * Hp * Wq
    a_s, a_r, b_s = (img, sh * Wq, 1), S * Hp * Wq, (P * O16, OW * O16, O16)
    # images per block in place: up to 256 positions, and no more than 16 KB of planes (they stay in L1 over the
    # block's 9 taps; 256 positions alone made blocks of 83-205 KB in the strided layers: the 16 -> 32 channel
    # layer's weight gradient 0.58 -> 0.51 ms, 32 -> 64 0.61 -> 0.56, one thread, AMD EPYC znver4; the same bits)
    nb = max(1, min(256 // P, 4096 // img)) if inplace else 1
    gf = g.reshape(-1)
    for part in prange(parts):
        lo, hi = N * part // parts, N * (part + 1) // parts
        n_img = hi - lo
        # g as (positions, channels), each block's (image's) in turn where blocks are whole images (it stays in
        # L1), else the part's at once. The 3-channel layer of the ResNet bench by panels, the image's g in L1
        # and the next image fetched ahead: 0.37 -> 0.30 ms, 0.62 -> 0.47 with its data out of the caches (one
        # thread, AMD EPYC znver4; the same bits)
        whole = not inplace and P % WIDE != 0
        gt = np.zeros(((n_img if whole else nb) * P, O16), np.float32)
        gd = gt.reshape(-1)
        if whole:
            _g_positions(gf, lo, n_img, O, P, O16, gd)
        acc = np.zeros((K, O16), np.float32)
        panel = np.empty(0 if inplace else K * WIDE, np.float32)
        runs = np.empty(WIDE, np.int64)
        blocks = (n_img + nb - 1) // nb if inplace else (n_img * P + WIDE - 1) // WIDE
        for i in range(blocks):
            if inplace:
                q = (min(nb, n_img - i * nb), OH, OW)
                _g_positions(gf, lo + i * nb, q[0], O, P, O16, gd)
                n1, n2 = lo + (i + 1) * nb, min(hi, lo + (i + 2) * nb)     # the next block's images
                for t in range(kk):
                    _ahead(src, n1 * img, n2 * img, t, kk, False)
                    _ahead(gf, n1 * O * P, n2 * O * P, t, kk, False)
                    a0 = (lo + i * nb) * img + t // kw * dh * Wq + taps[t % kw]
                    for j in range(0, O16, NR):
                        b0, c0 = j, t * O16 + j
                        if OW == 16:
                            _outer_rows_add16(src, a0, a_s, a_r, gt, b0, b_s, None, 8, acc, c0, kk * O16, q, C)
                        elif OW == 8:
                            _outer_rows_add8(src, a0, a_s, a_r, gt, b0, b_s, None, 8, acc, c0, kk * O16, q, C)
                        elif OW == 4:
                            _outer_rows_add4(src, a0, a_s, a_r, gt, b0, b_s, None, 8, acc, c0, kk * O16, q, C)
                        else:
                            _outer_rows_add(src, a0, a_s, a_r, gt, b0, b_s, None, 8, acc, c0, kk * O16, q, C)
                continue
            width = min(WIDE, n_img * P - i * WIDE)
            if not whole:
                n, k, m = lo + i * WIDE // P, i * WIDE % P // WIDE, P // WIDE
                if k == 0:
                    _g_positions(gf, n, 1, O, P, O16, gd)
                if n + 1 < hi:      # the next image's planes and g, a share at every panel of this one
                    _ahead(src, (n + 1) * img, (n + 2) * img, k, m, False)
                    _ahead(gf, (n + 1) * O * P, (n + 2) * O * P, k, m, False)
            g0 = i * WIDE if whole else i * WIDE % P
            _panel(xp, lo * P + i * WIDE, width, P, kh, kw, sh, dh, taps, OW, runs, panel)
            for j in range(0, O16, NR):
                _outer_rows_add(panel, 0, (0, 0, 1), width, gt, g0 * O16 + j, (0, 0, O16), None, 8, acc, j,
                                O16, (1, 1, width), K)
        for c in range(O):
            for k in range(K):
                outs[part, c, k] = acc[k, c]


def _input_grad_cols(g, w, kh, kw, sh, sw, ph, pw, dh, dw, out):
    """out (N, C, H, W) = the input gradient of a convolution from g (N, O, OH, OW) and w (O, K = C*kh*kw), any
    strides. Per image (a task) and block of NR output positions: the block's column gradients w^T g (K x NR, in
    L1) by tiles, then each run of L positions of a column added as one vector where it read the input, into the
    image's column planes (`planes`' layout, with margins for the padding: a stride-2 column's run is contiguous
    there); the planes are then interleaved into the image. Before, the stride-2 layers took the batch's columns
    from one OpenBLAS product and col2im over them after (scalar adds): 0.83 ms for the ResNet bench's 16-channel
    one, one thread, and no faster on two. The adds run kernel column by kernel column, the channels inside: with
    the columns inside, the add of column 2 read the vector column 0 had just stored one float off (a store the
    load could not take its value from): 16 -> 32 channels 0.81 -> 0.66 ms, 32 -> 64 0.76 -> 0.60 (one thread,
    AMD EPYC znver4, the same bits)."""
    N, O, OH, OW = g.shape
    C, H, W = out.shape[1], out.shape[2], out.shape[3]
    P, K, img = OH * OW, w.shape[1], C * H * W
    L = OW if OW < NR else NR
    Wq = (W + sw - 1) // sw
    M = max((pw + sw - 1) // sw, ((OW - 1) * sw - pw + (kw - 1) * dw) // sw - Wq + 1, 0)
    Wm = Wq + 2 * M                       # a plane's row, margins included
    plane = H * sw * Wm
    gf, of = g.reshape(-1), out.reshape(-1)
    for n in prange(N):
        cols = np.empty(K * NR, np.float32)
        buf = np.zeros(C * plane, np.float32)
        jd = np.empty(kw, np.int64)
        for pb in range(P // NR):
            _outer_rows(w, 0, (0, 0, K), 1, gf, n * O * P + pb * NR, (0, 0, P), None, 8, cols, 0, NR, (1, 1, O), K)
            for r in range(NR // L):
                oh, ow0 = (pb * NR + r * L) // OW, (pb * NR + r * L) % OW
                for j in range(kw):
                    x0 = ow0 * sw - pw + j * dw + M * sw          # >= 0: the margin taken in
                    jd[j] = x0 % sw * Wm + x0 // sw
                for i in range(kh):
                    y = oh * sh - ph + i * dh
                    if y < 0 or y >= H:
                        continue
                    for j in range(kw):     # (channels inner: the next add is never to a line just written)
                        for c in range(C):
                            d, k = c * plane + y * sw * Wm, (c * kh + i) * kw * NR + r * L
                            if L == 16:
                                _addv(buf, d + jd[j], cols, k + j * NR, 16)
                            elif L == 8:
                                _addv(buf, d + jd[j], cols, k + j * NR, 8)
                            elif L == 4:
                                _addv(buf, d + jd[j], cols, k + j * NR, 4)
                            else:
                                for t in range(L):
                                    buf[d + jd[j] + t] += cols[k + j * NR + t]
        for c in range(C):
            for y in range(H):
                row, o = c * plane + y * sw * Wm + M, n * img + (c * H + y) * W
                if sw == 2 and W % 16 == 0:
                    for q in range(0, Wq, 8):
                        _merge2(of, o + 2 * q, buf, row + q, row + Wm + q, 8)
                elif sw == 2 and W % 8 == 0:
                    for q in range(0, Wq, 4):
                        _merge2(of, o + 2 * q, buf, row + q, row + Wm + q, 4)
                else:
                    for x in range(W):
                        of[o + x] = buf[row + x % sw * Wm + x // sw]


def _input_grad_padded(g, wt, nobias, kh, kw, ph, pw, dh, dw, threads, out):
    """out (N, C, H, W) = the forward convolution of g (N, O, OH, OW) zero-padded by (ph, pw) with wt (C, O*kh*kw),
    the flipped, transposed weights: a stride-1 convolution's input gradient. A block of images at a time (up to
    PAD_BLOCK bytes padded, as many on each of the `threads`), padded into a buffer that the convolution then reads
    from the cache. Padding the whole batch first (a copy the size of g, in new pages at every call) made the input
    gradient at two threads 0.2-0.5 ms slower than a forward convolution of the same size, and this 15-20% faster
    than that (64x16x16x16, 64x32x8x8 and 64x64x4x4, AMD EPYC znver4)."""
    N, O, OH, OW = g.shape
    Hp, Wp = OH + 2 * ph, OW + 2 * pw
    blocks = -(-N * O * Hp * Wp * 4 // PAD_BLOCK)
    blocks = max(1, min(N, -(-blocks // threads) * threads))      # (as many blocks on every thread)
    for t in prange(blocks):
        lo, hi = N * t // blocks, N * (t + 1) // blocks
        buf = np.empty((hi - lo, O, 1, Hp, Wp), np.float32)
        _fill(g[lo:hi], ph, pw, buf)
        _forward(g[:0], 0, 0, buf, wt, nobias, kh, kw, 1, dh, dw, out[lo:hi])


PAD_BLOCK = 1 << 18


# ------------------------------------------------------------------------------------------------- Winograd
# A 3x3 convolution of stride 1 as Winograd's F(2x2, 3x3): each 4x4 tile of the padded input (tiles 2 apart) is
# transformed, V = B^T d B, the weights likewise once per call, U = G g G^T, and then the 16 positions xi of a tile
# are 16 independent products M[xi] = U[xi] (O x C) @ V[xi] (C x tiles), each of them `_outer` tiles, and a 2x2
# block of the output is A^T M A: 16 multiplies for 4 outputs where the direct convolution has 36. The ResNet
# bench's stride-1 layers (64 images), one thread, data in the caches, forward with its planes' copy / input
# gradient: 16 channels at 16x16 1.06 -> 0.73 / 1.03 -> 0.72 ms, 32 at 8x8 1.06 -> 0.62 / 1.02 -> 0.64, 64 at 4x4
# 1.05 -> 0.72 / 1.06 -> 0.83; its step at one thread 22.1-22.9 -> 19.6 ms of nodes (AMD EPYC znver4). The
# rounding differs from the direct sums' (the transforms' adds): relative to the output's largest value ~1e-6.

WINO_TILES = 64          # tiles a block of images gives the products at least (their columns: 4 `_outer` tiles)
WINO_FLOATS = 1 << 14    # the most floats of one transformed block V[xi] or M[xi] (C or O times its tiles)


def _wino_blocks(H, W, C, O):
    """(images per block, tile rows per chunk) of `_wino` and `_wino_weight_grad` for an output H x W and C, O
    channels: a chunk's transformed slices (C or O x its tiles) at most WINO_FLOATS floats (in L2); where whole
    images fit, blocks of as many as give WINO_TILES tiles, else an image at a time in chunks of tile rows."""
    TH, TW = H // 2, W // 2
    rows = max(1, min(TH, WINO_FLOATS // (max(C, O) * TW)))
    nb = 1
    while rows == TH and nb * TH * TW < WINO_TILES and (nb + 1) * TH * TW * max(C, O) <= WINO_FLOATS:
        nb += 1
    return nb, rows


def winograd(kernel, stride, dilation, channels, out_size):
    """Whether `_wino` computes this convolution (of the padded input's planes, S = 1) of channels = (C, O) (the
    input it transforms, the output): 3x3, stride 1, undilated, C >= 4 (from 1 or 2 channels 16x16 to 16 the direct
    tiles took 0.21 / 0.31 ms, Winograd 0.37 / 0.45: the output's transform outweighs the products; 3: 0.27 / 0.25),
    an output of even height and width, a row of tiles whose transforms fit L2 (WINO_FLOATS)."""
    H, W = out_size
    return (ENABLED and WINOGRAD and tuple(kernel) == (3, 3) and tuple(stride) == tuple(dilation) == (1, 1) and
            channels[0] >= 4 and H > 0 and H % 2 == 0 and W > 0 and W % 2 == 0 and
            max(channels) * (W // 2) <= WINO_FLOATS)


def winograd_all(kernel, stride, dilation, channels, out_size):
    """Whether Winograd computes the forward and the weight gradient of this convolution (channels (C, O)): the
    weight gradient's from 8 input channels and output channels a multiple of NR (`_weight_grad_calls`)."""
    return winograd(kernel, stride, dilation, channels, out_size) and channels[0] >= 8 and channels[1] % NR == 0


# G (F(2x2, 3x3)'s weight transform) as the 16 x 9 matrix that takes a 3x3 kernel to the 4x4 G g G^T
_GG = np.kron(*[np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float32)] * 2)


def _transformed(w):
    """U (16, O, C) = G w[o, c] G^T for each 3x3 kernel of w (O, C, 3, 3), position xi = 4i + j of the 4x4."""
    O, C = w.shape[:2]
    return (_GG @ np.ascontiguousarray(w, np.float32).reshape(O * C, 9).T).reshape(16, O, C)


def _from_transformed(dU):
    """The weight gradient (O, C, 3, 3) = G^T dU[:, c, o] G from dU (16, C, O) (`_wino_weight_grad`)."""
    C, O = dU.shape[1:]
    return np.ascontiguousarray((_GG.T @ dU.reshape(16, C * O)).reshape(3, 3, C, O).transpose(3, 2, 0, 1))


def _lanes(builder, args, k):
    return [_int64(builder, args[i]) for i in k]


def _bt(b, d):
    """B^T d of F(2x2, 3x3), d four rows (vectors)."""
    return [b.fsub(d[0], d[2]), b.fadd(d[1], d[2]), b.fsub(d[2], d[1]), b.fsub(d[1], d[3])]


def _ag(b, g):
    """A g of F(2x2, 3x3), g two rows (vectors)."""
    return [g[0], b.fadd(g[0], g[1]), b.fsub(g[0], g[1]), b.fneg(g[1])]


def _at(b, m):
    """A^T m of F(2x2, 3x3), m four rows (vectors)."""
    return [b.fadd(b.fadd(m[0], m[1]), m[2]), b.fsub(b.fsub(m[1], m[2]), m[3])]


def _tile_transform(size, transform):
    """The intrinsic tiles(D, d0, ds, src, s0, rs, n): D[d0 + xi*ds : +n] = T d T^t (T: `transform`, 4 x size; xi =
    4i + j of the 4x4 result) of n tiles side by side, tile t's size x size input d at src[s0 + 2t + r*rs + j] (rows
    r, columns j): per input row size / 2 loads of 2n floats (at columns 0, 2) split into even and odd columns, so
    that the columns of every tile are vectors; n a literal (float32 arrays, unchecked)."""
    @intrinsic(prefer_literal=True)
    def tiles(typingctx, D, d0, ds, src, s0, rs, n):
        L = _width(n, D, src)
        if L is None:
            return None
        sig = types.void(D, d0, ds, src, s0, rs, n)

        def codegen(context, builder, sig, args):
            dp, sp = _data(context, builder, sig, args, 0), _data(context, builder, sig, args, 3)
            d0, ds, s0, rs = _lanes(builder, args, (1, 2, 4, 5))
            i64 = ir.IntType(64)
            rows = []
            for r in range(size):
                off = builder.add(s0, builder.mul(rs, ir.Constant(i64, r)))
                loads = [builder.load(_vptr(builder, sp, builder.add(off, ir.Constant(i64, k)), 2 * L), align=4)
                         for k in range(0, size, 2)]
                rows.append([builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), _index(range(h, 2 * L, 2)))
                             for v in loads for h in (0, 1)])
            cols = [transform(builder, [rows[r][j] for r in range(size)]) for j in range(size)]    # cols[j][i]
            for i in range(4):
                for j, v in enumerate(transform(builder, [cols[k][i] for k in range(size)])):
                    off = builder.add(d0, builder.mul(ds, ir.Constant(i64, 4 * i + j)))
                    builder.store(v, _vptr(builder, dp, off, L), align=4)
            return context.get_dummy_value()
        return sig, codegen
    return tiles


# V = B^T d B of 4x4 input tiles; the gradient of the products' m, A g A^T, from a 2x2 output tile's g
_wino_in, _wino_g = _tile_transform(4, _bt), _tile_transform(2, _ag)


@intrinsic(prefer_literal=True)
def _wino_out(typingctx, out, o0, ow, M, m0, ms, bias, n):
    """out[o0 + r*ow : +2n] (r = 0, 1) = the 2x2 outputs A^T m A + bias of n tiles side by side, tile t's m[xi] at
    M[m0 + xi*ms + t]; n a literal (float32 arrays, unchecked)."""
    L = _width(n, out, M)
    if L is None:
        return None
    sig = types.void(out, o0, ow, M, m0, ms, bias, n)

    def codegen(context, builder, sig, args):
        op, mp = _data(context, builder, sig, args, 0), _data(context, builder, sig, args, 3)
        o0, ow, m0, ms = _lanes(builder, args, (1, 2, 4, 5))
        i64 = ir.IntType(64)
        m = [[builder.load(_vptr(builder, mp, builder.add(m0, builder.mul(ms, ir.Constant(i64, 4 * i + j))), L),
                           align=4) for j in range(4)] for i in range(4)]
        cols = [_at(builder, [m[i][j] for i in range(4)]) for j in range(4)]         # cols[j][i]
        vt = ir.VectorType(ir.FloatType(), L)
        b = builder.shuffle_vector(builder.insert_element(ir.Constant(vt, ir.Undefined), args[6],
                                                          ir.Constant(ir.IntType(32), 0)),
                                   ir.Constant(vt, ir.Undefined), _index([0] * L))
        for i in range(2):
            y = [builder.fadd(v, b) for v in _at(builder, [cols[j][i] for j in range(4)])]
            row = _interleave(builder, y[0], y[1])
            builder.store(row, _vptr(builder, op, builder.add(o0, builder.mul(ow, ir.Constant(i64, i))), 2 * L),
                          align=4)
        return context.get_dummy_value()
    return sig, codegen


def _wino(x, ph, pw, xp, U, bias, out):
    """out (N, O, H, W) = the convolution (3x3, stride 1) of the padded input's planes xp (N, C, 1, H + 2, W + 2)
    with the transformed weights U (16, O, C) (`_transformed`), plus bias (size 0: none), by blocks of images
    and chunks of tile rows (`_wino_blocks`). x (N, C, H', W'), unless its size is 0: each block's planes are first
    filled from it, padded by (ph, pw), into xp or, xp's size 0, into a buffer of the block."""
    N, O, H, W = out.shape
    C = U.shape[2]
    TH, TW = H // 2, W // 2
    nb, R = _wino_blocks(H, W, C, O)
    T = -(-nb * R * TW // NR) * NR           # a chunk's tiles, rounded up to the products' columns
    CT, OT = C * T + 24, O * T + 24          # (V[xi] and M[xi] not a multiple of 4 KB apart: the 16 rows a tile
    #                                           writes fell in one set of L1's: 1.07 -> 0.38 ms of transforms)
    of, uf = out.reshape(-1), U.reshape(-1)
    Hp, Wq = H + 2, W + 2
    for blk in prange((N + nb - 1) // nb):
        n0 = blk * nb
        m = min(nb, N - n0)
        buf = xp if xp.size else np.empty((nb, C, 1, Hp, Wq), np.float32)
        i0 = n0 if xp.size else 0
        if x.size:
            _fill(x[n0:n0 + m], ph, pw, buf[i0:i0 + m])
        src = buf.reshape(-1)
        V = np.empty(16 * CT, np.float32)
        M = np.empty(16 * OT, np.float32)
        for r0 in range(0, TH, R):
            rr = min(R, TH - r0)
            tiles = m * rr * TW
            for c in range(C):
                for b in range(m):
                    for th in range(rr):
                        _wino_in_row(V, c * T + (b * rr + th) * TW, CT, src,
                                     (((i0 + b) * C + c) * Hp + 2 * (r0 + th)) * Wq, Wq, TW)
                for t in range(tiles, -(-tiles // NR) * NR):     # (the products' columns beyond the tiles read
                    for xi in range(16):                         # zeros, not garbage)
                        V[xi * CT + c * T + t] = 0
            for xi in range(16):
                for t0 in range(0, tiles, NR):
                    _outer_rows(uf, xi * O * C, (0, 0, 1), C, V, xi * CT + t0, (0, 0, T), None, 8, M, xi * OT + t0,
                                T, (1, 1, C), O)
            for o in range(O):
                bo = bias[o] if bias.size else np.float32(0)
                for b in range(m):
                    for th in range(rr):
                        _wino_out_row(of, (((n0 + b) * O + o) * H + 2 * (r0 + th)) * W, W, M,
                                      o * T + (b * rr + th) * TW, OT, bo, TW)


def _by_rows(tiles):
    """tiles (`_tile_transform`) over a row of TW tiles: 8 at a time, then 4, 2, 1."""
    def row(D, d0, ds, src, s0, rs, TW):
        t = 0
        while t + 8 <= TW:
            tiles(D, d0 + t, ds, src, s0 + 2 * t, rs, 8)
            t += 8
        if t + 4 <= TW:
            tiles(D, d0 + t, ds, src, s0 + 2 * t, rs, 4)
            t += 4
        if t + 2 <= TW:
            tiles(D, d0 + t, ds, src, s0 + 2 * t, rs, 2)
            t += 2
        if t < TW:
            tiles(D, d0 + t, ds, src, s0 + 2 * t, rs, 1)
    return numba.njit(cache=_CACHE, nogil=True, inline="always")(row)


def _wino_out_row(out, o0, ow, M, m0, ms, bias, TW):
    """`_wino_out` over a row of TW tiles: 8 at a time, then 4, 2, 1."""
    t = 0
    while t + 8 <= TW:
        _wino_out(out, o0 + 2 * t, ow, M, m0 + t, ms, bias, 8)
        t += 8
    if t + 4 <= TW:
        _wino_out(out, o0 + 2 * t, ow, M, m0 + t, ms, bias, 4)
        t += 4
    if t + 2 <= TW:
        _wino_out(out, o0 + 2 * t, ow, M, m0 + t, ms, bias, 2)
        t += 2
    if t < TW:
        _wino_out(out, o0 + 2 * t, ow, M, m0 + t, ms, bias, 1)


_wino_in_row, _wino_g_row = _by_rows(_wino_in), _by_rows(_wino_g)


def _wino_weight_grad(xp, g, outs):
    """outs[p] (16, C, O) = the sum over the tiles of images N*p//parts .. N*(p+1)//parts (parts = len(outs)) of
    V[xi] (C x tiles) @ (A g A^T)[xi]^T (tiles x O): the 3x3 stride-1 convolution's weight gradient dU before G^T .. G
    (`_from_transformed`), from the input's planes xp (N, C, 1, H + 2, W + 2) and g (N, O, H, W), O a multiple of NR.
    A chunk (`_wino_blocks`) at a time: its transforms, A g A^T made as (xi, O, tiles) by vectors of tiles and
    transposed 8 x 8 into (xi, tiles, O), then 16 products by `_outer` tiles (rows: input channels, the reduction:
    the chunk's tiles) added into the part's sum. A part gives the same bits here or on its own."""
    N, O, H, W = g.shape
    C, parts = xp.shape[1], outs.shape[0]
    TH, TW = H // 2, W // 2
    nb, R = _wino_blocks(H, W, C, O)
    T = -(-nb * R * TW // NR) * NR
    CT, OT, TO = C * T + 24, O * T + 24, T * O + 24
    Hp, Wq = H + 2, W + 2
    src, gf, of = xp.reshape(-1), g.reshape(-1), outs.reshape(-1)
    for part in prange(parts):
        lo, hi = N * part // parts, N * (part + 1) // parts
        V = np.empty(16 * CT, np.float32)
        D = np.empty(16 * OT, np.float32)
        Dt = np.empty(16 * TO, np.float32)
        acc = np.zeros(16 * C * O, np.float32)
        for n0 in range(lo, hi, nb):
            m = min(nb, hi - n0)
            for r0 in range(0, TH, R):
                rr = min(R, TH - r0)
                for c in range(C):
                    for b in range(m):
                        for th in range(rr):
                            _wino_in_row(V, c * T + (b * rr + th) * TW, CT, src,
                                         (((n0 + b) * C + c) * Hp + 2 * (r0 + th)) * Wq, Wq, TW)
                for o in range(O):
                    for b in range(m):
                        for th in range(rr):
                            _wino_g_row(D, o * T + (b * rr + th) * TW, OT, gf,
                                        (((n0 + b) * O + o) * H + 2 * (r0 + th)) * W, W, TW)
                tiles = m * rr * TW
                for xi in range(16):
                    for o in range(0, O, VL):
                        for t in range(0, tiles, VL):        # (columns past the tiles: never read by the products)
                            _transpose8(Dt, xi * TO + t * O + o, O, D, xi * OT + o * T + t, T)
                    for o in range(0, O, NR):
                        _outer_rows_add(V, xi * CT, (0, 0, 1), T, Dt, xi * TO + o, (0, 0, O), None, 8, acc,
                                        xi * C * O + o, O, (1, 1, tiles), C)
        for i in range(16 * C * O):
            of[part * 16 * C * O + i] = acc[i]


_tap = numba.njit(cache=True, nogil=True, inline="always")(_tap)
_ahead = numba.njit(cache=True, nogil=True, inline="always")(_ahead)
_g_positions = numba.njit(cache=True, nogil=True)(_g_positions)
_wino_blocks = numba.njit(cache=True, nogil=True)(_wino_blocks)
_wino_out_row = numba.njit(cache=_CACHE, nogil=True, inline="always")(_wino_out_row)
_SERIAL = {f.__name__: numba.njit(cache=_CACHE, nogil=True)(f) for f in (_panel, _fill, _forward, _weight_grad,
                                                                        _input_grad_cols, _input_grad_padded, _wino,
                                                                        _wino_weight_grad)}
_panel, _fill, _forward, _weight_grad, _input_grad_cols = (_SERIAL[k] for k in (
    "_panel", "_fill", "_forward", "_weight_grad", "_input_grad_cols"))

# Threads. A large convolution runs on slices of its batch at once: its kernels' prange variants (over images, or
# over the weight gradient's parts) where numba has them, else the serial kernels from Python threads (threads.py)
# while a background helper compiles the variants into the disk cache (numba's parfor lowering of these tiles takes
# 7-21 s a variant; blocking, it made the ResNet bench's first step at two threads 105 s with nothing cached, and
# `tracejit precompile` compiles them up front). Both give the same bits (the same parts, each computed alike).
# numba's threads run the variants: mixing a Python pool with numba's OpenMP threads (the batch-norm row kernels'
# prange) on 2 cores made the ResNet step at two threads ~20% slower (AMD EPYC znver4) than the variants alone.
PAR_MIN = 1 << 22     # multiply-adds from which a convolution's batch is split over the threads
FILL_SHARE = 16       # `planes` copies with threads from PAR_MIN * FILL_SHARE elements (64M) up: two threads copied
#                       slower than one at every size measured (262k elements 0.065 vs 0.134 ms, 4M 1.43 vs 1.68; AMD
#                       EPYC znver3, 2 cores, quiet): the copy is bound by memory, not by a core
_PAR = {}


def _threads(macs):
    return 1 if macs < PAR_MIN else numba.get_num_threads()


def parallel_variant(name):
    """The prange variant of kernel `name` (made once)."""
    if name not in _PAR:
        _PAR[name] = threads.prange_twin(_SERIAL[name].py_func, _CACHE)
    return _PAR[name]


def _ready_variant(name, args):
    """The prange variant of `name` for these arguments if numba has it in memory or in its disk cache (else its
    compilation is left to a background helper, once, and None)."""
    if not _CACHE:          # (a TRACEJIT_CONV_LANES override: no disk cache, no background compilation)
        return None
    from tracejit.backends.numba_cpu.workers import when_compiled
    return when_compiled(parallel_variant(name), args)


def _batch_call(name, args, n, batch_args):
    """Kernel `name` over the batch on n threads: its prange variant where ready, else the serial kernel on n
    slices of the batch from Python threads. batch_args: the positions of the arguments sliced along the batch
    (arrays of the whole batch, or empty ones: an input the kernel does not use)."""
    par = _ready_variant(name, args) if n > 1 else None
    if par is not None:
        return [lambda: par(*args)]
    kern = _SERIAL[name]

    def part(lo, hi):
        return lambda: kern(*[a[lo:hi] if i in batch_args else a for i, a in enumerate(args)])
    return [part(lo, hi) for lo, hi in threads.split(max(args[i].shape[0] for i in batch_args), n)]


def _empty_planes(shape, stride, padding):
    N, C, H, W = shape
    S = stride[1]
    return np.empty((N, C, S, H + 2 * padding[0], -(-(W + 2 * padding[1]) // S)), np.float32)


def planes(x, stride, padding):
    """The zero-padded input as S = stride[1] column planes (N, C, S, Hp, Wq): plane p holds the padded columns
    p, p + S, p + 2S... A convolution of width stride S then reads each kernel column from one plane at unit stride
    (`_tap`), as a stride-1 one reads the padded input itself (S = 1: the same array). By `_fill`: a 64x16x16x16
    input in 0.063 ms (S = 1) and 0.090 (S = 2); numpy's padding copies took 0.13 and 0.20 (one thread, AMD EPYC
    znver3); on Python threads only for very large inputs (FILL_SHARE)."""
    N = x.shape[0]
    ph, pw = padding
    xp = _empty_planes(x.shape, stride, padding)
    x = np.ascontiguousarray(x, np.float32)
    threads.run([lambda a=a, b=b: _fill(x[a:b], ph, pw, xp[a:b])
                 for a, b in threads.split(N, _threads(x.size // FILL_SHARE))])
    return xp


def forward_from_planes(xp, w, bias, stride, dilation, out_size, x=None, padding=(0, 0)):
    """The convolution of the input's `planes` xp with w (O, C, kh, kw), plus bias (None: none): (N, O, OH, OW).
    x: the input, when xp is still to be filled from it (`_forward`)."""
    N, C = xp.shape[:2]
    O, _, kh, kw = w.shape
    out = np.empty((N, O) + tuple(out_size), np.float32)
    b = _NOBIAS if bias is None else np.ascontiguousarray(bias, np.float32)
    x = _NOX if x is None else np.ascontiguousarray(x, np.float32)
    n = _threads(out.size * C * kh * kw)
    if winograd((kh, kw), stride, dilation, (C, O), out_size):
        args = (x, padding[0], padding[1], xp, _transformed(w), b, out)
        threads.run(_batch_call("_wino", args, n, (0, 3, 6)))
        return out
    args = (x, padding[0], padding[1], xp, np.ascontiguousarray(w, np.float32).reshape(O, -1), b, kh, kw, stride[0],
            dilation[0], dilation[1], out)
    threads.run(_batch_call("_forward", args, n, (0, 3, 11)))
    return out


def planes_and_forward(x, w, bias, stride, padding, dilation, out_size):
    """(`planes` of x, the convolution of x with w): the planes filled image by image where they are used."""
    xp = _empty_planes(x.shape, stride, padding)
    return xp, forward_from_planes(xp, w, bias, stride, dilation, out_size, x, padding)


def _weight_grad_calls(xp, g, weight_shape, stride, dilation, n):
    """(the calls that compute a weight gradient on n threads, in n parts of the batch; a function returning it: the
    parts' sum, added in order)."""
    O, C, kh, kw = weight_shape
    parts = max(1, min(n, g.shape[0]))
    # (Winograd's for 8 input channels or more: 3 -> 16 channels at 16x16 0.30 -> 0.40 ms, where 16 -> 16 1.07 ->
    # 0.81-0.87, 32 -> 32 at 8x8 1.10 -> 0.71, 64 -> 64 at 4x4 1.11 -> 0.89, the planes' copy included)
    if winograd_all((kh, kw), stride, dilation, (C, O), g.shape[2:]):
        name, outs = "_wino_weight_grad", np.empty((parts, 16, C, O), np.float32)
        args, finish = (xp, g, outs), _from_transformed
    else:
        name, outs = "_weight_grad", np.empty((parts, O, C * kh * kw), np.float32)
        args, finish = (xp, g, kh, kw, stride[0], dilation[0], dilation[1], outs), lambda s: s.reshape(weight_shape)
    par = _ready_variant(name, args) if parts > 1 else None
    if par is not None:
        calls = [lambda: par(*args)]
    else:
        kern = _SERIAL[name]
        calls = [lambda i=i, lo=lo, hi=hi: kern(xp[lo:hi], g[lo:hi], *args[2:-1], outs[i:i + 1])
                 for i, (lo, hi) in enumerate(threads.split(g.shape[0], parts))]
    return calls, lambda: finish(outs[0] if parts == 1 else outs.sum(0))


def weight_grad_from_planes(xp, g, weight_shape, stride, dilation):
    O, C, kh, kw = weight_shape
    g = np.ascontiguousarray(g, np.float32)
    calls, total = _weight_grad_calls(xp, g, weight_shape, stride, dilation, _threads(g.size * C * kh * kw))
    threads.run(calls)
    return total()


def forward(x, w, bias, stride, padding, dilation):
    kh, kw = w.shape[2:]
    out_size = [conv_out_size(n, k, s, p, d) for n, k, s, p, d in zip(x.shape[2:], (kh, kw), stride, padding, dilation)]
    return planes_and_forward(x, w, bias, stride, padding, dilation, out_size)[1]


def _input_grad_calls(g, w, stride, padding, dilation, n, out):
    """The calls that compute the input gradient of a convolution into out on n threads: for a stride-1 convolution
    the forward of g, padded by blocks of images (`_input_grad_padded`), with the flipped, transposed weights
    (C, O*kh*kw); for a strided one `_input_grad_cols` of g itself with the weights (O, K)."""
    O, C, kh, kw = w.shape
    w = np.asarray(w, np.float32)
    if stride != (1, 1):
        args = (g, np.ascontiguousarray(w).reshape(O, -1), kh, kw, stride[0], stride[1], padding[0], padding[1],
                dilation[0], dilation[1], out)
        return _batch_call("_input_grad_cols", args, n, (0, 10))
    flipped = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    if winograd((kh, kw), stride, dilation, (O, C), out.shape[2:]):
        args = (g, 2 - padding[0], 2 - padding[1], _NOPLANES, _transformed(flipped), _NOBIAS, out)
        return _batch_call("_wino", args, n, (0, 6))
    wt = np.ascontiguousarray(flipped).reshape(C, -1)
    args = (g, wt, _NOBIAS, kh, kw, dilation[0] * (kh - 1) - padding[0], dilation[1] * (kw - 1) - padding[1],
            dilation[0], dilation[1], n, out)
    return _batch_call("_input_grad_padded", args, n, (0, 10))


def input_grad(g, w, input_shape, stride, padding, dilation):
    """The input gradient of a convolution (see `direct_input_grad`)."""
    O, C, kh, kw = w.shape
    g = np.ascontiguousarray(g, np.float32)
    out = np.empty(input_shape, np.float32)
    threads.run(_input_grad_calls(g, w, stride, padding, dilation, _threads(g.size * C * kh * kw), out))
    return out


_NOBIAS = np.zeros(0, np.float32)
_NOX = np.zeros((0, 0, 0, 0), np.float32)
_NOPLANES = np.zeros((0, 0, 1, 0, 0), np.float32)


def weight_grad(x, g, weight_shape, stride, padding, dilation):
    return weight_grad_from_planes(planes(x, stride, padding), g, weight_shape, stride, dilation)
