"""Tokenizer files for tiny test models: the real Qwen3 tokenizer plus SDAR's <|MASK|>, or a small
byte-level BPE learned deterministically from a built-in text.

Both produce HuggingFace-format tokenizer.json / tokenizer_config.json in the Qwen2 layout (NFC,
Split(regex) + ByteLevel pre-tokenizer, ByteLevel decoder), so one tokenizer implementation reads
every tiny model.
"""
import collections
import copy
import dataclasses
import json
import re
from pathlib import Path

QWEN3_DIR = Path(__file__).resolve().parents[1] / "models" / "qwen3-tokenizer"

# Qwen2/Qwen3 pre-tokenizer regex (reference/models.md §1.7).
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# The same split for ASCII text in Python's `re` (no \p classes); the training text is ASCII.
_ASCII_SPLIT = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# LLaDA's chat template (reference/models.md §2.4): BOS first, always ends with the assistant header.
LLADA_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
)

# A plain ChatML template (Qwen's message layout without Qwen3's tools and thinking): one
# "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then the assistant header when asked.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Added tokens of the small vocabularies: (content, special). SDAR's mask is not special, as in SDAR.
SDAR_ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|MASK|>", False)]
LLADA_ADDED = [
    ("<|startoftext|>", True),
    ("<|endoftext|>", True),
    ("<|start_header_id|>", True),
    ("<|end_header_id|>", True),
    ("<|eot_id|>", True),
    ("<|mdm_mask|>", True),
]
QWEN3_MASK = (151669, "<|MASK|>")
QWEN3_VOCAB_ROWS = 151936  # SDAR's vocab_size (embedding rows beyond the tokenizer are padding)

TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. A small model learns to read and write.
Block diffusion models fill a block of masked tokens in a few steps, then move to the next block.
In the first step the model predicts every masked position; the most confident tokens are kept,
and the others stay masked until a later step. When no mask is left, the block is committed.
There are 365 days in a year, 24 hours in a day, 60 minutes in an hour and 60 seconds in a minute.
Add 12 and 30 to get 42. Multiply 7 by 8 to get 56. The answer is 1024 when you double 512.
She said: "It's a good day, isn't it?" He replied that they'd see, and we'll all wait.
Questions and answers: What is the capital of France? Paris. What is two plus two? Four.
Numbers like 3.14159 and 2.71828 appear in mathematics, physics and engineering.
The weather today is sunny with a light wind from the west, and tomorrow it will rain.
Good morning! How are you? I am fine, thank you. Let us write a short story about a cat.
Once upon a time there was a cat who lived in a house near the river. The cat liked to sleep
in the sun and to watch the birds. One day the cat saw a boat on the river and wanted to sail.
"""


@dataclasses.dataclass
class Vocab:
    tokenizer: dict  # tokenizer.json
    tokenizer_config: dict  # tokenizer_config.json
    rows: int  # embedding rows (config vocab_size)
    bos: int  # beginning-of-text id (the chat template's BOS for LLaDA)
    eos: int  # <|endoftext|>: config eos/pad
    stop_ids: list  # generation_config eos_token_id
    mask: int


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def learn_merges(text, num_merges):
    """Byte-level BPE merges learned from `text`; ties go to the lexicographically smallest pair.
    `text` is a str or a list of str, each pre-tokenized on its own (pass the pieces of a chat
    between its special tokens, which the tokenizer splits off before BPE). Learning stops early
    when every word is one token."""
    byte_char = bytes_to_unicode()
    texts = [text] if isinstance(text, str) else text
    words = collections.Counter(
        tuple(byte_char[b] for b in piece.encode()) for t in texts for piece in _ASCII_SPLIT.findall(t)
    )
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        words = collections.Counter({_merge(word, best): count for word, count in words.items()})
    return merges


def _merge(word, pair):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _added_entry(token_id, content, special):
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def _decoder_entry(entry):
    return {k: entry[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}


def _byte_level(component_type):
    return {"type": component_type, "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def small_tokenizer_json(merges, added):
    byte_char = bytes_to_unicode()
    vocab = {byte_char[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added_tokens = [_added_entry(len(vocab) + i, content, special) for i, (content, special) in enumerate(added)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
                _byte_level("ByteLevel"),
            ],
        },
        "post_processor": _byte_level("ByteLevel"),
        "decoder": _byte_level("ByteLevel"),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in merges],
        },
    }


def _read_qwen3(file_name):
    return json.loads((QWEN3_DIR / file_name).read_text(encoding="utf-8"))


def _sdar_tokenizer_config(qwen3_config, added_tokens, mask):
    """Qwen3's tokenizer_config.json (chat template included) with SDAR's changes (tokenizer.md)."""
    config = copy.deepcopy(qwen3_config)
    config["added_tokens_decoder"] = {str(e["id"]): _decoder_entry(e) for e in added_tokens}
    present = {e["content"] for e in added_tokens}
    specials = [t for t in config["additional_special_tokens"] if t in present]
    config["additional_special_tokens"] = specials + [mask]
    config["mask_token"] = mask
    config["eos_token"] = "<|endoftext|>"
    return config


def _llada_tokenizer_config(added_tokens):
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {str(e["id"]): _decoder_entry(e) for e in added_tokens},
        "bos_token": "<|startoftext|>",
        "chat_template": LLADA_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def qwen3_vocab():
    """The real Qwen3 tokenizer plus <|MASK|> at 151669, as SDAR ships it. The chat template goes
    with the vocabulary (Qwen3's), whatever the architecture."""
    tokenizer = _read_qwen3("tokenizer.json")
    mask_id, mask = QWEN3_MASK
    tokenizer["added_tokens"].append(_added_entry(mask_id, mask, False))
    ids = {e["content"]: e["id"] for e in tokenizer["added_tokens"]}
    config = _sdar_tokenizer_config(_read_qwen3("tokenizer_config.json"), tokenizer["added_tokens"], mask)
    return Vocab(
        tokenizer,
        config,
        QWEN3_VOCAB_ROWS,
        bos=ids["<|endoftext|>"],
        eos=ids["<|endoftext|>"],
        stop_ids=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        mask=mask_id,
    )


def small_vocab(arch, num_merges=300):
    """A byte-level BPE of 256 bytes + learned merges + the family's added tokens; embedding rows
    are the tokenizer size rounded up to a multiple of 64."""
    added = LLADA_ADDED if arch == "llada" else SDAR_ADDED
    tokenizer = small_tokenizer_json(learn_merges(TRAINING_TEXT, num_merges), added)
    ids = {e["content"]: e["id"] for e in tokenizer["added_tokens"]}
    size = len(tokenizer["model"]["vocab"]) + len(added)
    rows = -(-size // 64) * 64
    if arch == "llada":
        config = _llada_tokenizer_config(tokenizer["added_tokens"])
        return Vocab(
            tokenizer,
            config,
            rows,
            bos=ids["<|startoftext|>"],
            eos=ids["<|endoftext|>"],
            stop_ids=[ids["<|endoftext|>"], ids["<|eot_id|>"]],
            mask=ids["<|mdm_mask|>"],
        )
    config = _sdar_tokenizer_config(_read_qwen3("tokenizer_config.json"), tokenizer["added_tokens"], "<|MASK|>")
    return Vocab(
        tokenizer,
        config,
        rows,
        bos=ids["<|endoftext|>"],
        eos=ids["<|endoftext|>"],
        stop_ids=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        mask=ids["<|MASK|>"],
    )


def chatml_sdar_tokenizer(texts, num_merges):
    """(tokenizer.json, tokenizer_config.json) of a small SDAR tokenizer for a model trained from
    scratch: 256 bytes + BPE merges learned from `texts` (see learn_merges) + SDAR's added tokens,
    the ChatML template, eos <|im_end|> (the end of an assistant turn), pad <|endoftext|>."""
    tokenizer = small_tokenizer_json(learn_merges(texts, num_merges), SDAR_ADDED)
    added = tokenizer["added_tokens"]
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(e["id"]): _decoder_entry(e) for e in added},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|MASK|>"],
        "bos_token": None,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "mask_token": "<|MASK|>",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    return tokenizer, config


def folder_vocab(folder):
    """The SDAR vocabulary of an existing tokenizer folder (tokenizer.json + tokenizer_config.json,
    e.g. models/sdar-tiny-arith), for a random model that shares a trained model's tokenizer.
    Embedding rows: the tokenizer size rounded up to a multiple of 64, as small_vocab."""
    folder = Path(folder)
    try:
        tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{folder}: cannot read tokenizer.json / tokenizer_config.json: {error}") from None
    ids = {e["content"]: e["id"] for e in tokenizer["added_tokens"]}
    missing = [t for t in ("<|endoftext|>", "<|im_end|>", "<|MASK|>") if t not in ids]
    if missing:
        raise ValueError(f"{folder}/tokenizer.json lacks SDAR's added tokens {missing}")
    size = max([*tokenizer["model"]["vocab"].values(), *ids.values()]) + 1
    return Vocab(
        tokenizer,
        config,
        -(-size // 64) * 64,
        bos=ids["<|endoftext|>"],
        eos=ids["<|endoftext|>"],
        stop_ids=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        mask=ids["<|MASK|>"],
    )
