"""Arrays a compiled program keeps after returning them, to write the next call's result into the same memory.

A `Keeper` holds the array a program returned last call; the program reuses it when nobody else holds it any
more (a fresh 16 MiB output costs page faults, more than the math). The autograd engine lets a leaf's .grad take
over an array nobody else holds (PyTorch's AccumulateGrad steals it); `kept(a)` tells it that one extra holder
of `a` is such a keeper, which never writes into an array someone else still holds, so the leaf may share it
instead of copying it (a 4M-element gradient: ~4 ms per copy).

Both decide "nobody else holds it" by exact `sys.getrefcount` values (a slot, a local, getrefcount's own
argument), which is how CPython up to 3.13 counts (tested here on 3.11). A CPython that skips the count of a
borrowed local would make a held array look free: `REFCOUNTS_EXACT`, probed at import with the same pattern,
turns reuse and stealing off there (fresh arrays and copies: slower, never wrong).
"""
import sys
import weakref


def _count(slot):
    a = slot[0]
    return sys.getrefcount(a)


def _probe(count=_count):
    slot = [object()]
    alone = count(slot)             # the slot, `a`, getrefcount's argument
    other = slot[0]                 # noqa: F841 (one more holder)
    return alone == 3 and count(slot) == 4


REFCOUNTS_EXACT = _probe()

_KEEPERS = {}          # id(array) -> the _Ref of the Keeper holding it


class _Ref(weakref.ref):
    __slots__ = ("key",)


def _forget(ref):
    if _KEEPERS.get(ref.key) is ref:
        del _KEEPERS[ref.key]


class Keeper:
    __slots__ = ("a", "_ref", "__weakref__")

    def __init__(self):
        self.a = None
        self._ref = _Ref(self, _forget)
        self._ref.key = None

    def keep(self, a):
        r = self._ref
        if _KEEPERS.get(r.key) is r:
            del _KEEPERS[r.key]
        self.a = a
        r.key = id(a)
        _KEEPERS[id(a)] = r


def kept(a):
    """Is `a` the array some live Keeper holds?"""
    r = _KEEPERS.get(id(a))
    k = r() if r is not None else None
    return k is not None and k.a is a
