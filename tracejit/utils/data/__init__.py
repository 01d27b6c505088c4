"""tracejit.utils.data: datasets, samplers and the DataLoader (PyTorch's torch.utils.data)."""
from .dataset import (Dataset, IterableDataset, TensorDataset, StackDataset, ConcatDataset, ChainDataset, Subset,
                      random_split)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler,
                      BatchSampler)
from ._collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info, WorkerInfo
from .distributed import DistributedSampler
