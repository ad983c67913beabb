#!/usr/bin/env python3
"""Weight updates from CUDA tensors through the Python package, on the GPU: the trained demo
model (models/sdar-tiny-arith) updated with perturbed weights given as CUDA bf16 tensors (copied on
the device), as CUDA f32 tensors (converted on the host), through reload_from_hf_model and as CUDA IPC handles
from another process (update_weights_from_ipc_handles: the sender's GPU memory copied on the device) must
decode exactly (tokens and logprobs) as the same weights given from host memory, and restoring the
originals restores the outputs; the perturbation must change them, so that an update that did
nothing fails. Then the time of a whole update of SDAR-4B's shapes (8 GB of bf16) from CUDA tensors
against the same update from pinned host tensors.

Usage: python3 tests/gpu/weights_from_device.py BUILD_DIR   (BUILD_DIR built with -DJET_PYTHON=ON;
PASS/FAIL/INFO lines, exits non-zero on FAIL). Needs torch and safetensors.
"""

import random
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "sdar-tiny-arith"
sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402


class StateDict:
    """An in-memory model the way reload_from_hf_model sees a torch module."""

    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return self.state


def check(label, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} weights_from_device {label}{': ' + detail if detail else ''}")
    return ok


def parity(LLM, SamplingParams):
    llm = LLM(str(MODEL), device="cuda", gpu_memory_utilization=0.3, max_num_seqs=64)
    rng = random.Random(0)
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": arith_tasks.make_problem(rng)[0]}],
                                                 add_generation_prompt=True) for _ in range(64)]
    greedy = SamplingParams(temperature=0, max_tokens=32)

    def decode():
        """Tokens and logprobs: the same weights, bit for bit, give the same of both."""
        return [(o["completion_ids"], o["logprobs"]) for o in llm.generate(prompts, greedy, use_tqdm=False)]

    original, perturbed = original_and_perturbed()
    before = decode()
    llm.update_weights(perturbed)
    from_host = decode()
    ok = check("perturbed weights change the outputs", from_host != before,
               f"{sum(a != b for a, b in zip(from_host, before))}/64 prompts differ in tokens or logprobs, "
               f"{sum(a[0] != b[0] for a, b in zip(from_host, before))}/64 in tokens")
    results = []
    for label, give in (
            ("update_weights from CUDA bf16 tensors (copied on the device)",
             lambda: llm.update_weights({k: v.cuda() for k, v in perturbed.items()})),
            ("update_weights from CUDA f32 tensors (converted on the host)",
             lambda: llm.update_weights({k: v.float().cuda() for k, v in perturbed.items()})),
            ("reload_from_hf_model from CUDA bf16 tensors",
             lambda: llm.reload_from_hf_model(StateDict({k: v.cuda() for k, v in perturbed.items()}))),
            ("update_weights_from_ipc_handles from another process's CUDA bf16 tensors",
             lambda: from_another_process(llm))):
        llm.update_weights(original)
        restored = decode()
        give()
        got = decode()
        results.append(check(label, got == from_host and restored == before,
                             f"{sum(a == b for a, b in zip(got, from_host))}/64 prompts as from host memory, "
                             f"restore {'exact' if restored == before else 'DIFFERS'}"))
    llm.shutdown()
    return ok and all(results)


def original_and_perturbed():
    """The demo model's bf16 weights, and the same with seeded noise added (the same in every process)."""
    original = {k: v.to(torch.bfloat16) for k, v in load_file(str(MODEL / "model.safetensors")).items()}
    gen = torch.Generator().manual_seed(0)
    perturbed = {k: (v.float() + 0.3 * v.float().std() * torch.randn(v.shape, generator=gen)).to(torch.bfloat16)
                 for k, v in original.items()}
    return original, perturbed


def share_perturbed(handles, done):
    """The sending process (a trainer's stand-in): its own CUDA copies of the perturbed weights,
    shared as CUDA IPC handles until `done` is set."""
    from torch.multiprocessing.reductions import reduce_tensor
    tensors = {k: v.cuda() for k, v in original_and_perturbed()[1].items()}
    handles.put({k: reduce_tensor(v) for k, v in tensors.items()})
    done.wait()


def from_another_process(llm):
    context = torch.multiprocessing.get_context("spawn")
    handles, done = context.Queue(), context.Event()
    sender = context.Process(target=share_perturbed, args=(handles, done))
    sender.start()
    try:
        llm.update_weights_from_ipc_handles(handles.get(timeout=120))
    finally:
        done.set()
        sender.join(timeout=60)


def timing(LLM):
    shapes = REPO / "build-gpu" / "models" / "sdar-4b-shapes"
    llm = LLM(str(shapes), device="cuda", load_format="dummy", gpu_memory_utilization=0.45, max_num_seqs=8)
    gen = torch.Generator(device="cuda").manual_seed(0)
    names = llm_weight_shapes(shapes)
    on_gpu = {k: torch.randn(s, generator=gen, device="cuda").to(torch.bfloat16) for k, s in names.items()}
    on_host = {k: v.cpu().pin_memory() for k, v in on_gpu.items()}
    gb = sum(v.numel() * 2 for v in on_gpu.values()) / 1e9
    best = {}
    for label, weights in (("from CUDA tensors", on_gpu), ("from pinned host tensors", on_host)):
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            llm.update_weights(weights)
            times.append(time.perf_counter() - start)
        best[label] = min(times)
        print(f"INFO weights_from_device SDAR-4B shapes, update_weights of {gb:.2f} GB {label}: "
              f"{min(times):.3f} s (best of 3; {gb / min(times):.1f} GB/s)")
    llm.shutdown()
    return best


def llm_weight_shapes(folder):
    """HuggingFace names and shapes of an SDAR model's weights, from its config.json."""
    import json
    c = json.loads((folder / "config.json").read_text())
    h, i, v, hd = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not c.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (v, h)
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                       p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                       p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                       p + "mlp.down_proj.weight": (h, i)})
    return shapes


def main():
    sys.path.insert(0, str(Path(sys.argv[1]) / "python"))
    from jetengine import LLM, SamplingParams
    ok = parity(LLM, SamplingParams)
    if (REPO / "build-gpu" / "models" / "sdar-4b-shapes" / "config.json").exists():
        timing(LLM)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
