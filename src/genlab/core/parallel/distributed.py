"""Data-parallel plumbing: the process group from torchrun's environment, ranks, sharding.

Under ``torchrun --nproc_per_node P`` every process runs the same command. The first
genlab object that needs the group (a RunDir, a Trainer, :func:`init_distributed`)
joins it from the environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT). Backend: gloo for CPU tensors, and NCCL for CUDA tensors
when CUDA and NCCL are present (one group serves both), so nothing is configured by
hand. Without torchrun (WORLD_SIZE unset or 1) every helper here is the one-process
identity: rank 0 of 1, no communication.

Sharding keeps the mathematics of one process: every rank draws the same global batch
(same seed, same step) and keeps its contiguous share (``torch.tensor_split``: shares
differ by at most one sample). A statistic over the global batch is the all-reduced
sum of the shares' sums (:func:`global_sum`), and gradients are the shares' gradients
weighted by their share of the batch (genlab.core.parallel.data_parallel).
"""

from __future__ import annotations

import atexit
import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from genlab.core.errors import ConfigError

_ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class ProcessInfo:
    """Where this process stands in the group."""

    rank: int
    world_size: int
    local_rank: int
    backend: str | None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def env_world_size() -> int:
    """WORLD_SIZE from the environment (1 when not launched by torchrun)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError as exc:
        raise ConfigError(f"WORLD_SIZE must be an integer, got {os.environ['WORLD_SIZE']!r}"
                          ) from exc


def choose_backend() -> str:
    """gloo for CPU tensors, plus NCCL for CUDA tensors when both CUDA and NCCL are there."""
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "cpu:gloo,cuda:nccl"
    return "gloo"


def init_distributed(timeout_s: float = 1800.0) -> ProcessInfo:
    """Join the process group described by the environment, once; idempotent.

    A no-op returning rank 0 of 1 when WORLD_SIZE is unset or 1.
    """
    if dist.is_available() and dist.is_initialized():
        return process_info()
    world = env_world_size()
    if world <= 1:
        return ProcessInfo(0, 1, 0, None)
    if not dist.is_available():
        raise ConfigError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    missing = [k for k in _ENV_KEYS if k not in os.environ]
    if missing:
        raise ConfigError(f"WORLD_SIZE={world} but {', '.join(missing)} not set: launch the "
                          "command with torchrun (e.g. torchrun --nproc_per_node 2 genlab ...)")
    backend = choose_backend()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if "nccl" in backend:
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
    atexit.register(_shutdown)
    return process_info()


def _shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_distributed() -> bool:
    """True inside an initialised group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def process_info() -> ProcessInfo:
    """Rank, world size, local rank and backend (rank 0 of 1 outside a group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return ProcessInfo(0, 1, 0, None)
    return ProcessInfo(dist.get_rank(), dist.get_world_size(),
                       int(os.environ.get("LOCAL_RANK", "0")), str(dist.get_backend()))


def rank() -> int:
    """This process's rank: from the group, or from RANK before the group exists."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0")) if env_world_size() > 1 else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main_process() -> bool:
    """Rank 0: the process that writes run folders and shows progress."""
    return rank() == 0


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def global_sum(values: Sequence[float] | torch.Tensor, device=None) -> torch.Tensor:
    """Sum of ``values`` over all processes (float64, on ``device``; a copy, never in place)."""
    t = torch.as_tensor(values, dtype=torch.float64, device=device).clone()
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def global_max(values: Sequence[float] | torch.Tensor, device=None) -> torch.Tensor:
    t = torch.as_tensor(values, dtype=torch.float64, device=device).clone()
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t


def all_gather(tensor: torch.Tensor) -> torch.Tensor:
    """The concatenation (dim 0, rank order) of every process's ``tensor``; sizes may differ."""
    if not is_distributed():
        return tensor
    sizes = [torch.zeros(1, dtype=torch.long, device=tensor.device)
             for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([tensor.shape[0]], device=tensor.device))
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros((longest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return torch.cat([p[: int(s.item())] for p, s in zip(parts, sizes, strict=True)])


def broadcast_object(obj, src: int = 0):
    """``obj`` as held by rank ``src`` (picklable objects; the identity outside a group)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


@torch.no_grad()
def broadcast_module(module: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every process's ``module``."""
    if not is_distributed():
        return
    for t in list(module.parameters()) + list(module.buffers()):
        dist.broadcast(t.data, src=src)


def shard_slice(n: int, rank_: int | None = None, world: int | None = None) -> slice:
    """Rows of a global batch of ``n`` that ``rank_`` keeps (torch.tensor_split's shares)."""
    rank_ = rank() if rank_ is None else rank_
    world = world_size() if world is None else world
    base, extra = divmod(n, world)
    start = rank_ * base + min(rank_, extra)
    return slice(start, start + base + (1 if rank_ < extra else 0))


def shard_batch(batch: Sequence, rank_: int | None = None,
                world: int | None = None) -> tuple[list, float]:
    """This rank's share of a global batch of equally long tensors, and its share of the batch.

    Any sliceable with ``len`` works in place of a tensor (e.g. typed label records).

    Raises ConfigError when a rank would get no sample (a batch smaller than the number
    of processes cannot be split without changing the mathematics).
    """
    world = world_size() if world is None else world
    n = len(batch[0])
    if world > 1 and n < world:
        raise ConfigError(
            f"a batch of {n} sample(s) cannot be split across {world} processes: choose a "
            "batch size (and data size) whose every batch, the last one included, holds at "
            f"least {world} samples"
        )
    rows = shard_slice(n, rank_, world)
    return [t[rows] for t in batch], (rows.stop - rows.start) / n
