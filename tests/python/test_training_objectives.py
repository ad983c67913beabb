"""The demo models' training inputs show each block what the engine shows it when it decodes.

tools/train_tiny_llada.py and tools/train_tiny_sdar.py train every block of an example in one
forward over [x_noisy ; x_clean] under a mask. Here a random model's logits of each noisy block in
that forward must equal those of the engine's order of work, done step by step with a KV cache
(tests/reference/torch_sdar.py): prefill the prompt's full blocks (bidirectionally for LLaDA,
block-causally for SDAR), then per block a forward of the noisy block over the cache, and a save
forward of the clean block that extends the cache. Also: completion_mask masks only completion
positions and at least one in each block that has some. Needs torch (skipped without it); CPU.
"""
import sys

import pytest

from jet_test_utils import REPO

torch = pytest.importorskip("torch")
sys.path[:0] = [str(REPO / "tools"), str(REPO / "tests" / "reference")]
import tiny_training  # noqa: E402
import torch_sdar  # noqa: E402
import train_tiny_llada  # noqa: E402

LLADA = {"model_type": "llada", "d_model": 32, "n_heads": 2, "n_kv_heads": 2, "n_layers": 2, "mlp_hidden_size": 48,
         "vocab_size": 40, "rope_theta": 10000.0}
SDAR = {"model_type": "sdar", "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "num_hidden_layers": 2, "intermediate_size": 48, "vocab_size": 40, "rms_norm_eps": 1e-6}
MASK = 39


def random_model(config):
    torch.manual_seed(0)
    model = torch_sdar.model_class(config)(config)
    model.init_weights(std=0.3)  # large weights: attention far from uniform, so a wrong mask shows
    return model.eval()


def stepwise_block_logits(model, clean, noisy, prefill, block, end):
    """Logits [end - prefill, V] of the noisy blocks from `prefill` to `end`, the engine's way."""
    kv, out = None, []
    if prefill:
        allowed = torch.ones(prefill, prefill, dtype=torch.bool)
        if model.block_causal:
            allowed = torch_sdar.block_causal_mask(prefill, block)
        _, kv = model.hidden(clean[None, :prefill], torch.arange(prefill)[None], allowed)
    for start in range(prefill, end, block):
        positions = torch.arange(start, start + block)[None]
        allowed = torch.ones(block, start + block, dtype=torch.bool)
        out.append(model(noisy[None, start:start + block], positions, allowed, past_kv=kv)[0])
        _, kv = model.hidden(clean[None, start:start + block], positions, allowed, past_kv=kv)
    return torch.cat(out)


def training_block_logits(model, clean, noisy, mask):
    """Logits [L, V] of the noisy half of the training forward."""
    length = clean.shape[0]
    positions = torch.arange(length).repeat(2)[None]
    return model(torch.cat([noisy, clean])[None], positions, mask)[0, :length]


@pytest.mark.parametrize("block,prompt", [(4, 9), (8, 9), (8, 16), (16, 9), (32, 9)])
def test_llada_training_forward_equals_the_engines_steps(block, prompt):
    model = random_model(LLADA)
    target = 13
    starts, ends = torch.tensor([prompt]), torch.tensor([prompt + target])
    end = int(train_tiny_llada.canvas_ends(starts, ends, block)[0])
    prefill = prompt // block * block
    width = end + block  # one block of padding past the canvas, which nothing may see
    generator = torch.Generator().manual_seed(1)
    clean = torch.randint(0, MASK, (width,), generator=generator)
    masked = tiny_training.completion_mask(starts, torch.tensor([end]), width, block, 0.5, generator)[0]
    noisy = clean.masked_fill(masked, MASK)
    noisy[end:] = MASK - 1  # padding past the canvas differs between the halves: it must not leak
    inside = torch.arange(width)[None] < end
    mask = torch_sdar.dual_stream_mask(train_tiny_llada.segments(starts, block, width), inside)
    with torch.no_grad():
        got = training_block_logits(model, clean, noisy, mask)[prefill:end]
        want = stepwise_block_logits(model, clean, noisy, prefill, block, end)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(got[0], want[-1])  # the comparison can fail


def test_sdar_training_forward_equals_the_engines_steps():
    model = random_model(SDAR)
    block, prompt, width = 4, 10, 24
    generator = torch.Generator().manual_seed(2)
    clean = torch.randint(0, MASK, (width,), generator=generator)
    masked = tiny_training.completion_mask(torch.tensor([prompt]), torch.tensor([width]), width, block, 0.5,
                                           generator)[0]
    noisy = clean.masked_fill(masked, MASK)
    prefill = prompt // block * block
    with torch.no_grad():
        got = training_block_logits(model, clean, noisy, torch_sdar.sdar_training_mask(width, block))[prefill:]
        want = stepwise_block_logits(model, clean, noisy, prefill, block, width)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_completion_mask_covers_only_completions_and_every_block():
    block, length = 4, 32
    starts = torch.tensor([0, 3, 9, 17, 30])
    ends = torch.tensor([32, 12, 20, 20, 32])
    generator = torch.Generator().manual_seed(3)
    for _ in range(20):
        masked = tiny_training.completion_mask(starts, ends, length, block, 1e-3, generator)
        col = torch.arange(length)
        eligible = (col >= starts[:, None]) & (col < ends[:, None])
        assert not (masked & ~eligible).any()
        per_block = masked.view(len(starts), -1, block).any(-1)
        assert torch.equal(per_block, eligible.view(len(starts), -1, block).any(-1))


def test_a_non_finite_loss_stops_training_with_the_last_good_weights():
    from types import SimpleNamespace
    model = random_model(SDAR)
    args = SimpleNamespace(lr=1e-2, weight_decay=0.0, warmup_steps=1, minutes=1.0, seed=0, batch=4, log_every=2, eval_every=1e9)
    buckets = [(torch.randint(0, MASK, (8, 6)), torch.zeros(8, dtype=torch.long), torch.full((8,), 6))]
    after_step_4 = {}

    def objective(model, b, ids, starts, ends, generator):
        objective.calls += 1
        if objective.calls == 5:  # the weights the fourth step left
            after_step_4.update({name: t.detach().clone() for name, t in model.state_dict().items()})
        loss = model(ids, torch.arange(ids.shape[1])[None], torch.ones(6, 6, dtype=torch.bool)).square().mean()
        return loss * float("nan") if objective.calls >= 5 else loss
    objective.calls = 0

    optimizer = tiny_training.make_optimizer(model, args, torch.device("cpu"))
    log = {"steps": 0, "loss_curve": [], "evals": []}
    with pytest.raises(tiny_training.NonFiniteLoss, match="between steps 4 and 6; the weights of step 4 are kept"):
        tiny_training.train(model, optimizer, args, buckets, objective, [], log, torch.device("cpu"))
    assert log["steps"] == 6 and len(log["loss_curve"]) == 2
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, after_step_4[name]), name


def test_init_from_an_sdar_folder_gives_the_llada_network_its_function_without_qk_norms(tmp_path):
    sdar = random_model(SDAR)
    torch_sdar.save_model(sdar, SDAR, tmp_path, dtype=torch.float32)
    llada_config = dict(LLADA, n_kv_heads=2, rope_theta=1e6, rms_norm_eps=1e-6)  # MHA over SDAR's 1 kv head
    llada = torch_sdar.model_class(llada_config)(llada_config).eval()
    dropped = tiny_training.init_from(llada, tmp_path)
    assert dropped and all(name.endswith(("q_norm.weight", "k_norm.weight")) for name in dropped)
    for layer in sdar.model.layers:
        layer.self_attn.qk_norm = False  # what the copy computes: SDAR's network without its q/k norms
    ids = torch.randint(0, MASK, (2, 12), generator=torch.Generator().manual_seed(4))
    positions, allowed = torch.arange(12)[None], torch.ones(12, 12, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(llada(ids, positions, allowed), sdar(ids, positions, allowed), rtol=1e-5, atol=1e-5)

    small = torch_sdar.model_class(dict(LLADA, d_model=16))(dict(LLADA, d_model=16))
    with pytest.raises(ValueError, match="has shape"):
        tiny_training.init_from(small, tmp_path)
