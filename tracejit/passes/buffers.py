"""Buffer planning: which intermediates of a compiled graph may share memory.

An executor writes some values into buffers it owns (fused kernels' outputs, their scratch arrays, the CUDA
backend's `out=` results) and hands every other value to the caller or to numpy. It asks `plan` for those
buffers: one request per buffer, with the node that writes it. A buffer lives from that node to the last read of
its value or of anything that may share the value's memory (a view op's result, a collective's handle: see
`Op.may_alias`); a value returned by the graph, or aliased by one, lives to the end. Requests whose lifetimes do
not overlap share an arena (one per dtype, as long as its largest occupant), chosen greedily, best fit first.

The same lifetimes decide the CPU executor's donations (an output written into an input's array).
"""
import bisect
import heapq

import numpy as np

from ..ir.graph import Value


def lifetimes(graph):
    """({id(value): index of the last node that reads it, or of anything that may alias it; len(nodes) for a
    value a graph output may alias}, {id(value): ids of the values whose memory it may share, itself included})."""
    roots = {}
    last = {}
    end = len(graph.nodes)
    for k, n in enumerate(graph.nodes):
        mine = set()
        for i in n.inputs:
            if isinstance(i, Value):
                rs = roots.get(id(i), (id(i),))
                mine.update(rs)
                for r in rs:
                    last[r] = k
        if n.op.may_alias and mine:
            for o in n.outputs:
                roots[id(o)] = tuple(mine) + (id(o),)
    for v in graph.outputs:
        if isinstance(v, Value):
            for r in roots.get(id(v), (id(v),)):
                last[r] = end
    return last, roots


class Plan:
    """`arenas`: (numpy dtype, elements) of each arena; `where[j]`: the arena of request j; `requested`: the
    bytes of all requests (one buffer each)."""

    def __init__(self, arenas, where, requested):
        self.arenas = arenas
        self.where = where
        self.requested = requested

    def nbytes(self):
        return sum(dt.itemsize * n for dt, n in self.arenas)

    def summary(self):
        return (f"{len(self.where)} in {len(self.arenas)} arenas: {_size(self.nbytes())} "
                f"({_size(self.requested)} with one each)")


def _size(n):
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def plan(graph, requests, share=True):
    """`requests`: (numpy dtype, shape, value or None, index of the node that writes it) per buffer; a None
    value is scratch of that node alone. `share=False` gives every request an arena of its own."""
    last, _ = lifetimes(graph)
    sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape, _, _ in requests]
    requested = sum(r[0].itemsize * n for r, n in zip(requests, sizes))
    ends = [k if v is None else max(k, last.get(id(v), k)) for _, _, v, k in requests]
    arenas, where = [], [None] * len(requests)
    if not share:
        for j, (r, size) in enumerate(zip(requests, sizes)):
            where[j] = len(arenas)
            arenas.append([r[0], size])
        return Plan([tuple(a) for a in arenas], where, requested)
    free = {}                   # dtype -> sorted [(elements, arena)] of the arenas nobody occupies now
    busy = []                   # heap of (the last node index its occupant is read at, arena)
    order = sorted(range(len(requests)), key=lambda j: (requests[j][3], -sizes[j]))
    for j in order:
        dt, _, _, k = requests[j]
        size = sizes[j]
        while busy and busy[0][0] < k:
            _, a = heapq.heappop(busy)
            bisect.insort(free.setdefault(arenas[a][0], []), (arenas[a][1], a))
        fl = free.setdefault(dt, [])
        p = bisect.bisect_left(fl, (size, -1))
        if p < len(fl):                 # the smallest free arena it fits in
            a = fl.pop(p)[1]
        elif fl:                        # else the largest free one, grown
            a = fl.pop()[1]
            arenas[a][1] = size
        else:
            a = len(arenas)
            arenas.append([dt, size])
        heapq.heappush(busy, (ends[j], a))
        where[j] = a
    return Plan([tuple(a) for a in arenas], where, requested)
