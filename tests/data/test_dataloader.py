"""utils.data: datasets, samplers, batching, default collation, shuffling with a generator, worker processes."""
import collections

import numpy as np
import pytest

import tracejit as tj
from tracejit.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                                 SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
                                 WeightedRandomSampler, default_collate, get_worker_info, random_split)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "y": i * i, "name": f"s{i}"}


class Range(IterableDataset):
    """Shards itself across workers with get_worker_info()."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("bad sample 5")
        return i


class WorkerSeed(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, float(tj.rand(1)))


def test_tensor_dataset_batches_in_order():
    x, y = tj.arange(10.0).reshape(10, 1), tj.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert isinstance(batches[0], list) and batches[0][1].dtype is tj.int64
    np.testing.assert_array_equal(batches[2][1].numpy(), [8, 9])
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(tj.ones(3), tj.ones(4))


def test_shuffle_with_generator():
    ds = TensorDataset(tj.arange(20))

    def order(seed):
        g = tj.Generator().manual_seed(seed)
        return [int(v) for (b,) in DataLoader(ds, batch_size=5, shuffle=True, generator=g) for v in b]
    a, b, c = order(1), order(1), order(2)
    assert sorted(a) == list(range(20)) and a == b and a != c and a != list(range(20))
    g = tj.Generator().manual_seed(1)
    dl = DataLoader(ds, batch_size=5, shuffle=True, generator=g)
    e1 = [int(v) for (b,) in dl for v in b]
    e2 = [int(v) for (b,) in dl for v in b]
    assert e1 != e2  # a new permutation each epoch
    tj.manual_seed(5)
    s1 = list(RandomSampler(range(10)))
    tj.manual_seed(5)
    assert list(RandomSampler(range(10))) == s1  # no generator: seeded from the global RNG


def test_default_collate_rules():
    batch = default_collate([(1, 2.5, True, "a", np.ones(2, np.int32), tj.zeros(3)),
                             (2, 3.5, False, "b", np.zeros(2, np.int32), tj.ones(3))])
    assert isinstance(batch, list) and len(batch) == 6
    assert batch[0].dtype is tj.int64 and batch[1].dtype is tj.float64 and batch[2].dtype is tj.bool
    assert batch[3] == ("a", "b") and batch[4].dtype is tj.int32 and batch[5].shape == (2, 3)
    d = default_collate([{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}])
    assert d["a"].tolist() == [1, 2] and [t.tolist() for t in d["b"]] == [[1.0, 3.0], [2.0, 4.0]]
    P = collections.namedtuple("P", "x y")
    p = default_collate([P(1, 2.0), P(3, 4.0)])
    assert isinstance(p, P) and p.x.tolist() == [1, 3]
    assert default_collate([np.float32(1), np.float32(2)]).dtype is tj.float32
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


def test_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as tc
    samples = [{"x": np.arange(3, dtype=np.float32) * i, "y": i, "z": (float(i), [i, i + 1])} for i in range(4)]
    a, b = default_collate(samples), tc(samples)
    assert list(a) == list(b)
    for k in ("x", "y"):
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
        assert a[k].dtype.name == str(b[k].dtype).split(".")[-1]
    assert type(a["z"]) is type(b["z"]) and type(a["z"][1]) is type(b["z"][1])


def test_dict_dataset_and_custom_collate():
    dl = DataLoader(Squares(5), batch_size=2)
    b = next(iter(dl))
    assert b["x"].shape == (2, 2) and b["y"].tolist() == [0, 1] and b["name"] == ["s0", "s1"]
    dl = DataLoader(Squares(5), batch_size=3, collate_fn=lambda items: len(items))
    assert list(dl) == [3, 2]
    dl = DataLoader(Squares(3), batch_size=None)
    first = next(iter(dl))
    assert isinstance(first["x"], tj.Tensor) and first["y"] == 0


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    g = tj.Generator().manual_seed(0)
    assert sorted(SubsetRandomSampler([3, 5, 7], generator=g)) == [3, 5, 7]
    ws = list(WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], 6))
    assert ws == [2] * 6
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    rs = RandomSampler(range(5), replacement=True, num_samples=40, generator=g)
    draws = list(rs)
    assert len(draws) == 40 and set(draws) <= set(range(5))
    dl = DataLoader(range(10), batch_sampler=BatchSampler(SequentialSampler(range(10)), 4, True))
    assert [b.tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(range(10), batch_size=2, batch_sampler=bs)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(range(10), sampler=SequentialSampler(range(10)), shuffle=True)


def test_subset_concat_random_split():
    ds = TensorDataset(tj.arange(10))
    a, b = random_split(ds, [7, 3], generator=tj.Generator().manual_seed(0))
    got = sorted(int(a[i][0]) for i in range(len(a))) + sorted(int(b[i][0]) for i in range(len(b)))
    assert sorted(got) == list(range(10)) and len(a) == 7
    parts = random_split(range(10), [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [5, 3, 2]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [3, 3])
    s = Subset(range(10), [9, 1])
    assert s[0] == 9 and len(s) == 2
    c = ConcatDataset([range(3), range(10, 12)])
    assert len(c) == 5 and c[3] == 10 and c[-1] == 11
    assert len(Squares(2) + Squares(3)) == 5


def test_iterable_dataset_single_process():
    dl = DataLoader(Range(7), batch_size=3)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Range(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Range(3), shuffle=True)


def test_workers_same_batches_as_main_process():
    ds = TensorDataset(tj.arange(23.0).reshape(23, 1), tj.arange(23))
    ref = [b[1].tolist() for b in DataLoader(ds, batch_size=4)]
    got = [b[1].tolist() for b in DataLoader(ds, batch_size=4, num_workers=2)]
    assert got == ref
    g1, g2 = tj.Generator().manual_seed(7), tj.Generator().manual_seed(7)
    a = [b[1].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g1, num_workers=2)]
    b = [b[1].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g2)]
    assert a == b


def test_workers_init_fn_info_and_seeds():
    dl = DataLoader(WorkerSeed(), batch_size=None, num_workers=2, worker_init_fn=lambda wid: tj.manual_seed(100 + wid))
    items = list(dl)
    assert sorted(i for i, _ in items) == [0, 0, 1, 1]
    expected = {wid: float(tj.Generator().manual_seed(100 + wid) and tj.rand(1, generator=tj.Generator().manual_seed(
        100 + wid))) for wid in (0, 1)}
    firsts = {}
    for wid, v in items:
        firsts.setdefault(wid, v)
    assert firsts == pytest.approx(expected)
    assert get_worker_info() is None


def test_workers_iterable_dataset_sharded():
    got = [b.tolist() for b in DataLoader(Range(10), batch_size=2, num_workers=2)]
    flat = sorted(v for b in got for v in b)
    assert flat == list(range(10))
    assert got[0] == [0, 2] and got[1] == [1, 3]  # round robin over workers, each with its shard


def test_worker_error_is_reraised_and_persistent_workers():
    with pytest.raises(ValueError, match="bad sample 5"):
        list(DataLoader(Failing(), batch_size=2, num_workers=2))
    dl = DataLoader(TensorDataset(tj.arange(9)), batch_size=4, num_workers=2, persistent_workers=True)
    e1 = [b[0].tolist() for b in dl]
    e2 = [b[0].tolist() for b in dl]
    assert e1 == e2 == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    dl._iterator._shutdown_workers()


def test_tensor_dataset_fast_batches_equal_default_collate():
    from tracejit.utils.data import default_collate as dc
    ds = TensorDataset(tj.randn(10, 3), tj.arange(10), tj.ones(10, dtype=tj.bool))
    for d in (ds, Subset(ds, [3, 1, 4, 1, 5, 9, 2])):
        fast = list(DataLoader(d, batch_size=3))
        slow = list(DataLoader(d, batch_size=3, collate_fn=lambda b: dc(b)))
        assert len(fast) == len(slow)
        for a, b in zip(fast, slow):
            assert type(a) is type(b) and len(a) == len(b)
            for x, y in zip(a, b):
                assert x.dtype is y.dtype and x.shape == y.shape
                np.testing.assert_array_equal(x.numpy(), y.numpy())
