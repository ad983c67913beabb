"""The Python package's RL weight APIs: update_weights, reload_from_hf_model, offload_parameters,
free_all_resources and reload_from_path, with numpy arrays, buffer-protocol objects and DLPack
tensors (including bf16, which numpy cannot hold); bad weights are clear errors that change
nothing. Two tiny models of one architecture (seeds 1 and 2) tell whose weights are loaded."""

import ctypes
import json
import shutil
import sys

import numpy as np
import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model

sys.path.insert(0, str(BUILD / "python"))  # the package as the build assembles it
sys.path.insert(0, str(REPO / "tools"))
import safetensors_io  # noqa: E402
from jetengine import LLM, SamplingParams  # noqa: E402

ENGINE = dict(device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=64)
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
PROMPTS = [[11, 12, 13, 14, 15], [300, 7, 42], [99] * 9]
EMBEDDING = "model.embed_tokens.weight"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    return make_tiny_model("sdar", root / "a", seed=1), make_tiny_model("sdar", root / "b", seed=2)


@pytest.fixture(scope="module")
def expected(models):
    """Greedy outputs of fresh engines on model A and model B."""
    a, b = (decode(LLM(m, **ENGINE)) for m in models)
    assert a != b  # the two models really differ
    return a, b


@pytest.fixture
def llm(models):
    return LLM(models[0], **ENGINE)


def decode(llm):
    return [out["token_ids"] for out in llm.generate(PROMPTS, GREEDY, use_tqdm=False)]


def weights_of(model_dir):
    """{HuggingFace name: float32 array}; bf16 values are exact in float32."""
    return safetensors_io.read_safetensors(model_dir / "model.safetensors")


class FakeModel:
    """An in-memory model the way reload_from_hf_model sees a torch module."""

    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return dict(self.state)


class ParametersOnly:
    def __init__(self, state):
        self.state = state

    def named_parameters(self):
        return iter(self.state.items())


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DLPackOnly:
    """A tensor that speaks only DLPack (no buffer protocol), over a numpy array's memory, with
    any DLPack dtype code and device: how a torch bf16 tensor looks to the engine."""
    BFLOAT, FLOAT, INT = 4, 2, 0

    def __init__(self, array, code, bits, device_type=1, strides=None, shape=None):
        self.array = array  # owns the memory
        self.shape = (ctypes.c_int64 * array.ndim)(*(shape or array.shape))
        self.strides = None if strides is None else (ctypes.c_int64 * array.ndim)(*strides)
        tensor = DLTensor(array.ctypes.data, DLDevice(device_type, 0), array.ndim, DLDataType(code, bits, 1),
                          self.shape, self.strides, 0)
        self.managed = DLManagedTensor(tensor, None, None)

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)


class NumpyDLPack:
    """Hides a numpy array's buffer protocol, leaving numpy's own __dlpack__."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


def bf16(array):
    return DLPackOnly(safetensors_io.f32_to_bf16_bits(array), DLPackOnly.BFLOAT, 16)


def test_update_weights_from_a_dict_makes_the_engine_model_b(models, expected, llm):
    assert decode(llm) == expected[0]
    llm.update_weights(weights_of(models[1]))
    assert decode(llm) == expected[1]
    llm.update_weights(weights_of(models[0]))
    assert decode(llm) == expected[0]


@pytest.mark.parametrize("swap", ["update_weights", "offload_then_reload"])
def test_new_weights_never_reuse_cached_prompt_pages(models, swap):
    # Prompts of 40 tokens hold two full pages of 16, which prefix caching keeps for later prompts.
    long_prompts = [list(range(20, 60)), list(range(20, 56)) + [7, 8, 9, 10]]

    def run(llm):
        return [out["token_ids"] for out in llm.generate(long_prompts, GREEDY, use_tqdm=False)]

    llm = LLM(models[0], **ENGINE)
    run(llm)  # publishes the prompts' pages, computed with model A's weights
    if swap == "update_weights":
        llm.update_weights(weights_of(models[1]))
    else:
        llm.offload_parameters()
        llm.reload_from_hf_model(FakeModel(weights_of(models[1])))
    assert run(llm) == run(LLM(models[1], **ENGINE))


@pytest.mark.parametrize("convert", [
    lambda w: w.astype(np.float64),
    lambda w: np.asfortranarray(w),  # strided: gathered into a copy
    lambda w: NumpyDLPack(w),
    bf16,
    lambda w: DLPackOnly(np.ascontiguousarray(w.T), DLPackOnly.FLOAT, 32, strides=(1, w.shape[0]), shape=w.shape)
    if w.ndim == 2 else NumpyDLPack(w),  # DLPack strides: a column-major matrix
    lambda w: memoryview(w),
], ids=["float64", "fortran-order", "numpy-dlpack", "bf16-dlpack", "strided-dlpack", "memoryview"])
def test_update_weights_reads_every_tensor_kind(models, expected, llm, convert):
    llm.update_weights([(name, convert(w)) for name, w in weights_of(models[1]).items()])
    assert decode(llm) == expected[1]


def test_names_of_the_inner_base_model_get_the_model_prefix(models, expected, llm):
    llm.update_weights({name.removeprefix("model."): w for name, w in weights_of(models[1]).items()})
    assert decode(llm) == expected[1]


@pytest.mark.parametrize("break_weights, message", [
    (lambda w: w.update({"model.layers.0.mlp.gate.weight": w[EMBEDDING]}),
     "'model.layers.0.mlp.gate.weight' is not a weight of this sdar model"),
    (lambda w: w.update({EMBEDDING: w[EMBEDDING][:-1]}), f"tensor '{EMBEDDING}' has shape"),
    (lambda w: w.update({EMBEDDING: w[EMBEDDING].astype(np.int32)}), f"weight {EMBEDDING}: element format"),
    (lambda w: w.update({EMBEDDING: DLPackOnly(w[EMBEDDING], DLPackOnly.INT, 32)}),
     f"weight {EMBEDDING}: DLPack dtype \\(code 0, 32 bits"),
    (lambda w: w.update({EMBEDDING: DLPackOnly(w[EMBEDDING], DLPackOnly.FLOAT, 32, device_type=2)}),
     f"tensor '{EMBEDDING}' is in GPU memory, and the cpu backend reads weights from host memory"),
    (lambda w: w.update({EMBEDDING: DLPackOnly(np.ascontiguousarray(w[EMBEDDING].T), DLPackOnly.FLOAT, 32,
                                               device_type=2, strides=(1, w[EMBEDDING].shape[0]),
                                               shape=w[EMBEDDING].shape)}),
     f"weight {EMBEDDING} is a GPU tensor that is not contiguous"),
    (lambda w: w.update({EMBEDDING: DLPackOnly(w[EMBEDDING], DLPackOnly.FLOAT, 32, device_type=4)}),
     f"weight {EMBEDDING} is in device memory of DLPack device type 4"),
], ids=["unknown-name", "wrong-shape", "int-buffer", "int-dlpack", "gpu-dlpack", "strided-gpu-dlpack",
        "opencl-dlpack"])
def test_bad_weights_are_value_errors_that_change_nothing(models, expected, llm, break_weights, message):
    weights = weights_of(models[1])
    break_weights(weights)
    with pytest.raises(ValueError, match=message):
        llm.update_weights(weights)
    assert decode(llm) == expected[0]  # none of model B's valid tensors was written


def test_bad_containers_are_type_errors(llm):
    with pytest.raises(TypeError, match="weights must be a dict"):
        llm.update_weights(5)
    with pytest.raises(TypeError, match="item 0 is not a \\(name, tensor\\) pair"):
        llm.update_weights([np.zeros(3)])
    with pytest.raises(TypeError, match="item 0 has a int name"):
        llm.update_weights([(0, np.zeros(3))])
    with pytest.raises(TypeError, match=f"weight {EMBEDDING}: a object supports neither"):
        llm.update_weights({EMBEDDING: object()})
    with pytest.raises(TypeError, match="state_dict\\(\\) or named_parameters\\(\\)"):
        llm.reload_from_hf_model(object())


def test_free_all_resources_then_reload_from_path(models, expected, llm):
    llm.free_all_resources()
    assert not llm.has_weights()
    with pytest.raises(RuntimeError, match="holds no weights"):
        llm.generate(PROMPTS, GREEDY)
    llm.reload_from_path(models[1])
    assert llm.has_weights() and decode(llm) == expected[1]
    llm.reload_from_path(models[0])
    assert decode(llm) == expected[0]
    with pytest.raises(ValueError, match="not a directory"):
        llm.reload_from_path(models[0] / "missing")
    assert decode(llm) == expected[0]


@pytest.mark.parametrize("free", ["offload_parameters", "free_all_resources"])
def test_reload_from_hf_model_after_freeing(models, expected, llm, free):
    getattr(llm, free)()
    with pytest.raises(RuntimeError, match="holds no weights"):
        llm.generate(PROMPTS, GREEDY)
    llm.reload_from_hf_model(FakeModel(weights_of(models[1])))
    assert decode(llm) == expected[1]
    llm.reload_from_hf_model(ParametersOnly({n: bf16(w) for n, w in weights_of(models[0]).items()}))
    assert decode(llm) == expected[0]


def test_sleep_and_wake_up_keep_the_weights_and_let_a_trainer_update_in_between(models, expected, llm):
    llm.sleep()
    assert llm.is_sleeping and not llm.has_weights()
    with pytest.raises(RuntimeError, match=r"generate: the engine is asleep .* wake_up\(\) first"):
        llm.generate(PROMPTS, GREEDY)
    with pytest.raises(RuntimeError, match=r"update_weights: the engine is asleep"):
        llm.update_weights(weights_of(models[1]))
    llm.wake_up()
    assert not llm.is_sleeping and decode(llm) == expected[0]
    llm.sleep(level=1)
    llm.wake_up(tags=["weights"])  # vLLM's RL order: weights, the trainer's update, then the KV cache
    llm.update_weights(weights_of(models[1]))
    llm.wake_up(["kv_cache"])
    assert decode(llm) == expected[1]


def test_sleep_level_2_frees_the_weights_and_bad_arguments_are_named(models, expected, llm):
    with pytest.raises(ValueError, match="level must be <= 2"):
        llm.sleep(3)
    with pytest.raises(TypeError, match="level must be an int"):
        llm.sleep("1")
    with pytest.raises(ValueError, match="unknown wake_up tag"):
        llm.wake_up(["weights", "kv"])
    with pytest.raises(TypeError, match="tags must be None or a list"):
        llm.wake_up("weights")
    llm.sleep(level=2)
    assert not llm.is_sleeping and not llm.has_weights()
    llm.wake_up()
    with pytest.raises(RuntimeError, match="holds no weights"):
        llm.generate(PROMPTS, GREEDY)
    llm.reload_from_hf_model(FakeModel(weights_of(models[0])))
    assert decode(llm) == expected[0]


def test_reload_from_hf_model_with_a_missing_tensor_keeps_the_weights(models, expected, llm):
    weights = weights_of(models[1])
    del weights["model.layers.1.self_attn.o_proj.weight"]
    with pytest.raises(ValueError, match="missing tensor 'model.layers.1.self_attn.o_proj.weight'"):
        llm.reload_from_hf_model(FakeModel(weights))
    assert decode(llm) == expected[0]


def tied_copies(models, tmp_path):
    """Copies of the two models whose config ties the head to the embedding."""
    tied = []
    for model in models:
        folder = shutil.copytree(model, tmp_path / model.name)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
        tied.append(folder)
    return tied


def test_a_tied_head_given_as_the_embedding_is_passed_once(models, tmp_path):
    """torch's state_dict() of a tied model lists the embedding twice, also as lm_head.weight."""
    tied = tied_copies(models, tmp_path)
    llm = LLM(tied[0], **ENGINE)
    weights = weights_of(tied[1])
    weights["lm_head.weight"] = weights[EMBEDDING]
    llm.update_weights(weights)
    assert decode(llm) == decode(LLM(tied[1], **ENGINE))


def test_a_tied_head_given_as_its_own_copy_is_the_embedding(models, tmp_path):
    """A state_dict gathered tensor by tensor (.cpu() each, FSDP) holds the tied head as a copy."""
    tied = tied_copies(models, tmp_path)
    expected = decode(LLM(tied[1], **ENGINE))
    llm = LLM(tied[0], **ENGINE)
    weights = weights_of(tied[1])
    weights["lm_head.weight"] = weights[EMBEDDING].copy()
    llm.update_weights(weights)
    assert decode(llm) == expected
    llm = LLM(tied[0], **ENGINE)  # the head alone updates the embedding it is
    llm.update_weights({"lm_head.weight": weights[EMBEDDING].copy(),
                        **{n: w for n, w in weights.items() if n not in (EMBEDDING, "lm_head.weight")}})
    assert decode(llm) == expected
    weights["lm_head.weight"] = weights[EMBEDDING] + 1.0
    with pytest.raises(ValueError, match="'lm_head.weight' is this model's tied embedding"):
        llm.update_weights(weights)
    assert decode(llm) == expected  # nothing changed
