"""Tokenizer: `llm.tokenizer`, the model's tokenizer and chat template with the HuggingFace
methods the original's users call (encode, decode, apply_chat_template, ...)."""

import json
import numbers
import os
from collections.abc import Mapping

from . import _jetengine
from ._checks import check_bool, check_token_ids

# Message keys the C++ chat messages carry; any other key (tool_calls, name, ...) or non-text
# content makes the whole message list go to the template as given.
MESSAGE_KEYS = {"role", "content", "reasoning_content"}


# tokenizer_config.json's special-token keys, in the order transformers lists all_special_tokens.
SPECIAL_TOKEN_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


class Tokenizer:
    def __init__(self, engine, model_dir):
        self._engine = engine
        self._special_tokens = _special_tokens(model_dir)

    def encode(self, text, add_special_tokens=True):
        """Text to ids. add_special_tokens adds the post-processor's tokens (none for SDAR or
        LLaDA), as HuggingFace does by default."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self._engine.encode(text, check_bool("add_special_tokens", add_special_tokens))

    def __call__(self, text, add_special_tokens=True):
        """transformers' tokenizer(text): {"input_ids", "attention_mask"}, for a str or a list of them."""
        if isinstance(text, (list, tuple)):
            return _batched([self(t, add_special_tokens) for t in text])
        return _encoding(self.encode(text, add_special_tokens))

    def decode(self, token_ids, skip_special_tokens=False):
        """Ids (or one id) to text; ids the tokenizer does not know decode to nothing."""
        if isinstance(token_ids, numbers.Integral) and not isinstance(token_ids, bool):
            token_ids = [token_ids]
        ids = check_token_ids("token_ids", token_ids)
        return self._engine.decode(ids, check_bool("skip_special_tokens", skip_special_tokens))

    def batch_decode(self, sequences, skip_special_tokens=False):
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    def convert_tokens_to_ids(self, tokens):
        """A token's id (None when absent), or a list of them for a list of tokens."""
        if isinstance(tokens, str):
            token_id = self._engine.token_to_id(tokens)
            return None if token_id < 0 else token_id
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, numbers.Integral):
            return self._engine.id_to_token(check_token_ids("ids", [ids])[0]) or None
        return [self.convert_ids_to_tokens(i) for i in check_token_ids("ids", ids)]

    @property
    def eos_token_id(self):
        return _id_or_none(self._engine.eos_id())

    @property
    def bos_token_id(self):
        return _id_or_none(self._engine.bos_id())

    @property
    def pad_token_id(self):
        return _id_or_none(self._engine.pad_id())

    @property
    def eos_token(self):
        return self.convert_ids_to_tokens(self.eos_token_id) if self.eos_token_id is not None else None

    @property
    def bos_token(self):
        return self.convert_ids_to_tokens(self.bos_token_id) if self.bos_token_id is not None else None

    @property
    def pad_token(self):
        return self.convert_ids_to_tokens(self.pad_token_id) if self.pad_token_id is not None else None

    @property
    def mask_token_id(self):
        """The mask id the engine decodes with (the mask_token_id option, else the model's)."""
        return self._engine.summary().mask_token_id

    @property
    def mask_token(self):
        return self.convert_ids_to_tokens(self.mask_token_id)

    @property
    def all_special_tokens(self):
        """The special tokens tokenizer_config.json names (bos, eos, unk, sep, pad, cls, mask, then
        additional_special_tokens), each once, in that order, as transformers lists them; tokens
        the vocabulary lacks are left out."""
        return [t for t in self._special_tokens if self.convert_tokens_to_ids(t) is not None]

    @property
    def all_special_ids(self):
        return [self.convert_tokens_to_ids(t) for t in self.all_special_tokens]

    def get_vocab(self):
        """{token: id} for every id the tokenizer knows."""
        vocab = {}
        for token_id in range(len(self)):
            token = self._engine.id_to_token(token_id)
            if token:
                vocab[token] = token_id
        return vocab

    @property
    def vocab_size(self):
        """The model's vocabulary without added tokens, as transformers' vocab_size (151,643 for
        Qwen3); len(tokenizer) counts the added tokens too."""
        return self._engine.model_vocab_size()

    def __len__(self):
        """Every id the tokenizer knows, added tokens included (their ids follow the vocabulary's in
        every supported model, so this is also transformers' len: 151,669 for Qwen3)."""
        return self._engine.vocab_size()

    def apply_chat_template(self, conversation=None, tools=None, add_generation_prompt=False,
                            continue_final_message=False, tokenize=True, return_dict=False, enable_thinking=None,
                            **template_variables):
        """Renders the model's chat template (tokenizer_config.json) as transformers does, with its
        defaults: token ids, no generation prompt (pass add_generation_prompt=True to generate).

        conversation: a list of {"role", "content"} dicts (a list of such lists renders each);
            `messages=` works too. A "reasoning_content" of "" reaches the template as an empty
            string, None as absent.
        add_generation_prompt: end with the assistant turn's header, where generation starts.
        continue_final_message: end right after the last message's content, without its end of
            turn, so that generation continues it; not with add_generation_prompt.
        tokenize: ids (encoded without added special tokens) instead of text.
        return_dict: with tokenize, {"input_ids": ids, "attention_mask": ones} as transformers gives.
        enable_thinking: passed to the template when not None (Qwen3 / SDAR thinking mode).
        tools and further keyword arguments become template variables, as in transformers; its
        tensor and padding options (chat_template, return_tensors, padding, truncation, max_length,
        tokenizer_kwargs, return_assistant_tokens_mask) are not supported: TypeError.
        """
        if conversation is None:
            conversation = template_variables.pop("messages", None)
        for name in UNSUPPORTED_TEMPLATE_OPTIONS:
            if template_variables.get(name) not in (None, False):
                raise TypeError(f"apply_chat_template: {name} is not supported by this tokenizer")
            template_variables.pop(name, None)
        tokenize, return_dict = check_bool("tokenize", tokenize), check_bool("return_dict", return_dict)
        if return_dict and not tokenize:
            raise ValueError("return_dict=True needs tokenize=True")
        options = dict(tools=tools, add_generation_prompt=add_generation_prompt,
                       continue_final_message=continue_final_message, tokenize=tokenize, return_dict=return_dict,
                       enable_thinking=enable_thinking, **template_variables)
        if _is_batch(conversation):
            rendered = [self.apply_chat_template(c, **options) for c in conversation]
            return _batched(rendered) if return_dict else rendered
        chat, verbatim = _chat_messages(conversation)
        variables = dict(template_variables)
        if tools is not None:
            variables["tools"] = tools
        if verbatim:
            variables["messages"] = list(conversation)
        if enable_thinking is not None:
            check_bool("enable_thinking", enable_thinking)
        if check_bool("continue_final_message", continue_final_message) and add_generation_prompt:
            raise ValueError("continue_final_message and add_generation_prompt cannot both be set")
        text = self._engine.apply_chat_template(chat, check_bool("add_generation_prompt", add_generation_prompt),
                                                enable_thinking, json.dumps(variables) if variables else "")
        if continue_final_message:
            text = _cut_after_final_message(text, conversation[-1])
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)
        return _encoding(ids) if return_dict else ids


# transformers' apply_chat_template options that shape tensors or swap the template: refused
# rather than passed to the template as variables.
UNSUPPORTED_TEMPLATE_OPTIONS = ("chat_template", "return_tensors", "padding", "truncation", "max_length",
                                "tokenizer_kwargs", "return_assistant_tokens_mask")


def _encoding(ids):
    """transformers' encoding of one text: its ids and an all-ones attention mask."""
    return {"input_ids": ids, "attention_mask": [1] * len(ids)}


def _batched(encodings):
    """Encodings of several texts as one, key by key, as transformers batches them."""
    return {key: [e[key] for e in encodings] for key in ("input_ids", "attention_mask")}


def _cut_after_final_message(text, message):
    """The rendered chat up to the end of the last message's content (transformers' rule: the
    content as given, else stripped, at its last occurrence)."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content
                          if isinstance(part, Mapping) and part.get("type") == "text")
    if not isinstance(content, str) or content.strip() not in text:
        raise ValueError("continue_final_message: the final message's content does not appear in the rendered chat")
    if content not in text:
        content = content.strip()
    return text[:text.rindex(content) + len(content)]


def _special_tokens(model_dir):
    """The special tokens of <model_dir>/tokenizer_config.json, in transformers' order, each once
    (a token is a string or an AddedToken dict with "content"); none without the file."""
    path = os.path.join(model_dir, "tokenizer_config.json")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    values = [config.get(key) for key in SPECIAL_TOKEN_KEYS] + list(config.get("additional_special_tokens") or [])
    tokens = []
    for value in values:
        token = value.get("content") if isinstance(value, Mapping) else value
        if isinstance(token, str) and token and token not in tokens:
            tokens.append(token)
    return tokens


def _id_or_none(token_id):
    return None if token_id < 0 else token_id


def _is_batch(messages):
    return isinstance(messages, (list, tuple)) and len(messages) > 0 and isinstance(messages[0], (list, tuple))


def _chat_messages(messages):
    """The C++ chat messages, and whether the template must see the messages as given."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    chat, verbatim = [], False
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise ValueError(f"messages[{i}] must be a dict with a str 'role' (and usually 'content')")
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        reasoning = m.get("reasoning_content")
        verbatim |= bool(set(m) - MESSAGE_KEYS) or not all(isinstance(v, (str, type(None))) for v in (content, reasoning))
        # None (or no key) is absent, "" is present: the template tells them apart (include/jet/chat.h).
        chat.append(_jetengine.ChatMessage(m["role"], text, reasoning if isinstance(reasoning, str) else None))
    return chat, verbatim
