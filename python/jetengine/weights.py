"""Named weights for the RL weight APIs: a dict, an iterable of (name, tensor) pairs or an in-memory
HuggingFace model, turned into (HuggingFace name, tensor) pairs for the engine: host tensors, and
CUDA tensors as they are when the engine runs on the GPU (it copies them there on the device).
torch is never imported: its tensors are recognised by their methods, and the C++ side reads any
tensor through the buffer protocol (numpy) or DLPack (torch, JAX)."""

from collections.abc import Mapping

# A tied model's one embedding matrix, which torch's state_dict() also lists as the head.
HEAD, EMBEDDING = "lm_head.weight", "model.embed_tokens.weight"


def named_weights(weights, argument, on_gpu):
    """(name, tensor) pairs from a mapping or an iterable of (name, tensor) pairs; `argument` names
    the input in errors; on_gpu: the engine runs on CUDA, so CUDA tensors stay there."""
    pairs = []
    for i, item in enumerate(_items(weights, argument, "tensor")):
        try:
            name, tensor = item
        except (TypeError, ValueError):
            raise TypeError(f"{argument}: item {i} is not a (name, tensor) pair") from None
        if not isinstance(name, str):
            raise TypeError(f"{argument}: item {i} has a {type(name).__name__} name; names are str")
        pairs.append((full_name(name), tensor))
    return [(name, for_engine(tensor, on_gpu)) for name, tensor in without_tied_head(pairs)]


def shared_weights(handles, argument, device_index=None):
    """(name, tensor) pairs rebuilt from the handles another process made of its torch tensors
    with torch.multiprocessing.reductions.reduce_tensor: a (rebuild function, arguments) pair per
    name; for a CUDA tensor the arguments hold a CUDA IPC handle of its memory, which the rebuilt
    tensor maps (on GPU device_index when given: the sender's device numbering may differ from
    ours). Only torch.multiprocessing's rebuild functions are called."""
    pairs = []
    for i, item in enumerate(_items(handles, argument, "handle")):
        try:
            name, (rebuild, args) = item
        except (TypeError, ValueError):
            raise TypeError(f"{argument}: item {i} is not a (name, (rebuild function, arguments)) pair, "
                            f"what torch.multiprocessing.reductions.reduce_tensor returns") from None
        module = getattr(rebuild, "__module__", None) or ""
        if not callable(rebuild) or not module.startswith("torch.multiprocessing"):
            raise TypeError(f"{argument}: the handle of {name!r} does not come from "
                            f"torch.multiprocessing.reductions.reduce_tensor (its rebuild function is "
                            f"{module}.{getattr(rebuild, '__qualname__', type(rebuild).__name__)})")
        args = list(args)
        if device_index is not None and getattr(rebuild, "__name__", "") == "rebuild_cuda_tensor":
            args[_CUDA_STORAGE_DEVICE] = device_index
        pairs.append((name, rebuild(*args)))
    return pairs


# The argument of torch.multiprocessing.reductions.rebuild_cuda_tensor that names the GPU.
_CUDA_STORAGE_DEVICE = 6


def _items(named, argument, value):
    """The (name, value) items of a mapping or an iterable of pairs; TypeError for anything else."""
    items = named.items() if isinstance(named, Mapping) else named
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{argument} must be a dict or an iterable of (name, {value}) pairs, "
                        f"got {type(named).__name__}")
    return items


def model_weights(model, on_gpu):
    """The weights of an in-memory HuggingFace model: state_dict(), else named_parameters()."""
    if callable(getattr(model, "state_dict", None)):
        return named_weights(model.state_dict(), "model.state_dict()", on_gpu)
    if callable(getattr(model, "named_parameters", None)):
        return named_weights(model.named_parameters(), "model.named_parameters()", on_gpu)
    raise TypeError(f"the model must have state_dict() or named_parameters(); a {type(model).__name__} has neither")


def full_name(name):
    """The engine knows the full model's names; those of its inner base model (the original's
    loader accepted both) lack the leading "model."."""
    return name if name.startswith("model.") or name.startswith("lm_head.") else "model." + name


def without_tied_head(pairs):
    """Drops lm_head.weight when it is the embedding's memory (a tied model, which the engine
    holds once). Checked before any copy to the host, which would make two tensors of one."""
    addresses = {name: _address(tensor) for name, tensor in pairs if name in (HEAD, EMBEDDING)}
    head = addresses.get(HEAD)
    if head is None or head != addresses.get(EMBEDDING):
        return pairs
    return [(name, tensor) for name, tensor in pairs if name != HEAD]


def for_engine(tensor, on_gpu):
    """torch tensors (recognised by detach() and cpu()) leave autograd. A CUDA tensor stays on its
    GPU for an engine on the GPU (made contiguous, float64 narrowed to float32, both on the device);
    any other device's, or any for the CPU engine, is copied to the CPU. Other tensors are left as
    they are."""
    if not (callable(getattr(tensor, "detach", None)) and callable(getattr(tensor, "cpu", None))):
        return tensor
    tensor = tensor.detach()
    if on_gpu and getattr(tensor, "is_cuda", False):
        if str(tensor.dtype) == "torch.float64":
            tensor = tensor.float()
        return tensor.contiguous()
    return tensor.cpu()


def _address(tensor):
    """Where a tensor's data starts (torch or numpy), or None."""
    if callable(getattr(tensor, "data_ptr", None)):
        return tensor.data_ptr()
    interface = getattr(tensor, "__array_interface__", None)
    return interface["data"][0] if interface else None
