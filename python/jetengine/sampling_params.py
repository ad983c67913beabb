"""SamplingParams: the original JetEngine's per-request settings (same names and defaults), plus
dynamic_factor, seed and stop_token_ids; docs/decoding.md gives the exact semantics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

from . import _jetengine
from ._checks import check_bool, check_choice, check_float, check_int, check_token_ids


# The names remasking_strategy accepts, as the engine lists them.
STRATEGIES = tuple(_jetengine.remasking_strategies())


@dataclass
class SamplingParams:
    """How to decode one prompt.

    temperature: 0 = greedy, and so is anything below 1e-5 (the original divided by it; 0 had no
        meaning there).
    max_tokens: completion tokens at most; exact (the original could overshoot by up to
        block_length - 1).
    ignore_eos: True disables every stop (the model's EOS and stop_words), as in the original.
    block_length: None = the engine's; otherwise it must equal the engine's (the original
        defaulted to 4 and required the same equality).
    denoising_steps: denoising steps per block, 1..block_length (per sub-block, 1..sub_block_length,
        when sub_block_length is set).
    dynamic_threshold: confidence threshold of low_confidence_dynamic and dynamic_pmax.
    eb_threshold: entropy budget of entropy_bounded.
    topk: top-k of the candidate sampling; <= 0 = no top-k filter.
    topp: top-p of the candidate sampling, in (0, 1]; 1 = off.
    repetition_penalty: 1 = off.
    remasking_strategy: sequential, anti_sequential, random, dilated, low_confidence_static,
        margin_static, entropy_static, low_confidence_dynamic, dynamic_factor, dynamic_pmax,
        entropy_bounded.
    stop_words: token ids that end a completion; None = the model's EOS ids. As in the original,
        a list replaces the EOS default (include the EOS id to keep it).
    Ours: dynamic_factor (of the dynamic_factor strategy); seed (reproducible sampling, the same
    output whatever else is in the batch; None = a fresh seed per request); stop_token_ids (an
    alias of stop_words; give one or the other); stop (a string or a list of strings: the
    completion ends where its text first holds one, and the text stops before it);
    sub_block_length (> 0: the block is denoised that many positions at a time, left to right, each
    sub-block with its own denoising_steps, as Fast-dLLM v2's sub-blocks; it divides block_length;
    0 = the whole block at once); editing_threshold (token editing, LLaDA2.1's T2T: each step also
    samples the block's committed completion tokens, and one whose sample is more confident than
    this, in [0, 1], and differs is replaced; a block then ends after a step that changed nothing,
    or after max_post_steps steps, 0..1024, taken once no mask was left; None = off; not with
    sub_block_length, nor for models with shifted logits).
    """

    temperature: float = 1.0
    max_tokens: int = 64
    ignore_eos: bool = False
    block_length: Optional[int] = None
    denoising_steps: int = 4
    dynamic_threshold: float = 0.9
    eb_threshold: float = 0.35
    topk: int = 0
    topp: float = 1.0
    repetition_penalty: float = 1.0
    remasking_strategy: str = "low_confidence_static"
    stop_words: Optional[List[int]] = None
    dynamic_factor: float = 1.0
    seed: Optional[int] = None
    stop_token_ids: Optional[List[int]] = None
    stop: Union[None, str, List[str]] = None
    sub_block_length: int = 0
    editing_threshold: Optional[float] = None
    max_post_steps: int = 16

    def __post_init__(self):
        self.to_engine()  # report bad values where the object is made

    def to_engine(self):
        """The checked C++ jet::SamplingParams (fields may have changed since construction)."""
        p = _jetengine.SamplingParams()
        p.temperature = check_float("temperature", self.temperature, minimum=0.0)
        p.max_tokens = check_int("max_tokens", self.max_tokens, minimum=1, maximum=2**31 - 1)
        ignore_eos = check_bool("ignore_eos", self.ignore_eos)
        if self.block_length is not None:
            p.block_length = check_int("block_length", self.block_length, minimum=1, maximum=2**31 - 1)
        p.denoising_steps = check_int("denoising_steps", self.denoising_steps, minimum=1, maximum=2**31 - 1)
        p.sub_block_length = check_int("sub_block_length", self.sub_block_length, minimum=0, maximum=2**31 - 1)
        if self.editing_threshold is not None:
            p.editing_threshold = check_float("editing_threshold", self.editing_threshold, minimum=0.0, maximum=1.0)
        p.max_post_steps = check_int("max_post_steps", self.max_post_steps, minimum=0, maximum=1024)
        p.dynamic_threshold = check_float("dynamic_threshold", self.dynamic_threshold, minimum=0.0, maximum=1.0)
        p.eb_threshold = check_float("eb_threshold", self.eb_threshold, minimum=0.0)
        p.top_k = check_int("topk", self.topk, minimum=-(2**31), maximum=2**31 - 1)
        p.top_p = check_float("topp", self.topp, maximum=1.0, above=0.0)
        p.repetition_penalty = check_float("repetition_penalty", self.repetition_penalty, above=0.0)
        p.remasking_strategy = check_choice("remasking_strategy", self.remasking_strategy, STRATEGIES)
        p.dynamic_factor = check_float("dynamic_factor", self.dynamic_factor, above=0.0)
        if self.seed is not None:
            p.seed = check_int("seed", self.seed, minimum=0, maximum=2**64 - 1)
        p.stop = self._stop_strings()
        stop = self._stop_ids()
        # The engine stops at the model's EOS ids (unless ignore_eos) plus stop_token_ids.
        p.ignore_eos = ignore_eos or stop is not None
        p.stop_token_ids = [] if ignore_eos or stop is None else stop
        return p

    def _stop_strings(self):
        """stop as a list of strings, checked."""
        if self.stop is None:
            return []
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        if not isinstance(stops, (list, tuple)) or not all(isinstance(s, str) for s in stops):
            raise TypeError(f"stop must be a string or a list of strings, got {self.stop!r}")
        return list(stops)

    def _stop_ids(self):
        """stop_words or its alias, checked; None when neither is given."""
        given = {name: check_token_ids(name, getattr(self, name))
                 for name in ("stop_words", "stop_token_ids") if getattr(self, name) is not None}
        if len(given) == 2 and given["stop_words"] != given["stop_token_ids"]:
            raise ValueError("stop_token_ids is an alias of stop_words: give one of them, not both")
        return next(iter(given.values()), None)
