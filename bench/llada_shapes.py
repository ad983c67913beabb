"""LLaDA-8B's shapes and the rows of its benchmarks (issue 25), shared by bench/torch_llada_generate.py
(the PyTorch peer) and bench/llada_gemm_floor.py (the GEMM floor); bench/run_gpu.sh llada runs the
engine on the same rows.

    LLADA_8B               LLaDA-8B-Instruct's config.json keys that tests/reference/torch_llada.py reads
    TINY                   the same keys at toy sizes, for smoke runs on a CPU
    ROWS                   Row(block, steps, batch, prompt, max_tokens), greedy, low_confidence_static
    engine_forwards(row)   the engine's forwards of a row: (token rows, masked rows) each
    llada_generate_args(row)  LLaDA generate's (gen_length, block_length, steps) for the same decode
    add_target_arguments(parser), target(args)   the --device / --tiny options both benchmarks take

Rows: B = 1024 with the prompt inside the block (pure diffusion, 960 completion tokens); B = 64 and
B = 32 with 256 completion tokens after a prompt of 64. Batch 8 at B = 1024 takes 128 steps (8
commits per step) instead of 1,024, so that the run takes seconds, not minutes: its forwards have
the same rows, and its masked rows the same mean.
"""
import dataclasses

# reference/models.md §2.1.
LLADA_8B = {"d_model": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 32, "mlp_hidden_size": 12288,
            "vocab_size": 126464, "embedding_size": 126464, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
            "mask_token_id": 126336}
TINY = dict(LLADA_8B, d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, mlp_hidden_size=128, vocab_size=640,
            embedding_size=640, mask_token_id=600)
# The engine's default max_num_batched_tokens: a forward past it is split, which engine_forwards
# does not follow.
MAX_BATCHED_TOKENS = 16384


@dataclasses.dataclass(frozen=True)
class Row:
    block: int
    steps: int  # the engine's denoising steps per block
    batch: int
    prompt: int
    max_tokens: int

    @property
    def name(self):
        return f"B={self.block} S={self.steps} batch {self.batch}"

    @property
    def tokens(self):
        return self.batch * self.max_tokens


ROWS = [Row(1024, 1024, 1, 64, 960), Row(1024, 128, 8, 64, 960),
        Row(64, 64, 1, 64, 256), Row(64, 64, 64, 64, 256),
        Row(32, 32, 1, 64, 256), Row(32, 32, 32, 64, 256)]


def engine_forwards(row):
    """[(token rows, masked rows)] of the engine's forwards for a row, every sequence in step
    (docs/decoding.md §1-2): one prefill of the prompt's full blocks (no logits), then per block
    its denoise steps until no mask is left; a finished block's save rides in the next block's
    first step as an entry of its own (LLaDA is bidirectional), doubling that forward's rows."""
    B, S, n = row.block, row.steps, row.batch
    counts = [B // S + (s < B % S) for s in range(S)]
    num_prefill = row.prompt // B * B
    tail = row.prompt - num_prefill
    forwards = [(n * num_prefill, 0)] if num_prefill else []
    done, first = 0, True
    while done < row.max_tokens:
        masks = B - tail if first else B
        done += masks
        step = 0
        while masks:
            forwards.append((n * B * (1 if first or step else 2), n * masks))
            masks -= masks if step == S - 1 else min(counts[step], masks)
            step += 1
        first = False
    too_big = [rows for rows, _ in forwards if rows > MAX_BATCHED_TOKENS]
    if too_big:
        raise ValueError(f"{row.name}: a forward of {too_big[0]} rows would be split at {MAX_BATCHED_TOKENS}")
    return forwards


def llada_generate_args(row):
    """(gen_length, block_length, steps) of LLaDA's generate doing the row's decode: the same
    completion tokens, the same commits per step, so as many steps as the engine's denoise
    forwards. Pure diffusion (the prompt inside the first block) is one block of the masks."""
    pure = row.prompt < row.block
    gen_length = row.block - row.prompt if pure else row.max_tokens
    if gen_length != row.max_tokens or (not pure and row.max_tokens % row.block):
        raise ValueError(f"{row.name}: max_tokens {row.max_tokens} does not fill whole blocks")
    steps = sum(1 for _, masked in engine_forwards(row) if masked)
    return gen_length, gen_length if pure else row.block, steps


def add_target_arguments(parser):
    """--device and --tiny, the options of what a benchmark runs on."""
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="toy shapes, to check the script (e.g. on a CPU)")


def target(args):
    """(device, config, dtype, description) of --device and --tiny: bf16 on a GPU, fp32 elsewhere;
    the description (torch, the device, the shapes) starts a report's first line."""
    import torch  # here, so that the rows and the shapes need no torch

    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    shapes = "toy" if args.tiny else "LLaDA-8B"
    return device, TINY if args.tiny else LLADA_8B, dtype, f"torch {torch.__version__}, {name}: {shapes} shapes"
