"""LLM: the original JetEngine's engine object (generate, generate_streaming, the tokenizer and the
RL weight APIs) over the C++ engine."""

import dataclasses
import os

from . import _jetengine
from ._checks import check_bool, check_int, check_token_ids
from .call_profile import CallProfile, check_profile
from .config import Config
from .data_parallel import DataParallel
from .progress import Progress
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer
from .weights import model_weights, named_weights, shared_weights

WAKE_TAGS = ("weights", "kv_cache")


class LLM:
    """A block diffusion language model, ready to generate.

    LLM(model, **kwargs): `model` is a local HuggingFace folder (config.json, *.safetensors,
    tokenizer.json, tokenizer_config.json); the keyword arguments are the fields of
    jetengine.config.Config (the original's names and defaults); unknown ones raise TypeError.

    Both generate functions return one dict per prompt, in submission order, with the keys
    text (prompt + completion, special tokens kept), token_ids (prompt + completion), trajectory
    (per completion token, the 1-based denoising step that unmasked it, 0 if none did; also under
    first_unmask_times, the name TraceRL's JetEngine gave it), logprobs, entropies (one
    per completion token), completion_ids, completion_text (special tokens skipped),
    finish_reason ("stop" or "length"), num_forwards and prompt_len. Text prompts are encoded
    with tokenizer.encode (HuggingFace's default special tokens, as the original did).
    Under torchrun or accelerate launch with several ranks, every rank passes the same prompts and
    gets every output; each decodes its share (Config.data_parallel).
    The GIL is released while the engine runs; Ctrl-C raises KeyboardInterrupt once the next
    prompt finishes, and the engine stays usable.
    """

    def __init__(self, model, **kwargs):
        self.config = Config.from_kwargs(model, kwargs)
        self._data_parallel = DataParallel.from_launch(self.config.data_parallel, self.config.device != "cpu")
        self._engine = _jetengine.Engine(self.config.engine_options())
        self.tokenizer = Tokenizer(self._engine, self.config.model)

    @property
    def summary(self):
        """What the loaded model is: model_type, num_layers, hidden, heads, kv_heads, head_dim,
        vocab, block_length, mask_token_id, eos_token_ids, kv_pages, kv_page_size (each
        tensor-parallel rank's), device, tensor_parallel_size."""
        return self._engine.summary()

    def generate(self, prompts, sampling_params=None, use_tqdm=True, profile=False, profile_dir=None):
        """Decodes every prompt (all submitted at once; max_num_seqs run together).

        prompts: a list of str or a list of token-id lists. sampling_params: one SamplingParams
        for all prompts or a list with one per prompt (None = SamplingParams()). profile=True
        (TraceRL's JetEngine's keyword) writes a JSON summary of the call to profile_dir (None =
        "profiler_traces"): wall time, completion tokens and tok/s, forwards, and the seconds the
        device waited for the host.
        """
        return self._run(prompts, sampling_params, use_tqdm, "Generating", self._engine.generate,
                         check_profile(profile, profile_dir))

    def generate_streaming(self, prompts, sampling_params=None, max_active=None, use_tqdm=True, profile=False,
                           profile_dir=None):
        """Like generate, with at most max_active prompts in the engine at any time; a new one
        enters as soon as one finishes (None = max_num_seqs). Returns when all are done."""
        window = 0 if max_active is None else check_int("max_active", max_active, minimum=1, maximum=2**31 - 1)

        def run(prompt_ids, params, progress):
            return self._engine.generate_streaming(prompt_ids, params, window, progress)

        return self._run(prompts, sampling_params, use_tqdm, "Streaming", run, check_profile(profile, profile_dir))

    def update_weights(self, weights):
        """Overwrites the named weights in place; the KV cache and all other weights stay.

        weights: a dict {name: tensor} or an iterable of (name, tensor) pairs, with HuggingFace
        names ("model.layers.0.self_attn.q_proj.weight"; without the leading "model." also
        works). Tensors: numpy arrays, torch tensors or anything with the buffer protocol or
        DLPack, in float32, float16, bfloat16 or float64. A CUDA tensor on the engine's GPU is read
        there (bfloat16 copied on the device, other dtypes through the host); other devices' are
        copied to the CPU first. Every
        tensor is checked first: an unknown name or a wrong shape raises ValueError naming it,
        and then nothing has changed.
        """
        self._require_awake("update_weights")
        self._engine.update_weights(named_weights(weights, "weights", self._on_gpu()))

    def update_weights_from_ipc_handles(self, handles, device_index=None):
        """update_weights with tensors another process shares: handles is a dict {name: handle}
        or an iterable of (name, handle) pairs, each handle what
        torch.multiprocessing.reductions.reduce_tensor(tensor) returned in the sending process
        (a trainer beside the engine: for a CUDA tensor a CUDA IPC handle, so a tensor on the
        engine's GPU is copied on the device, never through the host; for a CPU tensor shared
        memory). device_index: the engine's number for the sender's GPU when the two processes
        number their GPUs differently (another CUDA_VISIBLE_DEVICES). Needs torch; the sender
        keeps its tensors alive until this returns. Errors as update_weights'."""
        self._require_awake("update_weights_from_ipc_handles")
        tensors = shared_weights(handles, "handles", device_index)
        self._engine.update_weights(named_weights(tensors, "handles", self._on_gpu()))

    def reload_from_hf_model(self, hf_model):
        """Loads all weights from an in-memory model (anything with state_dict() or
        named_parameters(), e.g. a transformers model being trained), after
        free_all_resources() / offload_parameters() or to replace every weight. A missing or
        mis-shaped tensor raises ValueError naming it, and the current weights stay."""
        self._engine.load_weights(model_weights(hf_model, self._on_gpu()))

    def reload_from_path(self, path):
        """Loads the model folder `path` (weights, config and tokenizer) and rebuilds the KV
        cache, with this engine's settings."""
        config = dataclasses.replace(self.config, model=path)  # checks that it is a folder
        self._engine.reload_from_path(config.model)
        self.config = config
        self.tokenizer = Tokenizer(self._engine, config.model)

    def offload_parameters(self, include_buffers=False):
        """Frees the weights; the KV cache stays. Generation raises RuntimeError until the
        weights come back (reload_from_hf_model / reload_from_path). include_buffers is the
        original's flag and has no effect here: the engine keeps no weight-sized buffers."""
        check_bool("include_buffers", include_buffers)
        self._engine.offload_parameters()

    def free_all_resources(self):
        """Frees the weights and the KV cache (the cache is rebuilt by the next generate after
        the weights are back)."""
        self._engine.free_all_resources()

    def shutdown(self):
        """Frees the weights and the KV cache, as the original's shutdown() (which RL rollout
        workers call before they exit) frees its device memory. Safe to call again; afterwards
        generate raises RuntimeError until reload_from_path / reload_from_hf_model."""
        self._engine.free_all_resources()

    def sleep(self, level=1):
        """Frees the device memory the engine holds, for rollouts that share the GPU with training
        (vLLM's LLM.sleep). level=1 copies the weights to host memory first and frees the KV
        cache; level=2 frees both (the weights come back through reload_from_hf_model or
        reload_from_path). generate and update_weights raise RuntimeError until wake_up()."""
        self._engine.sleep(check_int("level", level, minimum=1, maximum=2))

    def wake_up(self, tags=None):
        """Ends a sleep (vLLM's LLM.wake_up). tags: None for both, or a list of "weights" (back
        from host memory, bit for bit) and "kv_cache" (allocated now, leaving room for weights
        still in host memory; otherwise the next generate allocates it). A trainer's weights can
        go in between: wake_up(["weights"]), update_weights(...), wake_up(["kv_cache"])."""
        if tags is None:
            tags = WAKE_TAGS
        if isinstance(tags, str) or not isinstance(tags, (list, tuple, set)):
            raise TypeError(f"tags must be None or a list of {', '.join(map(repr, WAKE_TAGS))}, got {tags!r}")
        unknown = [t for t in tags if t not in WAKE_TAGS]
        if unknown:
            raise ValueError(f"unknown wake_up tag(s) {unknown!r}; known: {', '.join(map(repr, WAKE_TAGS))}")
        self._engine.wake_up("weights" in tags, "kv_cache" in tags)

    @property
    def is_sleeping(self):
        """True between sleep(1) and waking the weights."""
        return self._engine.is_sleeping()

    def has_weights(self):
        return self._engine.has_weights()

    def _run(self, prompts, sampling_params, use_tqdm, description, run, profile):
        dp = self._data_parallel
        if dp is None:
            prompt_ids, params = self._request(prompts, sampling_params, use_tqdm)
            return self._decode(prompt_ids, params, use_tqdm, description, run, profile, 0)
        try:
            prompt_ids, params = self._request(prompts, sampling_params, use_tqdm)
            error = None
        except Exception as e:  # raised on every rank, after they have compared their requests
            prompt_ids, error = None, e
        dp.check_same_request((prompt_ids, sampling_params), error)
        costs = [len(ids) + params[i if len(params) > 1 else 0].max_tokens for i, ids in enumerate(prompt_ids)]
        indices = dp.shard(costs)
        try:
            outputs = self._decode([prompt_ids[i] for i in indices], [params[i] for i in indices]
                                   if len(params) > 1 else params, use_tqdm and dp.rank == 0,
                                   f"{description} (rank 0 of {dp.world_size})", run, profile, dp.rank)
            error = None
        except BaseException as e:  # Ctrl-C included: the other ranks learn of it at the gather
            outputs, error = None, e
        return dp.gather(indices, outputs, error)

    def _request(self, prompts, sampling_params, use_tqdm):
        """The checked prompt ids and C++ SamplingParams (one for all, or one per prompt)."""
        prompt_ids = self._prompt_ids(prompts)
        params = [self.config.apply_exploration(p) for p in _engine_params(sampling_params, len(prompt_ids))]
        check_bool("use_tqdm", use_tqdm)
        if prompt_ids:
            self._require_awake("generate")
        if prompt_ids and not self._engine.has_weights():
            raise RuntimeError("the engine holds no weights (offload_parameters / free_all_resources freed them): "
                               "call reload_from_hf_model(model) or reload_from_path(dir) first")
        return prompt_ids, params

    def _decode(self, prompt_ids, params, use_tqdm, description, run, profile, rank):
        if not prompt_ids:
            return []
        call = CallProfile(self._engine, *profile, description.split()[0].lower(), rank)
        with Progress(len(prompt_ids), use_tqdm, description) as progress:
            outputs = run(prompt_ids, params, progress.callback())
        for output in outputs:
            output["first_unmask_times"] = list(output["trajectory"])
        call.finish(outputs)
        return outputs

    def _on_gpu(self):
        return self._engine.summary().device == "cuda"

    def _require_awake(self, what):
        if self._engine.is_sleeping():
            raise RuntimeError(f"{what}: the engine is asleep (sleep(level=1) moved its weights to host memory); "
                               "call wake_up() first")

    def _prompt_ids(self, prompts):
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
            raise TypeError(f"prompts must be a list of str or a list of token-id lists, got {type(prompts).__name__}"
                            + ("; wrap a single prompt in a list" if isinstance(prompts, str) else ""))
        return [self.tokenizer.encode(p) if isinstance(p, str) else check_token_ids(f"prompts[{i}]", p)
                for i, p in enumerate(prompts)]


def _engine_params(sampling_params, count):
    """One checked C++ SamplingParams for all prompts, or one per prompt."""
    if sampling_params is None:
        sampling_params = SamplingParams()
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params.to_engine()]
    if not isinstance(sampling_params, (list, tuple)):
        raise TypeError(f"sampling_params must be a SamplingParams or a list of them, "
                        f"got {type(sampling_params).__name__}")
    if len(sampling_params) != count:
        raise ValueError(f"sampling_params has {len(sampling_params)} entries for {count} prompts: "
                         "give one SamplingParams, or one per prompt")
    for i, params in enumerate(sampling_params):
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling_params[{i}] must be a SamplingParams, got {type(params).__name__}")
    return [params.to_engine() for params in sampling_params]
