"""Arrays a compiled program keeps after returning them, to write the next call's result into the same memory.

A `Keeper` holds the array a program returned last call; the program reuses it when nobody else holds it any
more (a fresh 16 MiB output costs page faults, more than the math). The autograd engine lets a leaf's .grad take
over an array nobody else holds (PyTorch's AccumulateGrad steals it); `kept(a)` tells it that one extra holder
of `a` is such a keeper, which never writes into an array someone else still holds, so the leaf may share it
instead of copying it (a 4M-element gradient: ~4 ms per copy).
"""
import weakref

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
