"""The Python package's arguments: the original's names and defaults, how they reach the engine,
and invalid ones raising TypeError / ValueError with a message naming the argument."""

import dataclasses
import sys

import numpy as np
import pytest

from jet_test_utils import BUILD, make_tiny_model

sys.path.insert(0, str(BUILD / "python"))  # the package as the build assembles it
from jetengine import LLM, SamplingParams  # noqa: E402
from jetengine.config import Config  # noqa: E402

ENGINE = dict(device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=64)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model("sdar", tmp_path_factory.mktemp("sdar"), seed=4)


@pytest.fixture(scope="module")
def llm(model):
    return LLM(model, **ENGINE)


def test_the_originals_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(SamplingParams)}
    assert defaults == dict(temperature=1.0, max_tokens=64, ignore_eos=False, block_length=None, denoising_steps=4,
                            dynamic_threshold=0.9, eb_threshold=0.35, topk=0, topp=1.0, repetition_penalty=1.0,
                            remasking_strategy="low_confidence_static", stop_words=None, dynamic_factor=1.0,
                            seed=None, stop_token_ids=None, stop=None, sub_block_length=0, editing_threshold=None,
                            max_post_steps=16)
    config = {f.name: f.default for f in dataclasses.fields(Config) if f.name != "model"}
    # max_num_batched_tokens now bounds each forward (the original's 131072 only sized a warm-up).
    assert config == dict(max_num_batched_tokens=16384, max_num_seqs=512, max_model_len=4096,
                          gpu_memory_utilization=0.8, tensor_parallel_size=1, enable_expert_parallel=False,
                          enforce_eager=False,
                          diversity_enforce=False, diversity_enforce_barrier=100, epsilon_greedy=False, epsilon=0.1,
                          kvcache_block_size=256, num_kvcache_blocks=-1, mask_token_id=-1, block_length=None,
                          dtype="auto", device="auto", num_threads=0, kv_cache_memory_bytes=0,
                          enable_prefix_caching=True, load_format="auto", quantize_fp8=False, quantization=None,
                          data_parallel=True)


def test_config_reaches_the_engine(model):
    llm = LLM(model, device="cpu", num_threads=1, max_num_seqs=7, max_model_len=512, kvcache_block_size=32,
              num_kvcache_blocks=20, block_length=4, mask_token_id=3, gpu_memory_utilization=0.5,
              enforce_eager=True, max_num_batched_tokens=4096, dtype="bfloat16")
    s = llm.summary
    assert (s.kv_pages, s.kv_page_size, s.block_length, s.mask_token_id, s.device) == (20, 32, 4, 3, "cpu")
    assert llm.summary.mask_token_id != LLM(model, **ENGINE).summary.mask_token_id  # the default is the model's


def test_cuda_options_reach_the_engine_options(model):
    # On the CPU they change nothing; on CUDA enforce_eager turns the graphs of the denoise forward
    # off, and gpu_memory_utilization sizes the default KV cache.
    options = Config(model, enforce_eager=True, gpu_memory_utilization=0.5).engine_options()
    assert (options.enforce_eager, options.gpu_memory_utilization) == (True, 0.5)
    options = Config(model).engine_options()
    assert (options.enforce_eager, options.gpu_memory_utilization) == (False, pytest.approx(0.8))
    assert Config(model, max_num_batched_tokens=4096).engine_options().max_num_batched_tokens == 4096


def test_tensor_parallel_size_splits_the_model_and_decodes_the_same(model, llm):
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    split = LLM(model, **{**ENGINE, "num_threads": 2}, tensor_parallel_size=2)
    assert Config(model, tensor_parallel_size=2).engine_options().tensor_parallel_size == 2
    assert (llm.summary.tensor_parallel_size, split.summary.tensor_parallel_size) == (1, 2)
    one, two = (engine.generate([[5, 6, 7, 8], [9, 10]], params, use_tqdm=False) for engine in (llm, split))
    assert [o["token_ids"] for o in one] == [o["token_ids"] for o in two]
    with pytest.raises(ValueError, match="num_attention_heads 4 is not a multiple of 3"):
        LLM(model, **ENGINE, tensor_parallel_size=3)


def test_expert_parallel_ranks_hold_whole_experts_and_decode_the_same(tmp_path):
    moe = make_tiny_model("sdar_moe", tmp_path / "moe", seed=4)  # 8 experts
    params = SamplingParams(temperature=0.7, seed=3, max_tokens=8, ignore_eos=True)
    one, two = (LLM(moe, **{**ENGINE, "num_threads": 2}, **split).generate([[5, 6, 7, 8], [9, 10]], params,
                                                                           use_tqdm=False)
                for split in (dict(), dict(tensor_parallel_size=2, enable_expert_parallel=True)))
    assert [o["token_ids"] for o in one] == [o["token_ids"] for o in two]
    assert Config(moe, enable_expert_parallel=True).engine_options().enable_expert_parallel
    with pytest.raises(ValueError, match="num_experts 8 is not a multiple of 3"):
        LLM(moe, **ENGINE, tensor_parallel_size=3, enable_expert_parallel=True)


def test_dummy_load_format_needs_no_checkpoint(tmp_path):
    folder = tmp_path / "shapes"
    make_tiny_model("sdar", folder, 4, "--no-weights")
    assert not list(folder.glob("*.safetensors"))
    llm = LLM(str(folder), load_format="dummy", **ENGINE)
    out = llm.generate([[5, 6, 7, 8]], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False)[0]
    assert len(out["completion_ids"]) == 8 and all(lp <= 0 for lp in out["logprobs"])
    with pytest.raises(ValueError, match="safetensors|checkpoint|model.safetensors"):
        LLM(str(folder), **ENGINE)  # "auto" reads the checkpoint, which is not there


def test_sampling_params_map_onto_the_engine():
    p = SamplingParams(temperature=0.5, topk=7, topp=0.8, stop_words=[3, 4], seed=2**64 - 1).to_engine()
    assert (p.temperature, p.top_k, p.top_p, p.seed, p.block_length) == (0.5, 7, pytest.approx(0.8), 2**64 - 1, 0)
    assert (p.sub_block_length, SamplingParams(sub_block_length=2).to_engine().sub_block_length) == (0, 2)
    editing = SamplingParams(editing_threshold=0.25, max_post_steps=3).to_engine()
    assert (p.editing_threshold, editing.editing_threshold, p.max_post_steps, editing.max_post_steps) == (None, 0.25, 16, 3)
    # An explicit stop list replaces the model's EOS, as in the original; ignore_eos drops every stop.
    assert (p.ignore_eos, p.stop_token_ids) == (True, [3, 4])
    p = SamplingParams(stop_words=[3], ignore_eos=True).to_engine()
    assert (p.ignore_eos, p.stop_token_ids) == (True, [])
    p = SamplingParams().to_engine()
    assert (p.ignore_eos, p.stop_token_ids, p.seed) == (False, [], None)
    assert SamplingParams(ignore_eos=np.bool_(True)).to_engine().ignore_eos is True  # numpy's bools count


def test_unknown_keyword_arguments_are_type_errors(model):
    with pytest.raises(TypeError, match="'gpu_util'.*'temperature'"):
        LLM(model, gpu_util=0.5, temperature=0)
    with pytest.raises(TypeError, match="top_k"):
        SamplingParams(top_k=5)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(max_num_seqs=0), ValueError, "max_num_seqs"),
    (dict(max_model_len="4096"), TypeError, "max_model_len"),
    (dict(gpu_memory_utilization=1.5), ValueError, "gpu_memory_utilization"),
    (dict(tensor_parallel_size=0), ValueError, "tensor_parallel_size"),
    (dict(tensor_parallel_size=65), ValueError, "tensor_parallel_size"),
    (dict(enable_expert_parallel=1), TypeError, "enable_expert_parallel"),
    (dict(enforce_eager=1), TypeError, "enforce_eager"),
    (dict(diversity_enforce=1), TypeError, "diversity_enforce"),
    (dict(diversity_enforce_barrier=-1), ValueError, "diversity_enforce_barrier"),
    (dict(epsilon_greedy="yes"), TypeError, "epsilon_greedy"),
    (dict(data_parallel="yes"), TypeError, "data_parallel"),
    (dict(epsilon=1.5), ValueError, "epsilon"),
    (dict(num_kvcache_blocks=0), ValueError, "num_kvcache_blocks"),
    (dict(kvcache_block_size=0), ValueError, "kvcache_block_size"),
    (dict(block_length=100, max_model_len=64), ValueError, "block_length 100 exceeds max_model_len 64"),
    (dict(mask_token_id=10**6), ValueError, "mask_token_id"),
    (dict(block_length=0), ValueError, "block_length"),
    (dict(dtype="int8"), ValueError, "dtype"),
    (dict(device="tpu"), ValueError, "device"),
    (dict(device="cuda:x"), ValueError, "'cuda:N' \\(N: a GPU index\\)"),
    (dict(device=0), TypeError, "device must be a str"),
    (dict(num_threads=-1), ValueError, "num_threads"),
    (dict(load_format="pt"), ValueError, "load_format"),
])
def test_bad_engine_arguments_name_themselves(model, kwargs, error, name):
    with pytest.raises(error, match=name):
        LLM(model, **{**ENGINE, **kwargs})


def test_model_must_be_a_folder(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        LLM(tmp_path / "missing")
    with pytest.raises(ValueError, match="tokenizer.json"):
        LLM(tmp_path, **ENGINE)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(temperature=-0.1), ValueError, "temperature"),
    (dict(temperature="hot"), TypeError, "temperature"),
    (dict(max_tokens=0), ValueError, "max_tokens"),
    (dict(max_tokens=2.5), TypeError, "max_tokens"),
    (dict(topp=0.0), ValueError, "topp"),
    (dict(topk=1.5), TypeError, "topk"),
    (dict(repetition_penalty=0), ValueError, "repetition_penalty"),
    (dict(dynamic_threshold=1.5), ValueError, "dynamic_threshold"),
    (dict(eb_threshold=float("nan")), ValueError, "eb_threshold"),
    (dict(dynamic_factor=0), ValueError, "dynamic_factor"),
    (dict(denoising_steps=0), ValueError, "denoising_steps"),
    (dict(sub_block_length=-1), ValueError, "sub_block_length"),
    (dict(editing_threshold=1.2), ValueError, "editing_threshold"),
    (dict(editing_threshold="0.5"), TypeError, "editing_threshold"),
    (dict(max_post_steps=2000), ValueError, "max_post_steps"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(ignore_eos="yes"), TypeError, "ignore_eos"),
    (dict(stop_words=[1, "2"]), TypeError, "stop_words"),
    (dict(stop_words=[1], stop_token_ids=[2]), ValueError, "stop_token_ids"),
    (dict(remasking_strategy=3), TypeError, "remasking_strategy"),
    (dict(remasking_strategy="fastest"), ValueError, "remasking_strategy must be one of 'sequential', .*'entropy_bounded'; "
                                                     "got 'fastest'"),
])
def test_bad_sampling_params_name_themselves(kwargs, error, name):
    with pytest.raises(error, match=name):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("params, name", [
    (SamplingParams(denoising_steps=5), "denoising_steps must be in \\[1, block_length = 4\\]"),
    (SamplingParams(block_length=8), "block_length 8 differs from the engine's block_length 4"),
    (SamplingParams(sub_block_length=3), "sub_block_length must divide block_length = 4"),
    (SamplingParams(editing_threshold=0.5, sub_block_length=2, denoising_steps=2),
     "editing_threshold cannot be combined with sub_block_length"),
    (SamplingParams(stop_words=[10**6]), "stop_token_ids: id 1000000 is outside the vocabulary"),
])
def test_sampling_params_the_engine_rejects(llm, params, name):
    with pytest.raises(ValueError, match=name):
        llm.generate([[5, 6, 7]], params, use_tqdm=False)


def test_fields_changed_after_construction_are_checked(llm):
    params = SamplingParams()
    params.max_tokens = -3
    with pytest.raises(ValueError, match="max_tokens"):
        llm.generate([[5, 6, 7]], params, use_tqdm=False)


@pytest.mark.parametrize("call, error, name", [
    (lambda llm: llm.generate("one prompt"), TypeError, "prompts must be a list"),
    (lambda llm: llm.generate([[5, 6], 7]), TypeError, "prompts\\[1\\]"),
    (lambda llm: llm.generate([[5, -6]]), ValueError, "prompts\\[0\\] holds token id -6"),
    (lambda llm: llm.generate([[5, 10**6]]), ValueError, "prompt 0: prompt token id 1000000 is outside"),
    (lambda llm: llm.generate([[]]), ValueError, "prompt 0: the prompt is empty"),
    (lambda llm: llm.generate([[5, 6], []]), ValueError, "prompt 1: the prompt is empty"),
    (lambda llm: llm.generate([[5]], [SamplingParams()] * 2), ValueError, "sampling_params has 2 entries"),
    (lambda llm: llm.generate([[5]], {"temperature": 0}), TypeError, "sampling_params must be"),
    (lambda llm: llm.generate([[5]], [None]), TypeError, "sampling_params\\[0\\]"),
    (lambda llm: llm.generate([[5]], use_tqdm="no"), TypeError, "use_tqdm"),
    (lambda llm: llm.generate([[5] * 200], SamplingParams(max_tokens=10**5)), ValueError, "KV cache"),
    (lambda llm: llm.generate_streaming([[5]], max_active=0), ValueError, "max_active"),
    (lambda llm: llm.generate_streaming([[5]], max_active=2.0), TypeError, "max_active"),
    (lambda llm: llm.tokenizer.encode(5), TypeError, "text"),
    (lambda llm: llm.tokenizer.decode("abc"), TypeError, "token_ids"),
    (lambda llm: llm.tokenizer.apply_chat_template([{"content": "hi"}]), ValueError, "messages\\[0\\]"),
    (lambda llm: llm.tokenizer.apply_chat_template("hi"), TypeError, "messages"),
])
def test_bad_call_arguments_name_themselves(llm, call, error, name):
    with pytest.raises(error, match=name):
        call(llm)
    assert llm.generate([[5, 6, 7]], SamplingParams(max_tokens=4), use_tqdm=False)  # still usable
