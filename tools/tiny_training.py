"""Training of the small demo models on the arithmetic chat tasks of tools/arith_tasks.py: the parts
that do not depend on the architecture. The entry points tools/train_tiny_sdar.py and
tools/train_tiny_llada.py each define an Architecture (its options, config.json, the layout of
the example pool, the training loss and the decode settings of the evaluations) and call main().

Data: a pool of problems is drawn and tokenised up front and split into buckets by length (the GPU
then samples each batch from one bucket, chosen in proportion to its size, with no host work and
little padding). Each example is the chat prompt (the tokenizer's chat template with the generation
prompt) followed by the answer ids, <|im_end|>, and <|endoftext|> padding up to the bucket's width;
completion positions start at the prompt length, and prompt positions are never masked.

Loop: AdamW (no weight decay on norm weights), betas (0.9, 0.95), linear warm-up over
--warmup-steps, then a cosine decay over the wall-clock budget to FINAL_LR_RATIO of --lr; gradients
clipped to norm 1; bf16 autocast. The loss is read back only every --log-every steps; a report that
is not finite stops the training with the weights of the last finite one.

Init: random (the network's init_weights), or with --init-from the weights of a trained model folder
of the same sizes (init_from), whose rope_theta and rms_norm_eps the new config.json takes.

Every --eval-every seconds: greedy exact-match accuracy on a fixed set of fresh problems with the
block-diffusion decoder of tests/reference/torch_sdar.py, which decodes as the engine does
(docs/decoding.md), at each decode setting (B, S) of the architecture and with each of STRATEGIES,
with the completion tokens per forward of each. At the end the model is saved first (bf16), then
reloaded from the folder and scored on --final-problems fresh problems at the same settings.

Output DIR: config.json, generation_config.json, model.safetensors (bf16), tokenizer.json +
tokenizer_config.json (copied), training_log.json (arguments, loss curve, evaluations with sample
completions, the final check). Needs PyTorch and NumPy (and jinja2, which PyTorch brings); a CUDA
GPU (CPU works for a smoke test).
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

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "reference"))
import arith_tasks  # noqa: E402
import byte_bpe  # noqa: E402
import render_chat_template  # noqa: E402
import torch_sdar  # noqa: E402

MAX_MODEL_BYTES = 15_000_000  # a shipped model.safetensors must stay below this
VOCAB_ALIGN = 64  # embedding rows = tokenizer size rounded up to this
FINAL_LR_RATIO = 0.02  # the cosine decay ends at this fraction of --lr
SENTINEL = "@@QUESTION@@"  # stands for the question when the chat template is rendered once
# The strategies every evaluation decodes with, and their dynamic_threshold: the static default and
# the dynamic one at the engine's default threshold (docs/decoding.md §4).
STRATEGIES = {"low_confidence_static": None, "low_confidence_dynamic": 0.9}


class NonFiniteLoss(RuntimeError):
    """Training diverged; the model holds the weights of the last finite loss report."""


class Architecture:
    """What an entry point defines. Arrays are NumPy on the host unless said otherwise."""

    name = None  # config.json's model_type
    kv_heads = 2  # default of --kv-heads (None: = --heads)

    def add_arguments(self, parser):
        """Options of this architecture only."""

    def check_arguments(self, parser, args):
        """parser.error() on a bad combination."""

    def config(self, args, vocab):
        """config.json as a dict; vocab has bos, eos, mask (token ids) and rows (embedding rows)."""
        raise NotImplementedError

    def examples(self, args, prompts, targets, pad_id):
        """The pool: (ids [n, L] int32, starts [n] = prompt lengths, ends [n], widths [n]). Buckets
        group examples by ends and keep the columns up to their largest width."""
        raise NotImplementedError

    def objective(self, args, buckets, mask_id, device):
        """A callable (model, bucket index, ids, starts, ends, generator) -> scalar training loss,
        given one batch of that bucket as device tensors (ids long [batch, bucket width]).
        buckets: [(ids, starts, ends)] of the pool, before they move to the device."""
        raise NotImplementedError

    def decodes(self, args):
        """[(block_length, denoising_steps)] that the evaluations decode with."""
        raise NotImplementedError


def parse_args(arch, argv, description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True, help="output HF folder (created)")
    p.add_argument("--tokenizer-dir", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    p.add_argument("--minutes", type=float, default=7.0, help="wall-clock budget of the training loop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=arch.kv_heads)
    p.add_argument("--intermediate", type=int, default=768)
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
    p.add_argument("--init-from", metavar="DIR",
                   help="start from the weights of this model folder (SDAR or LLaDA, the same sizes; "
                        "see init_from) instead of a random init")
    arch.add_arguments(p)
    args = p.parse_args(argv)
    if args.kv_heads is None:
        args.kv_heads = args.heads
    for name in ("layers", "hidden", "heads", "kv_heads", "intermediate", "batch", "pool", "log_every",
                 "eval_problems", "final_problems"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.heads % args.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if not 0 < args.eps < 1:
        p.error("--eps must be in (0, 1)")
    arch.check_arguments(p, args)
    return args


class ChatEncoder:
    """Prompt ids (chat template + generation prompt) and target ids, for the tokenizer folder.

    The tokenizer is tools/byte_bpe.py's (the demo models' small byte-level BPE, ASCII text) and
    the template is rendered as transformers does (tools/render_chat_template.py), so training
    needs neither transformers nor tokenizers. The template is rendered once around a sentinel and
    each question's ids are spliced between the ids of the two halves; check() compares that with
    encoding each whole rendered chat.
    """

    def __init__(self, tokenizer_dir):
        self.bpe = byte_bpe.ByteBPE.from_file(Path(tokenizer_dir) / "tokenizer.json")
        config = Path(tokenizer_dir) / "tokenizer_config.json"
        self.template = render_chat_template.template_from_config(config)
        self.special = render_chat_template.special_tokens(config)
        prefix, found, suffix = self.render(SENTINEL).partition(SENTINEL)
        if not found or SENTINEL in suffix:
            raise ValueError(f"the chat template does not render the question once: {prefix + found + suffix!r}")
        self.prefix, self.suffix = self.bpe.encode(prefix), self.bpe.encode(suffix)
        self.im_end = self.token_id("<|im_end|>")

    def render(self, question):
        variables = render_chat_template.hf_variables([{"role": "user", "content": question}], True, **self.special)
        return render_chat_template.render(self.template, variables)

    def check(self, questions):
        for question, ids in zip(questions, self.prompts(questions)):
            if ids != self.bpe.encode(self.render(question)):
                raise ValueError(f"spliced prompt ids differ from the rendered chat's for {question!r}: the "
                                 "template or the tokenizer joins the question with the text around it")

    def prompts(self, questions):
        return [self.prefix + self.bpe.encode(q) + self.suffix for q in questions]

    def targets(self, answers):
        """Answer ids + <|im_end|>: what the model must produce."""
        return [self.bpe.encode(a) + [self.im_end] for a in answers]

    def token_id(self, name):
        if name not in self.bpe.added:
            raise ValueError(f"the tokenizer has no token {name}")
        return self.bpe.added[name]

    def __len__(self):
        """Token ids the tokenizer knows (vocabulary and added tokens)."""
        return len(self.bpe.id_to_token)

    def decode(self, ids):
        return self.bpe.decode(ids, skip_special_tokens=True)


def pack(prompts, targets, block, pad_id):
    """Examples as one int32 array [n, L] (prompt + target, padded with pad_id), with the prompt
    lengths and the ends of the targets' last blocks (absolute multiples of block; block 1: the
    targets' ends). L = max end."""
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


def length_buckets(packed, starts, ends, widths, min_size):
    """Groups examples by ends, ascending, each group holding at least min_size examples (the last
    takes the rest); a group keeps the columns up to its largest width. Returns
    [(ids [n, W], starts [n], ends [n])] as NumPy arrays."""
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
    return [(packed[index, :int(widths[index].max())], starts[index], ends[index]) for index in groups]


def forward_logits(model, ids, positions, attn_mask, rows=None):
    """Float32 logits of ids [N, T] under bf16 autocast; rows (a slice of T) limits the LM head."""
    with torch.autocast(ids.device.type, dtype=torch.bfloat16):
        h, _ = model.hidden(ids, positions, attn_mask)
        return model.lm_head(h if rows is None else h[:, rows]).float()


def completion_mask(starts, ends, length, block, eps, generator):
    """[n, L] bool: which completion positions (starts <= pos < ends) to mask. Blocks are the
    absolute spans [kB, (k + 1)B) (L a multiple of B); one ratio t ~ U(eps, 1] per block, each
    position masked with probability t, and every block holding completion positions gets at
    least one mask."""
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


def dual_stream_loss(model, ids, masked, mask_id, attn_mask):
    """Mean cross-entropy over the masked positions of ids [n, L] (long), each predicted from the
    input [x_noisy ; x_clean] (x_noisy = ids with the masked positions set to mask_id, both
    halves at positions 0..L-1) under attn_mask ([2L, 2L] or [n, 2L, 2L], True = may attend): the
    clean half stands for the K/V the engine has cached, so every block of an example trains in
    one forward."""
    length = ids.shape[1]
    noisy = ids.masked_fill(masked, mask_id)
    positions = torch.arange(length, device=ids.device).repeat(2)[None]
    logits = forward_logits(model, torch.cat([noisy, ids], dim=1), positions, attn_mask, rows=slice(0, length))
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1), reduction="none").view_as(ids)
    return (ce * masked).sum() / masked.sum().clamp(min=1)


# config.json keys of the network's numerics, alike in SDAR's and LLaDA's configs: a model started
# from another folder's weights takes that folder's values.
INHERITED_CONFIG_KEYS = ("rope_theta", "rms_norm_eps")


@torch.no_grad()
def init_from(model, folder):
    """Copies the weights of the model folder (SDAR or LLaDA, of model's sizes) into model. Where
    the folder has fewer K/V heads, each is repeated over the query heads that read it (GQA
    computes exactly that); its q/k norms, which a LLaDA network has not, are dropped (the one
    change of function, which training then adapts to). Returns the names dropped."""
    source = torch_sdar.load_model(str(folder), device="cpu", dtype=torch.float32).state_dict()
    target = model.state_dict()
    missing = sorted(set(target) - set(source))
    if missing:
        raise ValueError(f"{folder} has no weights for {', '.join(missing[:4])}")
    for name, want in target.items():
        have = source[name]
        if name.endswith(("k_proj.weight", "v_proj.weight")) and have.shape != want.shape \
                and have.shape[1:] == want.shape[1:] and want.shape[0] % have.shape[0] == 0:
            heads = have.shape[0] // model.head_dim
            have = have.view(heads, model.head_dim, -1).repeat_interleave(want.shape[0] // have.shape[0], dim=0)
            have = have.reshape(want.shape)
        if have.shape != want.shape:
            raise ValueError(f"{name}: {folder} has shape {tuple(have.shape)}, the model {tuple(want.shape)}")
        want.copy_(have)
    return sorted(set(source) - set(target))


def lr_at(args, step, elapsed, budget):
    warmup = min(1.0, (step + 1) / args.warmup_steps)
    frac = min(1.0, elapsed / budget)
    return args.lr * warmup * (FINAL_LR_RATIO + (1 - FINAL_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * frac)))


def make_optimizer(model, args, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # norm weights
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), **fused)


class Evaluator:
    """Greedy block-diffusion exact match on a fixed problem set, per task, at one (B, S) and
    strategy (STRATEGIES), with the parallelism it buys: completion tokens per forward, the forwards
    counted as the engine counts num_forwards."""

    def __init__(self, encoder, problems, block, steps, strategy, max_tokens, mask_id, stop_ids, device):
        self.encoder, self.problems, self.block, self.steps = encoder, problems, block, steps
        self.strategy, self.threshold = strategy, STRATEGIES[strategy]
        self.max_tokens, self.mask_id, self.stop_ids, self.device = max_tokens, mask_id, stop_ids, device
        self.prompts = encoder.prompts([q for _, q, _ in problems])

    def __call__(self, model):
        was_training = model.training
        model.eval()
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            completions, forwards = torch_sdar.greedy_block_decode(
                model, self.prompts, self.block, self.steps, self.max_tokens, self.mask_id, self.stop_ids,
                self.threshold)
        model.train(was_training)
        texts = [self.encoder.decode(ids) for ids in completions]
        right, seen = {}, {}
        for (task, _, answer), text in zip(self.problems, texts):
            seen[task] = seen.get(task, 0) + 1
            right[task] = right.get(task, 0) + arith_tasks.check(text, answer)
        per_task = {task: right[task] / seen[task] for task in sorted(seen)}
        tokens = sum(map(len, completions))
        samples = [{"question": q, "completion": t, "answer": a} for (_, q, a), t in zip(self.problems[:4], texts)]
        return {"block_length": self.block, "denoising_steps": self.steps, "strategy": self.strategy,
                "dynamic_threshold": self.threshold, "problems": len(self.problems),
                "accuracy": sum(right.values()) / len(self.problems), "per_task": per_task,
                "completion_tokens": tokens, "forwards": sum(forwards), "tokens_per_forward": tokens / sum(forwards),
                "samples": samples}


def make_evaluators(encoder, problems, decodes, max_tokens, mask_id, stop_ids, device):
    """An Evaluator for every decode setting (B, S) and every strategy of STRATEGIES."""
    return [Evaluator(encoder, problems, block, steps, strategy, max_tokens, mask_id, stop_ids, device)
            for block, steps in decodes for strategy in STRATEGIES]


def evaluate(evaluators, model):
    return [e(model) for e in evaluators]


def format_eval(results):
    """One line per result."""
    lines = []
    for r in results:
        tasks = " ".join(f"{task} {acc:.3f}" for task, acc in r["per_task"].items())
        lines.append(f"  B={r['block_length']} S={r['denoising_steps']} {r['strategy']}: accuracy {r['accuracy']:.3f}, "
                     f"{r['tokens_per_forward']:.2f} tokens/forward ({tasks})")
    return "\n".join(lines)


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


def train(model, optimizer, args, buckets, objective, evaluators, log, device):
    """The time-bounded loop over length buckets [(ids, starts, ends)] on the device; fills
    log["steps"], log["loss_curve"], log["evals"]."""
    sizes = np.array([ids.shape[0] for ids, _, _ in buckets], dtype=np.float64)
    weights = sizes / sizes.sum()
    bucket_rng = np.random.default_rng(args.seed)  # host-side choice: no device sync
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    params = [p for p in model.parameters()]
    budget = args.minutes * 60.0
    loss_sum, loss_steps = torch.zeros((), device=device), 0
    last_good = (0, {name: t.detach().clone() for name, t in model.state_dict().items()})
    start = last_log = time.time()
    next_eval = start + args.eval_every
    step = 0
    while time.time() - start < budget:
        lr = lr_at(args, step, time.time() - start, budget)
        for group in optimizer.param_groups:
            group["lr"] = lr
        b = int(bucket_rng.choice(len(buckets), p=weights))
        pool_ids, pool_starts, pool_ends = buckets[b]
        index = torch.randint(pool_ids.shape[0], (args.batch,), device=device, generator=generator)
        loss = objective(model, b, pool_ids[index].long(), pool_starts[index], pool_ends[index], generator)
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
            if not math.isfinite(mean):
                model.load_state_dict(last_good[1])
                raise NonFiniteLoss(f"the loss became {mean} between steps {step - loss_steps} and {step}; "
                                    f"the weights of step {last_good[0]} are kept")
            last_good = (step, {name: t.detach().clone() for name, t in model.state_dict().items()})
            now = time.time()
            rate = loss_steps * args.batch / (now - last_log)
            log["loss_curve"].append([step, step * args.batch, round(now - start, 2), mean])
            print(f"step {step:6d}  examples {step * args.batch:10d}  {now - start:7.1f}s  loss {mean:.4f}  "
                  f"lr {lr:.2e}  {rate:,.0f} examples/s", flush=True)
            loss_sum, loss_steps, last_log = torch.zeros((), device=device), 0, now
        if time.time() >= next_eval:
            results = evaluate(evaluators, model)
            log["evals"].append({"step": step, "seconds": round(time.time() - start, 2), "decodes": results})
            print(f"eval step {step} ({len(evaluators[0].problems)} problems):\n{format_eval(results)}", flush=True)
            next_eval = time.time() + args.eval_every
    if device.type == "cuda":
        torch.cuda.synchronize()
    log["train_seconds"] = round(time.time() - start, 2)


def main(arch, argv=None, description=None):
    args = parse_args(arch, argv, description)
    wall_start = time.time()
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    encoder = ChatEncoder(args.tokenizer_dir)
    mask_id, im_end, eos = (encoder.token_id(name) for name in ("<|MASK|>", "<|im_end|>", "<|endoftext|>"))
    rows = -(-len(encoder) // VOCAB_ALIGN) * VOCAB_ALIGN
    config = arch.config(args, SimpleNamespace(bos=eos, eos=eos, mask=mask_id, rows=rows))
    if args.init_from:
        source = torch_sdar.load_config(args.init_from)
        config.update({key: source[key] for key in INHERITED_CONFIG_KEYS if key in source})
    generation = {"bos_token_id": eos, "eos_token_id": [im_end, eos], "pad_token_id": eos,
                  "transformers_version": config["transformers_version"]}

    model = torch_sdar.model_class(config)(config)
    num_params = sum(p.numel() for p in model.parameters())
    if 2 * num_params >= MAX_MODEL_BYTES:
        raise SystemExit(f"{num_params:,} parameters are {2 * num_params:,} bytes in bf16, over the "
                         f"{MAX_MODEL_BYTES:,} byte limit: make the model smaller")
    model.init_weights()
    if args.init_from:
        dropped = init_from(model, args.init_from)
        print(f"weights from {args.init_from}" + (f", without {len(dropped)} tensors ({dropped[0]}, ...)"
                                                  if dropped else ""), flush=True)
    model.to(device).train()
    print(f"model: {arch.name}, {num_params:,} parameters, vocab {len(encoder)} -> {rows} rows, device {device}",
          flush=True)

    prep_start = time.time()
    rng = random.Random(args.seed)
    problems = [arith_tasks.make_problem(rng) for _ in range(args.pool)]
    encoder.check([q for q, _ in problems[:256]])
    targets = encoder.targets(a for _, a in problems)
    max_target = max(map(len, targets))
    packed, starts, ends, widths = arch.examples(args, encoder.prompts([q for q, _ in problems]), targets, eos)
    host_buckets = length_buckets(packed, starts, ends, widths, min_size=4 * args.batch)
    objective = arch.objective(args, host_buckets, mask_id, device)
    buckets = [tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in bucket)
               for bucket in host_buckets]
    length = packed.shape[1]
    shapes = ", ".join(f"{ids.shape[0]:,}x{ids.shape[1]}" for ids, _, _ in buckets)
    print(f"data: {args.pool:,} problems, longest example {length} tokens, mean end {float(ends.mean()):.1f}, "
          f"longest completion {max_target}, buckets {shapes}, prepared in {time.time() - prep_start:.1f}s",
          flush=True)
    del problems, packed, host_buckets

    decodes = arch.decodes(args)
    max_tokens = max_target + max(block for block, _ in decodes)
    stop_ids = [im_end, eos]
    eval_rng, final_rng = random.Random(f"eval-{args.seed}"), random.Random(f"final-{args.seed}")
    eval_problems = [arith_tasks.make_labeled_problem(eval_rng) for _ in range(args.eval_problems)]
    final_problems = [arith_tasks.make_labeled_problem(final_rng) for _ in range(args.final_problems)]
    evaluators = make_evaluators(encoder, eval_problems, decodes, max_tokens, mask_id, stop_ids, device)
    final_evaluators = make_evaluators(encoder, final_problems, decodes, max_tokens, mask_id, stop_ids, device)

    log = {"args": vars(args), "architecture": arch.name, "parameters": num_params, "vocab_rows": rows,
           "sequence_length": length, "buckets": [list(ids.shape) for ids, _, _ in buckets],
           "steps": 0, "loss_curve": [], "evals": [], "status": "running"}
    optimizer = make_optimizer(model, args, device)
    try:
        train(model, optimizer, args, buckets, objective, evaluators, log, device)
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
    final = evaluate(final_evaluators, saved)
    log["final"] = final
    log["wall_seconds"] = round(time.time() - wall_start, 2)
    write_json(out / "training_log.json", log)
    print(f"SUMMARY {arch.name}: steps {log['steps']} examples {log['examples_seen']:,} train {log['train_seconds']}s "
          f"wall {log['wall_seconds']}s loss {log['loss_summary']['last'] if curve else 'n/a'}; final check "
          f"({args.final_problems} problems, bf16 checkpoint, PyTorch decoder):\n{format_eval(final)}", flush=True)
