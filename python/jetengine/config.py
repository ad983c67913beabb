"""Config: the keyword arguments of `LLM(model, **kwargs)` — the original JetEngine's Config fields
with their defaults, plus a few of ours — checked and mapped onto the C++ engine's options."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Optional

from . import _jetengine
from ._checks import check_bool, check_choice, check_float, check_int

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "bfloat16", "float16", "float32")
LOAD_FORMATS = ("auto", "dummy")
QUANTIZATIONS = (None, "fp8")


@dataclass
class Config:
    """Engine settings. Fields of the original that this engine has no use for are accepted (so
    scripts written for it run unchanged) and checked, but have no effect; they are marked below.

    model: a local HuggingFace model folder.
    max_num_batched_tokens: tokens of one forward at most; a step's sequences are split into as
        many forwards as that takes (one sequence's block or prompt may exceed it alone). It bounds
        the activation memory, which CUDA sets aside before sizing the KV cache. (The original
        used it only to size its warm-up, with a default of 131072.)
    max_num_seqs: sequences decoded together at most.
    max_model_len: prompt + completion tokens of one sequence at most (clamped to the model's
        max_position_embeddings).
    gpu_memory_utilization: CUDA: the share of the GPU's memory this engine may fill (its own, as
        in vLLM: two engines of 0.45 share a GPU); the KV cache gets what the weights and the
        activations of the largest forward leave of it, never more than is free beside other
        processes, less 1 GiB (unless kv_cache_memory_bytes or num_kvcache_blocks sizes it). No
        effect on the CPU.
    tensor_parallel_size: the model split over this many GPUs of one host, from the one `device`
        names ("cuda:N" takes N, N + 1, ...; under a launcher each data-parallel rank takes its own
        run of GPUs, from LOCAL_RANK x tensor_parallel_size), or over CPU threads sharing its
        cores. It must divide the attention heads and MLP widths (docs/tensor_parallel.md).
    enable_expert_parallel: mixture-of-experts models under tensor parallelism: each rank holds
        1 / tensor_parallel_size of the routed experts, whole, instead of that share of every
        expert's width (as vLLM's option of this name); the expert count must divide.
    enforce_eager: CUDA: launch every op of every forward instead of replaying CUDA graphs of the
        denoise forward (slower; for debugging).
    diversity_enforce: every request uses the sequential strategy in the blocks it begins with at
        most diversity_enforce_barrier completion tokens (the first block always).
    epsilon_greedy: every denoise step of every request uses the random strategy instead of its
        own with probability epsilon (a seeded draw per block and step, so seeded requests stay
        reproducible). With both on, diversity_enforce decides first; the original ignored
        epsilon_greedy then. docs/decoding.md §4 has the exact rules.
    kvcache_block_size: tokens per KV-cache page (independent of block_length: a block may start
        inside a page and span several).
    num_kvcache_blocks: KV-cache pages; -1 = as many as kv_cache_memory_bytes allows.
    mask_token_id: -1 = the model's (config.json, else the family's default). The original
        required it.
    block_length: the diffusion block length; None = the block size the model was trained with
        (the original defaulted to 4, which every released SDAR model uses).
    dtype: no effect; the backend picks its compute dtype (CPU: float32, CUDA: bfloat16).
    Ours: device ("auto", "cpu", "cuda", "cuda:N"; "cuda" and "auto" take the GPU of LOCAL_RANK
    under torchrun / accelerate when more than one is visible); num_threads (CPU threads, 0 = all cores);
    kv_cache_memory_bytes (KV-cache budget, 0 = the backend's default); enable_prefix_caching;
    load_format ("auto": the folder's safetensors; "dummy": random weights of config.json's shapes,
    for benchmarks, as in vLLM: the folder needs config.json and the tokenizer only).
    data_parallel: under a launcher that starts several ranks (torchrun, accelerate launch: WORLD_SIZE > 1),
    every rank passes the same prompts to generate, each decodes a share balanced by prompt + max_tokens
    length, and every rank returns all outputs in submission order (needs torch.distributed; the
    default process group is set up when the launcher has not). False: each rank generates only what
    it is given, as the original did.
    quantize_fp8 (the original's name) or quantization="fp8": the projections are quantized to FP8
    e4m3 as they load, with per-channel weight scales and dynamic per-row activation scales
    (docs/fp8.md; the CPU backend today). A checkpoint stored in FP8 runs FP8 without either.
    """

    model: str
    max_num_batched_tokens: int = 16384
    max_num_seqs: int = 512
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.8
    tensor_parallel_size: int = 1
    enable_expert_parallel: bool = False
    enforce_eager: bool = False
    diversity_enforce: bool = False
    diversity_enforce_barrier: int = 100
    epsilon_greedy: bool = False
    epsilon: float = 0.1
    kvcache_block_size: int = 256
    num_kvcache_blocks: int = -1
    mask_token_id: int = -1
    block_length: Optional[int] = None
    dtype: str = "auto"
    device: str = "auto"
    num_threads: int = 0
    kv_cache_memory_bytes: int = 0
    enable_prefix_caching: bool = True
    load_format: str = "auto"
    quantize_fp8: bool = False
    quantization: Optional[str] = None
    data_parallel: bool = True

    def __post_init__(self):
        if not isinstance(self.model, (str, os.PathLike)):
            raise TypeError(f"model must be a path to a model folder, got {type(self.model).__name__}")
        self.model = os.fspath(self.model)
        if not os.path.isdir(self.model):
            raise ValueError(f"model must be a local model folder; {self.model!r} is not a directory")
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, minimum=1, maximum=2**31 - 1)
        check_int("max_num_seqs", self.max_num_seqs, minimum=1, maximum=2**31 - 1)
        check_int("max_model_len", self.max_model_len, minimum=1, maximum=2**31 - 1)
        check_float("gpu_memory_utilization", self.gpu_memory_utilization, maximum=1.0, above=0.0)
        check_int("tensor_parallel_size", self.tensor_parallel_size, minimum=1, maximum=64)
        check_bool("enable_expert_parallel", self.enable_expert_parallel)
        check_bool("enforce_eager", self.enforce_eager)
        check_bool("diversity_enforce", self.diversity_enforce)
        check_bool("epsilon_greedy", self.epsilon_greedy)
        check_int("diversity_enforce_barrier", self.diversity_enforce_barrier, minimum=0, maximum=2**31 - 1)
        check_float("epsilon", self.epsilon, minimum=0.0, maximum=1.0)
        check_int("kvcache_block_size", self.kvcache_block_size, minimum=1, maximum=2**31 - 1)
        if check_int("num_kvcache_blocks", self.num_kvcache_blocks, minimum=-1) == 0:
            raise ValueError("num_kvcache_blocks must be -1 (automatic) or >= 1, got 0")
        check_int("mask_token_id", self.mask_token_id, minimum=-1, maximum=2**31 - 1)
        if self.block_length is not None:
            check_int("block_length", self.block_length, minimum=1, maximum=2**31 - 1)
        check_choice("dtype", self.dtype, DTYPES)
        check_device(self.device)
        check_int("num_threads", self.num_threads, minimum=0, maximum=2**31 - 1)
        check_int("kv_cache_memory_bytes", self.kv_cache_memory_bytes, minimum=0)
        check_bool("enable_prefix_caching", self.enable_prefix_caching)
        check_choice("load_format", self.load_format, LOAD_FORMATS)
        check_bool("quantize_fp8", self.quantize_fp8)
        check_bool("data_parallel", self.data_parallel)
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be None (as the checkpoint stores its weights) or 'fp8', "
                             f"got {self.quantization!r}")

    @classmethod
    def from_kwargs(cls, model, kwargs):
        """Like Config(model, **kwargs), but unknown names are reported as LLM arguments."""
        known = {f.name for f in dataclasses.fields(cls)} - {"model"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"LLM() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                            f"accepted: {', '.join(sorted(known))}")
        return cls(model, **kwargs)

    def apply_exploration(self, params):
        """Sets the exploration modifiers of a C++ SamplingParams from diversity_enforce and
        epsilon_greedy (engine-wide here, as in the original; per request in the C++ API)."""
        params.diversity_enforce_barrier = self.diversity_enforce_barrier if self.diversity_enforce else -1
        params.epsilon_greedy = self.epsilon if self.epsilon_greedy else 0.0
        return params

    def engine_options(self):
        options = _jetengine.EngineOptions()
        options.model = self.model
        options.device = self.device
        options.mask_token_id = self.mask_token_id
        options.block_length = self.block_length or 0
        options.max_num_seqs = self.max_num_seqs
        options.max_model_len = self.max_model_len
        options.kvcache_page_size = self.kvcache_block_size
        options.max_num_batched_tokens = self.max_num_batched_tokens
        options.num_kvcache_pages = self.num_kvcache_blocks
        options.kv_cache_memory_bytes = self.kv_cache_memory_bytes
        options.enable_prefix_caching = self.enable_prefix_caching
        options.num_threads = self.num_threads
        options.tensor_parallel_size = self.tensor_parallel_size
        options.enable_expert_parallel = self.enable_expert_parallel
        options.enforce_eager = self.enforce_eager
        options.gpu_memory_utilization = self.gpu_memory_utilization
        options.load_format = self.load_format
        options.quantization = "fp8" if self.quantize_fp8 or self.quantization == "fp8" else ""
        return options


def check_device(device):
    if not isinstance(device, str):
        raise TypeError(f"device must be a str, got {type(device).__name__} {device!r}")
    if device not in DEVICES and not re.fullmatch(r"cuda:[0-9]{1,6}", device):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N: a GPU index); got {device!r}")
