#!/usr/bin/python3
"""How far FP8 (docs/fp8.md) moves a model's activations: the relative RMS error of the residual
stream after each layer and of the logits, FP8 against float, through the NumPy reference
(tests/reference), which the CPU backend equals (tests/python/test_fp8.py).

    bench/fp8_layer_error.py --shape sdar-4b|sdar-30b-a3b [--layers L] [--tokens T] [--seed S]
    bench/fp8_layer_error.py --model DIR [--tokens T]

--shape: random weights of the model's layer shapes (make_tiny_model's initialisation, the tiny
tokenizer's vocabulary: the head's width does not change the layers); --model: a trained model
folder, with prompts drawn from tools/arith_tasks.py (tokenized by build/apps/cli/jetengine). Two FP8 layouts: per output channel (what
--quantization fp8 does at load) and 128x128 blocks (a Qwen3-FP8 / DeepSeek checkpoint, its
activations per 128 columns); and, for comparison, per-channel weights with one activation scale
per tensor instead of per row. Also reports NaN / inf anywhere and the share of logits rows whose
argmax is unchanged. Prints one JSON object.
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402
import config_np  # noqa: E402
import fp8_np  # noqa: E402
import make_tiny_model  # noqa: E402
import safetensors_np  # noqa: E402
from model_np import ReferenceModel, is_projection, segment_ids  # noqa: E402

SHAPES = {  # make_tiny_model arguments of each model's layers (reference/models.md)
    "sdar-4b": ["--arch", "sdar", "--hidden", "2560", "--heads", "32", "--kv-heads", "8", "--head-dim", "128",
                "--intermediate", "9728"],
    "sdar-30b-a3b": ["--arch", "sdar_moe", "--hidden", "2048", "--heads", "32", "--kv-heads", "4", "--head-dim",
                     "128", "--experts", "128", "--top-k", "8", "--moe-intermediate", "768"],
}


def random_model(shape, layers, seed, folder):
    """(config, float32 tensors) of random weights at a model's shapes."""
    args = make_tiny_model.parse_args([*SHAPES[shape], "--layers", str(layers), "--out", str(folder), "--seed",
                                       str(seed), "--no-weights"])
    make_tiny_model.main([*SHAPES[shape], "--layers", str(layers), "--out", str(folder), "--no-weights"])
    config = config_np.load_config(str(folder))
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]
    specs = make_tiny_model.qwen_tensors(args, rows)
    rng = np.random.default_rng(seed)
    return config, {name: make_tiny_model.random_weight(rng, s, kind) for name, s, kind in specs}, rows


def tokenize(model_dir, text):
    """Token ids of text, by the engine's tokenizer (the CLI's `tokenize`)."""
    cli = REPO / "build" / "apps" / "cli" / "jetengine"
    done = subprocess.run([str(cli), "tokenize", "--model", str(model_dir)], input=text, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def block_checkpoint(tensors):
    """The tensors as a 128x128-block FP8 checkpoint holds them (codes' values and scales)."""
    out = {}
    for name, array in tensors.items():
        if is_projection(name):
            codes, scale = fp8_np.quantize_weight_codes(array, block=128)
            out[name] = fp8_np.decode(codes).astype(np.float32)
            out[name[:-len("weight")] + "weight_scale_inv"] = scale
        else:
            out[name] = array
    return out


def relative_rms(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2) / np.mean(b ** 2)))


def run(model, tokens, segments):
    states = []
    logits = model.forward(tokens, segments, hidden_states=states)
    return states, logits


def compare(reference, variant):
    (ref_states, ref_logits), (states, logits) = reference, variant
    finite = all(np.isfinite(s).all() for s in states) and np.isfinite(logits).all()
    return {"layer_rel_rms": [relative_rms(s, r) for s, r in zip(states, ref_states)],
            "logits_rel_rms": relative_rms(logits, ref_logits),
            "argmax_agreement": float(np.mean(logits.argmax(-1) == ref_logits.argmax(-1))),
            "all_finite": bool(finite)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--shape", choices=sorted(SHAPES))
    source.add_argument("--model", type=Path)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        if args.shape:
            config, tensors, rows = random_model(args.shape, args.layers, args.seed, Path(folder))
            rng = np.random.default_rng(args.seed + 1)
            tokens = rng.integers(3, min(rows, 200), args.tokens)
        else:
            config, tensors = config_np.load_config(str(args.model)), safetensors_np.load_checkpoint(str(args.model))
            rng = random.Random(args.seed)
            text = " ".join(arith_tasks.make_labeled_problem(rng)[1] for _ in range(8))
            tokens = np.array(tokenize(args.model, text)[:args.tokens])
    block = int(config.block_size or 4)
    segments = segment_ids(config.family, len(tokens), len(tokens) // 2, block)
    result = {"source": args.shape or str(args.model), "layers": config.num_layers, "tokens": len(tokens)}
    reference = run(ReferenceModel(config, tensors), tokens, segments)
    result["per_channel"] = compare(reference, run(ReferenceModel(config, tensors, quantize_fp8=True), tokens,
                                                   segments))
    result["block128"] = compare(reference, run(ReferenceModel(config, block_checkpoint(tensors)), tokens, segments))
    # The alternative to per-row activation scales: one scale per activation tensor (a forward's
    # whole batch), with the same per-channel weights.
    per_tensor = ReferenceModel(config, tensors, quantize_fp8=True)
    for layer in per_tensor.layers:
        layer["fp8"] = {key: "tensor" for key in layer["fp8"]}
    result["per_channel_tensor_activations"] = compare(reference, run(per_tensor, tokens, segments))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
