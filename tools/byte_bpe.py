"""A pure-Python encoder and decoder for the small byte-level BPE tokenizers of tools/tiny_tokenizer.py
(the tiny models' and models/sdar-tiny-arith's tokenizer.json), for ASCII text.

It is the independent check of the C++ tokenizer on those files (tests/python/test_arith_tokenizer.py)
and lets the training of the demo models (tools/tiny_training.py) tokenize without transformers. It follows HuggingFace's pipeline
for these files: split off added tokens (exact content, longest first), NFC (the identity on
ASCII), the Qwen2 pre-tokenizer split, byte-to-unicode mapping, then BPE merges by rank.
Non-ASCII text is refused: Python's `re` has no \\p{L} / \\p{N} classes for the real split.

    tok = ByteBPE.from_file("models/sdar-tiny-arith/tokenizer.json")
    ids = tok.encode("<|im_start|>user\\nWhat is 4821 + 937?<|im_end|>\\n")
    text = tok.decode(ids, skip_special_tokens=True)
"""
import json
import re
from pathlib import Path

from tiny_tokenizer import _ASCII_SPLIT, bytes_to_unicode


class ByteBPE:
    def __init__(self, tokenizer_json):
        model = tokenizer_json.get("model", {})
        if model.get("type") != "BPE":
            raise ValueError(f"not a BPE tokenizer.json (model.type = {model.get('type')!r})")
        self.vocab = dict(model["vocab"])
        self.ranks = {tuple(m if isinstance(m, list) else m.split(" ")): r for r, m in enumerate(model["merges"])}
        self.added = {e["content"]: e["id"] for e in tokenizer_json["added_tokens"]}
        self.special_ids = {e["id"] for e in tokenizer_json["added_tokens"] if e["special"]}
        self.id_to_token = {i: t for t, i in self.vocab.items()} | {i: t for t, i in self.added.items()}
        self._byte_char = bytes_to_unicode()
        self._char_byte = {c: b for b, c in self._byte_char.items()}
        self._pieces = {}  # piece -> ids (_piece_ids)
        # Longest first, so that one added token that is a prefix of another never wins.
        alternatives = sorted(self.added, key=len, reverse=True)
        self._added_split = re.compile("(" + "|".join(map(re.escape, alternatives)) + ")") if alternatives else None

    @classmethod
    def from_file(cls, path):
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.isascii():
            raise ValueError("ByteBPE encodes ASCII text only (Python's re lacks the \\p classes of the real split)")
        parts = self._added_split.split(text) if self._added_split else [text]
        ids = []
        for i, part in enumerate(parts):
            if i % 2:  # re.split puts the captured added tokens at odd indices
                ids.append(self.added[part])
            else:
                for piece in _ASCII_SPLIT.findall(part):
                    ids += self._piece_ids(piece)
        return ids

    def _piece_ids(self, piece):
        """The ids of one pre-tokenized piece, remembered: training data repeats a few pieces millions
        of times."""
        ids = self._pieces.get(piece)
        if ids is None:
            ids = self._pieces[piece] = [self.vocab[t] for t in self._bpe("".join(self._byte_char[b] for b in piece.encode()))]
        return ids

    def decode(self, ids, skip_special_tokens=False):
        """Ids the tokenizer does not know decode to nothing, as in HuggingFace."""
        out, pending = [], bytearray()
        for i in ids:
            token = self.id_to_token.get(i)
            if token is None or (skip_special_tokens and i in self.special_ids):
                continue
            if token in self.added:
                out.append(pending.decode("utf-8", errors="replace") + token)
                pending = bytearray()
            else:
                pending += bytes(self._char_byte[c] for c in token)
        return "".join(out) + pending.decode("utf-8", errors="replace")

    def _bpe(self, word):
        """The tokens of one pre-tokenized piece: merge the lowest-ranked adjacent pair until none applies."""
        parts = list(word)
        while len(parts) > 1:
            best = min(zip(parts, parts[1:]), key=lambda pair: self.ranks.get(pair, len(self.ranks)))
            if best not in self.ranks:
                break
            out, j = [], 0
            while j < len(parts):  # every occurrence of the pair, left to right
                if (parts[j], parts[j + 1] if j + 1 < len(parts) else None) == best:
                    out.append(parts[j] + parts[j + 1])
                    j += 2
                else:
                    out.append(parts[j])
                    j += 1
            parts = out
        return parts
