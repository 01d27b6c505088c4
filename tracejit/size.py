class Size(tuple):
    """A tensor's shape: a tuple that prints like PyTorch's."""
    __slots__ = ()

    def __repr__(self):
        return f"tracejit.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))
