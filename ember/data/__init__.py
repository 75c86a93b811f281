"""Datasets, samplers and the DataLoader that batches them (PyTorch's torch.utils.data)."""

from ember.data.collate import default_collate, default_convert
from ember.data.dataloader import DataLoader
from ember.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    TransformDataset,
    random_split,
)
from ember.data.distributed import DistributedSampler
from ember.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from ember.data.worker import WorkerInfo, get_worker_info

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler", "TensorDataset",
    "TransformDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert", "get_worker_info",
    "random_split",
]
