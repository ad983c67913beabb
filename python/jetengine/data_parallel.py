"""Data parallel over the ranks of a launcher (torchrun, accelerate launch, or a process group the
script set up): every rank holds one engine and passes the same prompts to generate, the prompts
are split across the ranks by length, and every rank returns every output in submission order.
torch.distributed does the rendezvous and the gather; without torch a world size > 1 is an error."""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import sys
from datetime import timedelta

from . import _jetengine

# A rank that finishes its share waits at the gather for the slowest one, which may take hours on
# a large rollout; a crashed rank is the launcher's to report (torchrun ends the others).
GATHER_TIMEOUT = timedelta(hours=24)

_gloo_groups = {}  # default process group -> the gloo group of our gathers over the same ranks


def launch_world():
    """(rank, world_size) of this process: torch.distributed's when a process group is set up,
    else RANK and WORLD_SIZE as launchers set them, else (0, 1)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    world = _env_int("WORLD_SIZE", 1, minimum=1)
    rank = _env_int("RANK", 0, minimum=0)
    if rank >= world:
        raise ValueError(f"RANK={rank} is not below WORLD_SIZE={world}: the launcher's environment is inconsistent")
    return rank, world


def _env_int(name, default, minimum):
    text = os.environ.get(name, "")
    if not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"the environment variable {name}={text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"the environment variable {name}={value} must be >= {minimum}")
    return value


class DataParallel:
    """The ranks of one launch and the gloo group that carries the engine's gathers."""

    def __init__(self, rank, world_size, group, dist):
        self.rank = rank
        self.world_size = world_size
        self._group = group
        self._dist = dist

    @classmethod
    def from_launch(cls, enabled, uses_cuda):
        """The launch's data parallel, or None for a single process (or enabled=False, where each
        rank generates only what it is given). Sets up torch.distributed's default process group
        when the launcher has not (NCCL when the engine runs on a GPU, else gloo), so that the
        script can use it as it did with the original JetEngine."""
        rank, world = launch_world()
        if world == 1:
            return None
        try:
            import torch.distributed as dist
        except ImportError:
            if not enabled:
                return None
            raise RuntimeError(f"this process is rank {rank} of {world} (WORLD_SIZE={world}), and data parallel "
                               "needs torch.distributed to share the prompts and gather the outputs: install PyTorch "
                               "(pip install torch, or Debian's python3-torch), or pass data_parallel=False to LLM() "
                               "so that each rank generates only the prompts it is given") from None
        if not dist.is_available():
            raise RuntimeError("this PyTorch was built without torch.distributed, which data parallel needs; "
                               "pass data_parallel=False to LLM() to generate on each rank alone")
        if not enabled:  # the group is set up for the script's own use, when the launcher says where
            if not dist.is_initialized() and os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
                _init_default_group(dist, rank, world, uses_cuda)
            return None
        if not dist.is_initialized():
            _init_default_group(dist, rank, world, uses_cuda)
        return cls(dist.get_rank(), dist.get_world_size(), _gloo_group(dist), dist)

    def shard(self, costs):
        """This rank's prompt indices, ascending (the engine's rule, include/jet/data_parallel.h:
        largest cost first to the least loaded rank), the same on every rank."""
        return _jetengine.data_parallel_share(costs, self.world_size, self.rank)

    def check_same_request(self, request, error):
        """Every rank must pass the same prompts and settings: raises on every rank, with the same
        message, when one rank's request failed its checks (error) or differs from rank 0's."""
        digest = None if error is not None else hashlib.sha256(pickle.dumps(request)).hexdigest()
        ranks = self._all_gather((digest, None if error is None else f"{type(error).__name__}: {error}"))
        if error is not None:
            raise error
        failed = [(r, message) for r, (_, message) in enumerate(ranks) if message is not None]
        if failed:
            r, message = failed[0]
            raise ValueError(f"data-parallel rank {r} rejected the request: {message}")
        differ = [r for r, (d, _) in enumerate(ranks) if d != ranks[0][0]]
        if differ:
            raise ValueError(f"data-parallel ranks {differ} passed other prompts or sampling params than rank 0: "
                             "every rank passes the same list, which the engine splits across the ranks; pass "
                             "data_parallel=False to LLM() if the script gives each rank its own prompts")

    def gather(self, indices, outputs, error):
        """Every rank's outputs, in submission order; raises on every rank if one rank failed."""
        ranks = self._all_gather((indices, None if error is not None else outputs,
                                  None if error is None else f"{type(error).__name__}: {error}"))
        if error is not None:
            raise error
        for r, (_, _, message) in enumerate(ranks):
            if message is not None:
                raise RuntimeError(f"data-parallel rank {r} failed while generating its share: {message}")
        merged = {}
        for rank_indices, rank_outputs, _ in ranks:
            merged.update(zip(rank_indices, rank_outputs))
        return [merged[i] for i in range(len(merged))]

    def _all_gather(self, value):
        values = [None] * self.world_size
        self._dist.all_gather_object(values, value, group=self._group)
        return values


def _init_default_group(dist, rank, world, uses_cuda):
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"WORLD_SIZE={world} but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                           "not set: start the ranks with torchrun or accelerate launch (which set them), or call "
                           "torch.distributed.init_process_group before LLM()")
    import torch
    backend = "nccl" if uses_cuda and torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    options = {"timeout": GATHER_TIMEOUT} if backend == "gloo" else {}
    dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world, **options)
    # Torch's own teardown at interpreter exit races its gloo threads (now and then a rank aborts
    # after its work is done): the group we made goes first.
    atexit.register(_destroy_default_group, dist)


def _destroy_default_group(dist):
    if dist.is_initialized():
        _gloo_groups.clear()
        dist.destroy_process_group()


def _gloo_group(dist):
    """The default group when it is gloo; otherwise one gloo group over the same ranks (made
    once), since the gathers carry Python objects on the CPU."""
    default = dist.group.WORLD
    if dist.get_backend() == "gloo":
        return default
    if default not in _gloo_groups:
        _gloo_groups[default] = dist.new_group(backend="gloo", timeout=GATHER_TIMEOUT)
    return _gloo_groups[default]
