"""Tokenizer: `llm.tokenizer`, the model's tokenizer and chat template with the HuggingFace
methods the original's users call (encode, decode, apply_chat_template, ...)."""

import json
import numbers
from collections.abc import Mapping

from . import _jetengine
from ._checks import check_bool, check_token_ids

# Message keys the C++ chat messages carry; any other key (tool_calls, name, ...) or non-text
# content makes the whole message list go to the template as given.
MESSAGE_KEYS = {"role", "content", "reasoning_content"}


class Tokenizer:
    def __init__(self, engine):
        self._engine = engine

    def encode(self, text, add_special_tokens=True):
        """Text to ids. add_special_tokens adds the post-processor's tokens (none for SDAR or
        LLaDA), as HuggingFace does by default."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self._engine.encode(text, check_bool("add_special_tokens", add_special_tokens))

    def decode(self, token_ids, skip_special_tokens=False):
        """Ids to text; ids the tokenizer does not know decode to nothing."""
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
    def vocab_size(self):
        return self._engine.vocab_size()

    def __len__(self):
        return self.vocab_size

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, enable_thinking=None,
                            tools=None, **template_variables):
        """Renders the model's chat template (tokenizer_config.json) like transformers does.

        messages: a list of {"role", "content"} dicts (a list of such lists renders each).
        tokenize: return ids (encoded without added special tokens) instead of text.
        enable_thinking: passed to the template when not None (Qwen3 / SDAR thinking mode).
        tools and further keyword arguments become template variables, as in transformers.
        """
        if _is_batch(messages):
            return [self.apply_chat_template(m, add_generation_prompt, tokenize, enable_thinking, tools,
                                             **template_variables) for m in messages]
        chat, verbatim = _chat_messages(messages)
        variables = dict(template_variables)
        if tools is not None:
            variables["tools"] = tools
        if verbatim:
            variables["messages"] = list(messages)
        if enable_thinking is not None:
            check_bool("enable_thinking", enable_thinking)
        text = self._engine.apply_chat_template(chat, check_bool("add_generation_prompt", add_generation_prompt),
                                                enable_thinking, json.dumps(variables) if variables else "")
        return self.encode(text, add_special_tokens=False) if check_bool("tokenize", tokenize) else text


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
        chat.append(_jetengine.ChatMessage(m["role"], text, reasoning if isinstance(reasoning, str) else ""))
    return chat, verbatim
