"""Nested tuples, lists and dicts of tensors (torch's pytrees): the arguments and
results of the transforms, and vmap's in_dims/out_dims laid over them."""


class TreeSpec:
    """The structure of a tree: its container type, keys (dicts) or field names
    (named tuples) and children; a leaf is `LEAF`."""
    __slots__ = ("type", "context", "children")

    def __init__(self, type_, context, children):
        self.type, self.context, self.children = type_, context, children

    def is_leaf(self):
        return self.type is None

    @property
    def num_leaves(self):
        return 1 if self.type is None else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and self.type is other.type
                and self.context == other.context and self.children == other.children)

    def __repr__(self):
        if self.type is None:
            return "*"
        return (f"TreeSpec({self.type.__name__}, {self.context!r}, "
                f"[{', '.join(map(repr, self.children))}])")


LEAF = TreeSpec(None, None, ())


def _children(tree):
    """(type, context, children) of a container, or None for a leaf."""
    t = type(tree)
    if t is tuple or t is list:
        return t, None, tree
    if isinstance(tree, dict):
        keys = list(tree)
        return t, keys, [tree[k] for k in keys]
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a named tuple
        return t, tree._fields, tuple(tree)
    return None


def tree_flatten(tree):
    """(leaves, spec) of `tree`."""
    leaves = []

    def walk(node):
        got = _children(node)
        if got is None:
            leaves.append(node)
            return LEAF
        t, ctx, kids = got
        return TreeSpec(t, ctx, [walk(k) for k in kids])
    return leaves, walk(tree)


def tree_unflatten(leaves, spec):
    it = iter(leaves)

    def build(s):
        if s.type is None:
            return next(it)
        kids = [build(c) for c in s.children]
        if s.type is tuple or s.type is list:
            return s.type(kids)
        if issubclass(s.type, dict):
            return s.type(zip(s.context, kids))
        return s.type(*kids)
    return build(spec)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(v) for v in leaves], spec)


def broadcast_prefix(prefix, tree, is_leaf=lambda v: v is None or isinstance(v, int)):
    """The values of `prefix` (a tree whose leaves stand for whole subtrees of
    `tree`), one per leaf of `tree`; None where the structures do not match."""
    out = []

    def walk(p, node):
        if is_leaf(p):
            out.extend([p] * tree_flatten(node)[1].num_leaves)
            return True
        pk, nk = _children(p), _children(node)
        if pk is None or nk is None or pk[0] is not nk[0] or pk[1] != nk[1] or \
                len(pk[2]) != len(nk[2]):
            return False
        return all(walk(a, b) for a, b in zip(pk[2], nk[2]))
    return out if walk(prefix, tree) else None
