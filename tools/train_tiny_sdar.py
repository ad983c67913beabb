#!/usr/bin/python3
"""Trains a small SDAR model on the arithmetic chat tasks of tools/arith_tasks.py with the SDAR
block-diffusion objective, for a bounded wall-clock time, and writes it as a HuggingFace folder.

    train_tiny_sdar.py --out DIR --tokenizer-dir models/sdar-tiny-arith [--minutes 7] [--seed 0]
        [--layers 8 --hidden 256 --heads 4 --kv-heads 2 --head-dim 64 --intermediate 768]
        [--batch 1024 --lr 1e-3 --pool 1000000 --block-size 4]

Data: a pool of problems is drawn and tokenised up front and split into buckets by padded
length (the GPU then samples each batch from one bucket, chosen in proportion to its size, with
no host work and little padding). Each example is the chat prompt (the tokenizer's chat template with the
generation prompt) followed by the answer ids, <|im_end|>, and <|endoftext|> up to the end of
that block: blocks start at absolute multiples of B from the first prompt token, as in the engine,
so the prompt's tail shares the first block with the answer. Completion positions are
[prompt length, end of the answer's last block); prompt positions are never masked.

Objective (reference/models.md §1.4): per example and block, a masking ratio t ~ U(eps, 1]; each
completion position of the block is masked with probability t, at least one per block. The input
is [x_noisy ; x_clean] with the SDAR training mask, both halves at positions 0..L-1; the loss is
the mean cross-entropy over the masked positions of the noisy half.

Every --eval-every seconds: greedy exact-match accuracy on a fixed set of fresh problems with the
block-diffusion decoder of tests/reference/torch_sdar.py (B = S = block size,
low_confidence_static). At the end the model is saved first (bf16), then reloaded from the folder
and scored on --final-problems fresh problems.

Output DIR: config.json (the SDAR keys of tools/make_tiny_model.py), generation_config.json,
model.safetensors (bf16), tokenizer.json + tokenizer_config.json (copied), training_log.json.
Needs PyTorch, transformers, safetensors and NumPy; a CUDA GPU (CPU works for a smoke test).
"""
import argparse
import itertools
import json
import math
import os
import random
import shutil
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tokenizer is a local folder
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "reference"))
import arith_tasks  # noqa: E402
import make_tiny_model  # noqa: E402
import torch_sdar  # noqa: E402

MAX_MODEL_BYTES = 15_000_000  # the shipped model.safetensors must stay below this
VOCAB_ALIGN = 64  # embedding rows = tokenizer size rounded up to this
FINAL_LR_RATIO = 0.02  # the cosine decay ends at this fraction of --lr
SENTINEL = "@@QUESTION@@"  # stands for the question when the chat template is rendered once


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output HF folder (created)")
    p.add_argument("--tokenizer-dir", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    p.add_argument("--minutes", type=float, default=7.0, help="wall-clock budget of the training loop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=768)
    p.add_argument("--block-size", type=int, default=4)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--eps", type=float, default=1e-3, help="smallest masking ratio")
    p.add_argument("--pool", type=int, default=1_000_000, help="training problems tokenised up front")
    p.add_argument("--log-every", type=int, default=50, help="steps between loss reports")
    p.add_argument("--eval-every", type=float, default=60.0, help="seconds between evaluations")
    p.add_argument("--eval-problems", type=int, default=256)
    p.add_argument("--final-problems", type=int, default=1000)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "block_size", "batch",
                 "pool", "log_every", "eval_problems", "final_problems"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.heads % args.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if args.head_dim % 2:
        p.error("--head-dim must be even (RoPE pairs dimensions)")
    if not 0 < args.eps < 1:
        p.error("--eps must be in (0, 1)")
    return args


def _ids(encoded):
    """Token ids of one conversation from apply_chat_template, whichever container this
    transformers version returns (list, BatchEncoding, or a batch of one)."""
    if hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], list):
        (encoded,) = encoded
    return list(encoded)


class ChatEncoder:
    """Prompt ids (chat template + generation prompt) and target ids, batch-encoded.

    The template is rendered once around a sentinel; questions are spliced into that text and
    encoded in one fast-tokenizer call. check() compares this against apply_chat_template on a
    sample; on any difference every prompt goes through apply_chat_template (slow, exact).
    """

    def __init__(self, tok):
        self.tok = tok
        text = tok.apply_chat_template([{"role": "user", "content": SENTINEL}], tokenize=False,
                                       add_generation_prompt=True)
        self.prefix, found, self.suffix = text.partition(SENTINEL)
        if not found or SENTINEL in self.suffix:
            raise ValueError(f"the chat template does not render the question once: {text!r}")
        self.exact = False
        self.im_end = token_id(tok, "<|im_end|>")

    def _reference(self, question):
        return _ids(self.tok.apply_chat_template([{"role": "user", "content": question}], tokenize=True,
                                                 add_generation_prompt=True))

    def check(self, questions):
        fast = self.prompts(questions)
        for question, ids in zip(questions, fast):
            if ids != self._reference(question):
                print(f"warning: spliced template encoding differs from apply_chat_template for "
                      f"{question!r}; encoding every prompt with apply_chat_template", flush=True)
                self.exact = True
                return

    def prompts(self, questions):
        if self.exact:
            return [self._reference(q) for q in questions]
        texts = [self.prefix + q + self.suffix for q in questions]
        return self.tok(texts, add_special_tokens=False)["input_ids"]

    def targets(self, answers):
        """Answer ids + <|im_end|>: what the model must produce."""
        return [ids + [self.im_end] for ids in self.tok(list(answers), add_special_tokens=False)["input_ids"]]


def token_id(tok, name):
    index = tok.convert_tokens_to_ids(name)
    if index is None or tok.convert_ids_to_tokens(index) != name:
        raise ValueError(f"the tokenizer has no token {name}")
    return index


def pack(prompts, targets, block, pad_id):
    """Examples as one int32 array [n, L] (prompt + target, padded with pad_id), with the prompt
    lengths and the ends of the targets' last blocks (absolute multiples of block). L = max end."""
    prompt_lens = np.fromiter(map(len, prompts), dtype=np.int64, count=len(prompts))
    lengths = prompt_lens + np.fromiter(map(len, targets), dtype=np.int64, count=len(targets))
    ends = -(-lengths // block) * block
    total = int(lengths.sum())
    flat = np.fromiter(itertools.chain.from_iterable(itertools.chain(p, t) for p, t in zip(prompts, targets)),
                       dtype=np.int32, count=total)
    rows = np.repeat(np.arange(len(prompts)), lengths)
    cols = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out = np.full((len(prompts), int(ends.max())), pad_id, dtype=np.int32)
    out[rows, cols] = flat
    return out, prompt_lens, ends


def length_buckets(packed, starts, ends, min_size):
    """Groups examples by the end of their last block, ascending, each group holding at least
    min_size examples (the last takes the rest); a group is cut to its longest end. Returns
    [(ids [n, L], starts [n], ends [n])] as NumPy arrays."""
    order = np.argsort(ends, kind="stable")
    groups, begin = [], 0
    for end in range(len(order)):
        last = end + 1 == len(order)
        if (end + 1 - begin >= min_size and (last or ends[order[end + 1]] != ends[order[end]])) or last:
            index = order[begin:end + 1]
            groups.append(index)
            begin = end + 1
    if len(groups) > 1 and len(groups[-1]) < min_size:  # the tail group is too small: merge it
        groups[-2:] = [np.concatenate(groups[-2:])]
    return [(packed[index, :int(ends[index].max())], starts[index], ends[index]) for index in groups]


def completion_mask(starts, ends, length, block, eps, generator):
    """[n, L] bool: which completion positions (starts <= pos < ends) to mask. One ratio
    t ~ U(eps, 1] per block; every block holding completion positions gets at least one mask."""
    n, device = starts.shape[0], starts.device
    col = torch.arange(length, device=device)
    eligible = (col >= starts[:, None]) & (col < ends[:, None])
    ratio = 1.0 - (1.0 - eps) * torch.rand(n, length // block, device=device, generator=generator)
    masked = eligible & (torch.rand(n, length, device=device, generator=generator)
                         < ratio.repeat_interleave(block, dim=1))
    shape = (n, length // block, block)
    needs_one = eligible.view(shape).any(-1) & ~masked.view(shape).any(-1)
    score = torch.rand(n, length, device=device, generator=generator).masked_fill(~eligible, -1.0)
    # A random eligible position of each block (no F.one_hot: it syncs to validate its input).
    pick = torch.arange(block, device=device) == score.view(shape).argmax(-1, keepdim=True)
    return masked | (pick & needs_one[..., None]).view(n, length)


def lr_at(args, step, elapsed, budget):
    warmup = min(1.0, (step + 1) / args.warmup_steps)
    frac = min(1.0, elapsed / budget)
    return args.lr * warmup * (FINAL_LR_RATIO + (1 - FINAL_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * frac)))


def make_optimizer(model, args, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # norm weights
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")


class Evaluator:
    """Greedy block-diffusion exact match on a fixed problem set, per task."""

    def __init__(self, encoder, problems, block, max_tokens, mask_id, stop_ids, device):
        self.encoder, self.problems, self.block = encoder, problems, block
        self.max_tokens, self.mask_id, self.stop_ids, self.device = max_tokens, mask_id, stop_ids, device
        self.prompts = encoder.prompts([q for _, q, _ in problems])

    def __call__(self, model):
        was_training = model.training
        model.eval()
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            completions = torch_sdar.greedy_block_decode(model, self.prompts, self.block, self.block,
                                                         self.max_tokens, self.mask_id, self.stop_ids)
        model.train(was_training)
        texts = self.encoder.tok.batch_decode(completions, skip_special_tokens=True)
        right, seen = {}, {}
        for (task, _, answer), text in zip(self.problems, texts):
            seen[task] = seen.get(task, 0) + 1
            right[task] = right.get(task, 0) + arith_tasks.check(text, answer)
        per_task = {task: right[task] / seen[task] for task in sorted(seen)}
        samples = [{"question": q, "completion": t, "answer": a} for (_, q, a), t in zip(self.problems[:4], texts)]
        return {"accuracy": sum(right.values()) / len(self.problems), "per_task": per_task,
                "problems": len(self.problems), "samples": samples}


def format_eval(result):
    tasks = " ".join(f"{task} {acc:.3f}" for task, acc in result["per_task"].items())
    return f"accuracy {result['accuracy']:.3f} ({tasks})"


def write_json(path, obj):
    Path(path).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_folder(out, model, config, tokenizer_dir, generation):
    torch_sdar.save_model(model, config, out, dtype=torch.bfloat16)
    write_json(out / "generation_config.json", generation)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        source, target = Path(tokenizer_dir) / name, out / name
        if not (target.exists() and os.path.samefile(source, target)):  # --out may be the tokenizer folder
            shutil.copyfile(source, target)
    return (out / "model.safetensors").stat().st_size


def train(model, optimizer, args, buckets, evaluator, log, device):
    """The time-bounded loop over length buckets [(ids, starts, ends)] on the device; fills
    log["steps"], log["loss_curve"], log["evals"]."""
    block, mask_id = args.block_size, evaluator.mask_id
    lengths = [ids.shape[1] for ids, _, _ in buckets]
    # Per bucket: both halves at positions 0..L-1, and the SDAR training mask.
    positions = [torch.arange(L, device=device).repeat(2)[None] for L in lengths]
    masks = [torch_sdar.sdar_training_mask(L, block, device) for L in lengths]
    sizes = np.array([ids.shape[0] for ids, _, _ in buckets], dtype=np.float64)
    weights = sizes / sizes.sum()
    bucket_rng = np.random.default_rng(args.seed)  # host-side choice: no device sync
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    params = [p for p in model.parameters()]
    budget = args.minutes * 60.0
    loss_sum, loss_steps = torch.zeros((), device=device), 0
    start = last_log = time.time()
    next_eval = start + args.eval_every
    step = 0
    while time.time() - start < budget:
        lr = lr_at(args, step, time.time() - start, budget)
        for group in optimizer.param_groups:
            group["lr"] = lr
        b = int(bucket_rng.choice(len(buckets), p=weights))
        pool_ids, pool_starts, pool_ends = buckets[b]
        length = lengths[b]
        index = torch.randint(pool_ids.shape[0], (args.batch,), device=device, generator=generator)
        ids = pool_ids[index].long()
        masked = completion_mask(pool_starts[index], pool_ends[index], length, block, args.eps, generator)
        noisy = ids.masked_fill(masked, mask_id)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            h, _ = model.hidden(torch.cat([noisy, ids], dim=1), positions[b], masks[b])
            logits = model.lm_head(h[:, :length]).float()
        ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), ids.view(-1), reduction="none").view_as(ids)
        loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        loss_sum += loss.detach()
        loss_steps += 1
        step += 1
        log["steps"] = step
        if step % args.log_every == 0:
            mean = (loss_sum / loss_steps).item()  # the only sync of the loop
            now = time.time()
            rate = loss_steps * args.batch / (now - last_log)
            log["loss_curve"].append([step, step * args.batch, round(now - start, 2), mean])
            print(f"step {step:6d}  examples {step * args.batch:10d}  {now - start:7.1f}s  loss {mean:.4f}  "
                  f"lr {lr:.2e}  {rate:,.0f} examples/s", flush=True)
            loss_sum, loss_steps, last_log = torch.zeros((), device=device), 0, now
        if time.time() >= next_eval:
            result = evaluator(model)
            log["evals"].append({"step": step, "seconds": round(time.time() - start, 2), **result})
            print(f"eval step {step}: {format_eval(result)}", flush=True)
            next_eval = time.time() + args.eval_every
    if device.type == "cuda":
        torch.cuda.synchronize()
    log["train_seconds"] = round(time.time() - start, 2)


def main(argv=None):
    args = parse_args(argv)
    wall_start = time.time()
    from transformers import AutoTokenizer

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    tok = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    mask_id, im_end, eos = (token_id(tok, name) for name in ("<|MASK|>", "<|im_end|>", "<|endoftext|>"))
    rows = -(-len(tok) // VOCAB_ALIGN) * VOCAB_ALIGN
    shape = SimpleNamespace(arch="sdar", block_size=args.block_size, head_dim=args.head_dim, hidden=args.hidden,
                            intermediate=args.intermediate, layers=args.layers, heads=args.heads,
                            kv_heads=args.kv_heads)
    config = make_tiny_model.sdar_config(shape, SimpleNamespace(bos=eos, eos=eos, mask=mask_id, rows=rows),
                                         "bfloat16")
    generation = {"bos_token_id": eos, "eos_token_id": [im_end, eos], "pad_token_id": eos,
                  "transformers_version": config["transformers_version"]}

    model = torch_sdar.SdarModel(config)
    num_params = sum(p.numel() for p in model.parameters())
    if 2 * num_params >= MAX_MODEL_BYTES:
        raise SystemExit(f"{num_params:,} parameters are {2 * num_params:,} bytes in bf16, over the "
                         f"{MAX_MODEL_BYTES:,} byte limit: make the model smaller")
    model.init_weights()
    model.to(device).train()
    print(f"model: {num_params:,} parameters, vocab {len(tok)} -> {rows} rows, device {device}", flush=True)

    encoder = ChatEncoder(tok)
    prep_start = time.time()
    rng = random.Random(args.seed)
    problems = [arith_tasks.make_problem(rng) for _ in range(args.pool)]
    encoder.check([q for q, _ in problems[:256]])
    packed, starts, ends = pack(encoder.prompts([q for q, _ in problems]), encoder.targets(a for _, a in problems),
                                args.block_size, eos)
    max_target = int((ends - starts).max())
    buckets = [tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in bucket)
               for bucket in length_buckets(packed, starts, ends, min_size=4 * args.batch)]
    length = packed.shape[1]
    shapes = ", ".join(f"{ids.shape[0]:,}x{ids.shape[1]}" for ids, _, _ in buckets)
    print(f"data: {args.pool:,} problems, longest sequence {length}, mean {float(ends.mean()):.1f}, "
          f"longest completion {max_target}, buckets {shapes}, prepared in {time.time() - prep_start:.1f}s",
          flush=True)
    del problems, packed

    max_tokens = max_target + args.block_size
    eval_rng, final_rng = random.Random(f"eval-{args.seed}"), random.Random(f"final-{args.seed}")
    stop_ids = [im_end, eos]
    evaluator = Evaluator(encoder, [arith_tasks.make_labeled_problem(eval_rng) for _ in range(args.eval_problems)],
                          args.block_size, max_tokens, mask_id, stop_ids, device)
    final_evaluator = Evaluator(encoder, [arith_tasks.make_labeled_problem(final_rng)
                                          for _ in range(args.final_problems)],
                                args.block_size, max_tokens, mask_id, stop_ids, device)

    log = {"args": vars(args), "parameters": num_params, "vocab_rows": rows, "sequence_length": length,
           "buckets": [list(ids.shape) for ids, _, _ in buckets],
           "steps": 0, "loss_curve": [], "evals": [], "status": "running"}
    optimizer = make_optimizer(model, args, device)
    try:
        train(model, optimizer, args, buckets, evaluator, log, device)
        log["status"] = "completed"
    except BaseException as error:  # save what was trained, then fail
        log["status"] = f"failed: {error!r}"
        traceback.print_exc()
    log["examples_seen"] = log["steps"] * args.batch
    curve = [point[3] for point in log["loss_curve"]]
    log["loss_summary"] = {"first": curve[0], "last": curve[-1], "min": min(curve)} if curve else None

    out.mkdir(parents=True, exist_ok=True)
    model_bytes = save_folder(out, model, config, args.tokenizer_dir, generation)
    log["model_bytes"] = model_bytes
    log["wall_seconds"] = round(time.time() - wall_start, 2)
    write_json(out / "training_log.json", log)
    print(f"saved {out} (model.safetensors {model_bytes:,} bytes)", flush=True)
    if log["status"] != "completed":
        raise SystemExit(f"training {log['status']}; the partial model is saved")
    if model_bytes >= MAX_MODEL_BYTES:
        print(f"warning: model.safetensors is {model_bytes:,} bytes, over {MAX_MODEL_BYTES:,}", flush=True)

    # Score what ships: the bf16 folder, reloaded through the checkpoint path.
    saved = torch_sdar.load_model(str(out), device=device, dtype=torch.bfloat16)
    final = final_evaluator(saved)
    log["final"] = final
    log["wall_seconds"] = round(time.time() - wall_start, 2)
    write_json(out / "training_log.json", log)
    print(f"final ({args.final_problems} problems, bf16 checkpoint): {format_eval(final)}", flush=True)
    print(f"SUMMARY steps {log['steps']} examples {log['examples_seen']:,} train {log['train_seconds']}s "
          f"wall {log['wall_seconds']}s loss {log['loss_summary']['last'] if curve else 'n/a'} "
          f"{format_eval(final)}", flush=True)


if __name__ == "__main__":
    main()
