"""DistributedSampler: PyTorch's index layout (padding, drop_last, strides), each sample to one rank per epoch."""
import numpy as np
import pytest

import tracejit as tj
from tracejit.utils.data import DistributedSampler


def _layout(n, reps, drop_last):
    """Reference layout written from the definition: pad by repeating from the start, or cut; rank r takes r::reps."""
    idx = list(range(n))
    if drop_last:
        total = (n // reps) * reps
        idx = idx[:total]
    else:
        total = -(-n // reps) * reps
        while len(idx) < total:
            idx += idx[:total - len(idx)]
    return [idx[r::reps] for r in range(reps)]


@pytest.mark.parametrize("n,reps", [(10, 3), (12, 3), (2, 5), (7, 2), (1, 4)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_layout_without_shuffle(n, reps, drop_last):
    if drop_last and n < reps:
        shards = [list(DistributedSampler(range(n), reps, r, shuffle=False, drop_last=True)) for r in range(reps)]
        assert all(s == [] for s in shards)
        return
    shards = [list(DistributedSampler(range(n), reps, r, shuffle=False, drop_last=drop_last)) for r in range(reps)]
    assert shards == _layout(n, reps, drop_last)
    assert len({len(s) for s in shards}) == 1 and len(DistributedSampler(range(n), reps, 0, drop_last=drop_last)) == len(shards[0])


@pytest.mark.parametrize("n,reps", [(10, 3), (12, 4), (9, 2)])
def test_shuffle_covers_every_sample_once_per_epoch(n, reps):
    samplers = [DistributedSampler(range(n), reps, r, shuffle=True, seed=7) for r in range(reps)]
    epochs = []
    for epoch in range(3):
        for s in samplers:
            s.set_epoch(epoch)
        shards = [list(s) for s in samplers]
        flat = [i for s in shards for i in s]
        pad = len(flat) - n
        assert sorted(set(flat)) == list(range(n)) and pad == (-n) % reps
        # without the padding (the first `pad` indices repeated at the end) every sample is on exactly one rank
        order = [shards[k % reps][k // reps] for k in range(len(flat))]
        assert sorted(order[:n]) == list(range(n)) and order[n:] == order[:pad]
        epochs.append(order)
        again = [list(s) for s in samplers]
        assert again == shards                                    # same epoch: same order
    assert epochs[0] != epochs[1] != epochs[2]                     # set_epoch reshuffles
    g = tj.Generator()
    g.manual_seed(7 + 2)
    assert epochs[2][:n] == tj.randperm(n, generator=g).tolist()   # the permutation of seed + epoch


def test_same_as_torch_for_the_same_permutation(monkeypatch):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for n, reps, drop_last in [(10, 3, False), (10, 3, True), (11, 4, False), (3, 5, False)]:
        for epoch in (0, 3):
            ours = [DistributedSampler(range(n), reps, r, seed=5, drop_last=drop_last) for r in range(reps)]
            for s in ours:
                s.set_epoch(epoch)
            g = tj.Generator()
            g.manual_seed(5 + epoch)
            perm = tj.randperm(n, generator=g).numpy()
            # torch's sampler over the same permutation (its generator's stream differs from ours)
            monkeypatch.setattr(torch, "randperm", lambda k, generator=None: torch.from_numpy(perm.copy()))
            theirs = [TorchSampler(range(n), reps, r, seed=5, drop_last=drop_last) for r in range(reps)]
            for s in theirs:
                s.set_epoch(epoch)
            assert [list(s) for s in ours] == [list(s) for s in theirs]
            assert [len(s) for s in ours] == [len(s) for s in theirs]
            monkeypatch.undo()


def test_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="has not been initialized"):
        DistributedSampler(range(4))
    loader = tj.utils.data.DataLoader(tj.utils.data.TensorDataset(tj.arange(10)), batch_size=2,
                                      sampler=DistributedSampler(range(10), 2, 1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1, 3], [5, 7], [9]]
    assert np.array_equal(np.arange(10)[1::2], [1, 3, 5, 7, 9])
