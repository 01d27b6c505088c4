"""torch.utils._pytree: nested containers (tuples, lists, dicts, OrderedDicts, named tuples; more by
register_pytree_node) flattened to their leaves and a TreeSpec that rebuilds them.

Everything that is not a registered container is a leaf, None included (as in PyTorch); only the exact registered
types are containers (a tuple subclass other than a named tuple, tracejit.Size for one, is a leaf). A dict's
children are in its insertion order, its keys the spec's context."""
import collections
from typing import Any, Callable, NamedTuple

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_map", "tree_map_", "tree_map_only", "tree_iter", "tree_all", "tree_any",
           "tree_is_leaf", "treespec_pprint"]


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable
    unflatten_fn: Callable


SUPPORTED_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Makes `cls` a container: flatten_fn(node) -> (children, context), unflatten_fn(children, context) -> node.
    The serialization and key-path arguments are accepted and unused."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn)


class _NamedTupleNode:
    """The node type of every named tuple (its class is the context)."""


_NamedTupleNode.__name__ = "namedtuple"

register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d)), lambda c, keys: dict(zip(keys, c)))
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), list(d)),
                     lambda c, keys: collections.OrderedDict(zip(keys, c)))
register_pytree_node(_NamedTupleNode, lambda t: (list(t), type(t)), lambda c, cls: cls(*c))


def _node_type(tree):
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        return _NamedTupleNode
    return type(tree)


def tree_is_leaf(tree, is_leaf=None):
    """Whether `tree` is a leaf: not a registered container, or one that is_leaf(tree) calls a leaf."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in SUPPORTED_NODES


class TreeSpec:
    """The structure of a pytree: a node's type, its context (a dict's keys, a named tuple's class, else None) and
    its children's specs; LeafSpec is a leaf's."""

    def __init__(self, type: Any, context: Any, children_specs: list):
        self.type, self.context, self.children_specs = type, context, list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self):
        return list(self.children_specs)

    def child(self, index):
        return self.children_specs[index]

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type, self.context, self.children_specs) == (other.type, other.context, other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(self.children_specs)))

    def __repr__(self, indent=0):
        if not self.children_specs:
            inner = ""
        else:
            parts = [c.__repr__(indent + 2) for c in self.children_specs]
            inner = (",\n" + " " * (indent + 2)).join(parts)
        return f"TreeSpec({self.type.__name__}, {self.context!r}, [{inner}])"

    def flatten_up_to(self, tree):
        """The subtrees of `tree` at this spec's leaves (tree must have this structure down to them)."""
        if self.is_leaf():
            return [tree]
        node = _node_type(tree)
        if node is not self.type:
            raise ValueError(f"Node type mismatch; expected {self.type}, but got {type(tree)}.")
        children, context = SUPPORTED_NODES[node].flatten_fn(tree)
        if len(children) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
        if node in (dict, collections.OrderedDict):
            if set(context) != set(self.context):
                raise ValueError(f"Node keys mismatch; missing key(s): {set(self.context) - set(context)}; extra "
                                 f"key(s): {set(context) - set(self.context)}.")
            children = [tree[k] for k in self.context]
        elif context != self.context:
            raise ValueError(f"Node context mismatch for custom node type; expected {self.context!r}, but got "
                             f"{context!r}.")
        return [x for c, t in zip(self.children_specs, children) for x in c.flatten_up_to(t)]

    def unflatten(self, leaves):
        """The pytree of this structure holding `leaves` in order."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to "
                             f"a pytree that holds {self.num_leaves} items ({self!r}).")
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.is_leaf():
            return next(it)
        return SUPPORTED_NODES[self.type].unflatten_fn([c._build(it) for c in self.children_specs], self.context)


class LeafSpec(TreeSpec):
    """The spec of a leaf, printed `*`."""

    def __init__(self):
        super().__init__(None, None, [])
        self.num_nodes, self.num_leaves = 1, 1

    def __repr__(self, indent=0):
        return "*"


def tree_flatten(tree, is_leaf=None):
    """(leaves, spec): the leaves of `tree` in order and the TreeSpec that tree_unflatten rebuilds it from."""
    leaves = []

    def walk(t):
        if tree_is_leaf(t, is_leaf):
            leaves.append(t)
            return LeafSpec()
        node = _node_type(t)
        children, context = SUPPORTED_NODES[node].flatten_fn(t)
        return TreeSpec(node, context, [walk(c) for c in children])
    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    """The pytree of treespec's structure holding `leaves`."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but got "
                        f"item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    yield from tree_leaves(tree, is_leaf)


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """`tree` with each leaf x replaced by func(x, *the subtrees of `rests` at x's place)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, *flat))


def tree_map_(func, tree, *rests, is_leaf=None):
    """func called on the leaves for its effects; returns `tree`."""
    leaves, spec = tree_flatten(tree, is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    for args in zip(*flat):
        func(*args)
    return tree


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """tree_map of func over the leaves that are instances of type_or_types; other leaves are kept."""
    return tree_map(lambda x: func(x) if isinstance(x, type_or_types) else x, tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_leaves(tree, is_leaf)))


class _DummyLeaf:
    def __repr__(self):
        return "*"


def treespec_pprint(treespec):
    """The structure written as the pytree itself with `*` for each leaf: (*, [*, {'a': *}])."""
    return repr(treespec.unflatten([_DummyLeaf() for _ in range(treespec.num_leaves)]))


def _broadcast_to_and_flatten(tree, treespec, is_leaf=None):
    """One value of `tree` per leaf of treespec, `tree` being a prefix of that structure (a leaf of `tree` covers
    a whole subtree); None when it is not."""
    if tree_is_leaf(tree, is_leaf):
        return [tree] * treespec.num_leaves
    if treespec.is_leaf():
        return None
    node = _node_type(tree)
    if node is not treespec.type:
        return None
    children, context = SUPPORTED_NODES[node].flatten_fn(tree)
    if len(children) != treespec.num_children or context != treespec.context:
        return None
    out = []
    for child, spec in zip(children, treespec.children_specs):
        flat = _broadcast_to_and_flatten(child, spec, is_leaf)
        if flat is None:
            return None
        out += flat
    return out
