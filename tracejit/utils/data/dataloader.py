"""DataLoader: batches from a dataset, in the main process or in worker processes.

With `num_workers > 0` each worker process gets batches of indices over its own queue (round robin, at
most `prefetch_factor` outstanding per worker), loads and collates them, and sends them back over one
shared queue; the main process hands batches out in sampler order. Errors raised in a worker are re-raised
in the main process with the worker's traceback.
"""
import itertools
import multiprocessing
import queue
import random
import sys
import traceback

import numpy as np

from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class WorkerInfo:
    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, dataset={self.dataset})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process: its id, num_workers, seed and dataset copy. None in the main process."""
    return _worker_info


class _InfiniteConstantSampler(Sampler):
    def __iter__(self):
        while True:
            yield None


class _ExceptionWrapper:
    def __init__(self, where):
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type
        self.msg = f"Caught {exc_type.__name__} {where}.\nOriginal " + "".join(traceback.format_exception(exc_type, exc, tb))

    def reraise(self):
        try:
            err = self.exc_type(self.msg)
        except Exception:  # noqa: BLE001  (an exception type that takes other arguments)
            err = RuntimeError(self.msg)
        raise err


class _IterableStop:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Resume:
    """Restart a persistent worker's fetcher for a new epoch."""


# ------------------------------------------------------------------------------------------ fetchers

class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        from .dataset import _has_collated_batch
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.fast = auto_collation and collate_fn is default_collate and _has_collated_batch(dataset)

    def fetch(self, index):
        if self.fast:
            return self.dataset._collated_batch(index)
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.it = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.it))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.it)
        return self.collate_fn(data)


def _fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
    cls = _IterableFetcher if kind == "iterable" else _MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


# ------------------------------------------------------------------------------------------ workers

def _seed_worker(seed):
    from ...random import manual_seed
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(seed % (2 ** 32))


def _worker_loop(kind, dataset, index_queue, data_queue, auto_collation, collate_fn, drop_last, seed, init_fn,
                 worker_id, num_workers):
    global _worker_info
    try:
        _seed_worker(seed)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:  # noqa: BLE001  (sent to the main process)
            init_error = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
            fetcher = None
        while True:
            r = index_queue.get()
            if r is None:
                break
            if isinstance(r, _Resume):
                fetcher = _fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
                data_queue.put((r, None))
                continue
            idx, index = r
            if init_error is not None:
                data, init_error = init_error, None
            elif fetcher is None:
                continue
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    data = _IterableStop(worker_id) if kind == "iterable" else None
                except Exception:  # noqa: BLE001
                    data = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
            data_queue.put((idx, data))
    except KeyboardInterrupt:
        pass
    finally:
        data_queue.cancel_join_thread()


# ------------------------------------------------------------------------------------------ iterators

def _base_seed(loader):
    """Drawn from the loader's generator at the start of every epoch, in both modes (as PyTorch does), so that
    a shuffled order depends only on the generator, not on num_workers."""
    from ...creation import randint
    return int(randint(0, 2 ** 62, (1,), generator=loader.generator).item())


class _SingleProcessIter:
    def __init__(self, loader):
        self._loader = loader
        self._base_seed = _base_seed(loader)
        self._index_sampler = loader._index_sampler
        self._sampler_iter = iter(self._index_sampler)
        self._fetcher = _fetcher(loader._kind, loader.dataset, loader._auto_collation, loader.collate_fn,
                                 loader.drop_last)

    def __iter__(self):
        return self

    def __next__(self):
        index = next(self._sampler_iter)
        return self._fetcher.fetch(index)

    def __len__(self):
        return len(self._loader)


class _MultiProcessIter:
    def __init__(self, loader):
        self._loader = loader
        self._kind = loader._kind
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
        self._timeout = loader.timeout if loader.timeout > 0 else None
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        base_seed = _base_seed(loader)
        self._data_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        for i in range(self._num_workers):
            iq = ctx.Queue()
            iq.cancel_join_thread()
            w = ctx.Process(target=_worker_loop, args=(
                self._kind, loader.dataset, iq, self._data_queue, loader._auto_collation, loader.collate_fn,
                loader.drop_last, base_seed + i, loader.worker_init_fn, i, self._num_workers), daemon=True)
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        self._shutdown = False
        self._reset(first=True)

    def _reset(self, first=False):
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0          # next task id to send
        self._rcvd_idx = 0          # next task id to hand out
        self._task_info = {}        # task id -> (worker,) while pending, (worker, data) once received
        self._tasks_outstanding = 0
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first:  # persistent workers: restart their fetchers for the new epoch
            for q in self._index_queues:
                q.put(_Resume())
            pending = self._num_workers
            while pending:
                r, _ = self._get()
                if isinstance(r, _Resume):
                    pending -= 1
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _try_put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._worker_cycle)
            if self._active[w]:
                break
        else:
            return
        self._index_queues[w].put((self._send_idx, index))
        self._task_info[self._send_idx] = (w,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get(self):
        while True:
            try:
                return self._data_queue.get(timeout=self._timeout if self._timeout else 5.0)
            except queue.Empty:
                if self._timeout:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                dead = [w.pid for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                       "unexpectedly") from None

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._active[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]   # its worker ended (iterable dataset)
                self._rcvd_idx += 1
            else:
                if not self._loader.persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            idx, data = self._get()
            if isinstance(idx, _Resume):
                continue
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableStop):
                self._active[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
                continue
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            self._shutdown_workers()
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=5.0)
            if w.is_alive():
                w.terminate()
        for q in self._index_queues:
            q.close()
        self._data_queue.cancel_join_thread()
        self._data_queue.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


# ------------------------------------------------------------------------------------------ DataLoader

class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._kind = "iterable"
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            self._kind = "map"
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if self._kind == "iterable":
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self):
        if self._kind == "iterable":
            length = len(self.dataset)
            if self.batch_size is not None:
                import math
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)
