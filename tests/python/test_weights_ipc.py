"""update_weights_from_ipc_handles: a second process (a trainer's stand-in) shares its torch
tensors through torch.multiprocessing.reductions.reduce_tensor handles, and the engine takes them
as update_weights takes arrays. On the CPU the handles are shared memory; the same path maps CUDA
IPC handles of GPU tensors (tests/gpu/weights_from_device.py)."""

import sys

import numpy as np
import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402
from torch.multiprocessing.reductions import reduce_tensor  # noqa: E402

sys.path.insert(0, str(BUILD / "python"))
sys.path.insert(0, str(REPO / "tools"))
import safetensors_io  # noqa: E402
from jetengine import LLM, SamplingParams  # noqa: E402

ENGINE = dict(device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=64)
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
PROMPTS = [[11, 12, 13, 14, 15], [300, 7, 42]]


def share(path, handles, done):
    """The sending process: its own tensors of the weights in `path`, shared until `done` is set."""
    tensors = {name: torch.from_numpy(array) for name, array in safetensors_io.read_safetensors(path).items()}
    handles.put({name: reduce_tensor(tensor) for name, tensor in tensors.items()})
    done.wait()


def decode(llm):
    return [out["token_ids"] for out in llm.generate(PROMPTS, GREEDY, use_tqdm=False)]


def test_weights_shared_by_another_process_replace_the_engines(tmp_path):
    a = make_tiny_model("sdar", tmp_path / "a", seed=1)
    b = make_tiny_model("sdar", tmp_path / "b", seed=2)
    llm = LLM(a, **ENGINE)
    before = decode(llm)
    context = mp.get_context("spawn")
    handles, done = context.Queue(), context.Event()
    sender = context.Process(target=share, args=(b / "model.safetensors", handles, done))
    sender.start()
    try:
        llm.update_weights_from_ipc_handles(handles.get(timeout=120))
    finally:
        done.set()
        sender.join(timeout=60)
    after = decode(llm)
    assert after == decode(LLM(b, **ENGINE)) and after != before


def test_handles_that_are_not_torchs_are_refused(tmp_path):
    llm = LLM(make_tiny_model("sdar", tmp_path / "a", seed=1), **ENGINE)
    with pytest.raises(TypeError, match="item 0 is not a \\(name, \\(rebuild function, arguments\\)\\) pair"):
        llm.update_weights_from_ipc_handles([("model.norm.weight", np.ones(4))])
    with pytest.raises(TypeError, match="does not come from torch.multiprocessing.reductions.reduce_tensor"):
        llm.update_weights_from_ipc_handles({"model.norm.weight": (print, ("not a tensor",))})
    with pytest.raises(ValueError, match="'model.no.such.weight' is not a weight"):
        llm.update_weights_from_ipc_handles({"model.no.such.weight": reduce_tensor(torch.zeros(3))})
