"""Leaves get their .grad (and run their post-accumulate hooks) in PyTorch's order: each as soon as its gradient
is complete, so DDP's bucket all-reduces start while the rest of backward runs."""
import pytest

import tracejit


def _order(lib):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3))
    seen = []
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: seen.append(name))
    x = lib.ones(2, 4)
    F.cross_entropy(m(x) + m[0](x).sum(), lib.tensor([0, 1])).backward()     # layer 0 used twice
    return seen


def test_leaf_hooks_run_in_pytorchs_order():
    torch = pytest.importorskip("torch")
    assert _order(tracejit) == _order(torch)


def test_last_layer_leaves_before_the_first_layers():
    seen = _order(tracejit)
    assert seen.index("4.bias") < seen.index("2.weight") < seen.index("0.weight")
    assert sorted(seen) == sorted(["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"])
