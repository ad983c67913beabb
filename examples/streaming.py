#!/usr/bin/env python3
"""Continuous batching over a long prompt list, the original's generate_streaming flow: at most
--max-active prompts are in the engine at once, and a new one enters as soon as one finishes.

    python3 examples/streaming.py --model DIR [--copies N] [--max-active N] [--device ...]
"""
import argparse
import time

from jetengine import LLM, SamplingParams

QUESTIONS = [
    "Name three prime numbers larger than 10.",
    "How many minutes are there in a day?",
    "What is 15% of 200?",
    "Write the number 1000 in Roman numerals.",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="HuggingFace model folder")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--copies", type=int, default=32, help="times each question is asked (rollouts)")
    parser.add_argument("--max-active", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    llm = LLM(args.model, device=args.device, max_num_seqs=args.max_active)
    chats = [[{"role": "user", "content": q}] for q in QUESTIONS for _ in range(args.copies)]
    prompts = [llm.tokenizer.apply_chat_template(chat, add_generation_prompt=True) for chat in chats]
    params = SamplingParams(temperature=1.0, max_tokens=args.max_tokens, remasking_strategy="low_confidence_dynamic")

    start = time.perf_counter()
    outputs = llm.generate_streaming(prompts, params, max_active=args.max_active)
    seconds = time.perf_counter() - start

    tokens = sum(len(out["completion_ids"]) for out in outputs)
    print(f"{len(outputs)} completions, {tokens} tokens in {seconds:.2f} s ({tokens / seconds:.0f} tokens/s)")
    for question, out in zip(QUESTIONS, outputs[::args.copies]):
        print(f"\nQ: {question}\nA: {out['completion_text']}")


if __name__ == "__main__":
    main()
