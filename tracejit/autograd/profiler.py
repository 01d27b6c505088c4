"""autograd.profiler.profile: counts and times every op run eagerly inside it."""
import time

from .._state import STATE


class _Stat:
    __slots__ = ("key", "count", "total")

    def __init__(self, key):
        self.key, self.count, self.total = key, 0, 0.0

    @property
    def cpu_time_total(self):
        return self.total * 1e6

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)


class profile:
    def __init__(self, enabled=True, use_cuda=False, record_shapes=False, **kw):
        self.enabled = enabled
        self.stats = {}

    def __enter__(self):
        if self.enabled:
            self._prev = STATE.profiler
            STATE.profiler = self
        return self

    def __exit__(self, *exc):
        if self.enabled:
            STATE.profiler = self._prev
        return False

    def run(self, op, arrays, attrs):
        t0 = time.perf_counter()
        try:
            if STATE.cuda is not None:      # cuda tensors exist: route by device (times kernel launches)
                return STATE.cuda(op, arrays, attrs)
            return op.impl(*arrays, **attrs)
        finally:
            dt = time.perf_counter() - t0
            s = self.stats.get(op.name)
            if s is None:
                s = self.stats[op.name] = _Stat(op.name)
            s.count += 1
            s.total += dt

    def key_averages(self):
        return _Table(sorted(self.stats.values(), key=lambda s: -s.total))

    def table(self, sort_by=None, row_limit=100, **kw):
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit)

    def __str__(self):
        return self.table()


class _Table(list):
    def table(self, sort_by=None, row_limit=100, **kw):
        total = sum(s.total for s in self) or 1e-12
        lines = [f"{'Name':<24}{'Self CPU %':>12}{'Self CPU total':>16}{'CPU time avg':>14}{'# of Calls':>12}",
                 "-" * 78]
        for s in self[:row_limit]:
            lines.append(f"{s.key:<24}{100 * s.total / total:>11.2f}%{s.total * 1e6:>14.1f}us"
                         f"{s.total * 1e6 / s.count:>12.2f}us{s.count:>12}")
        lines.append("-" * 78)
        lines.append(f"Self CPU time total: {total * 1e3:.3f}ms")
        return "\n".join(lines)


def record_function(name):
    import contextlib
    return contextlib.nullcontext()
