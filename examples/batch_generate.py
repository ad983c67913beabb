#!/usr/bin/env python3
"""Batch generation, the original JetEngine's example flow: chat-formatted questions decoded
together by llm.generate, with low-confidence dynamic remasking.

    python3 examples/batch_generate.py --model DIR [--device cpu|cuda|auto] [--max-tokens N]

Any SDAR / LLaDA folder works; a tiny random one for a quick run:
    python3 tools/make_tiny_model.py --arch sdar --out /tmp/tiny-sdar
"""
import argparse

from jetengine import LLM, SamplingParams

QUESTIONS = [
    "What is the sum of the first ten positive integers?",
    "A rectangle is 3 cm wide and 5 cm long. What is its area?",
    "If x + 4 = 10, what is x?",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="HuggingFace model folder")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    llm = LLM(args.model, device=args.device, max_num_seqs=32, max_model_len=4096)
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": q + " Solve it step by step."}],
                                                 add_generation_prompt=True, tokenize=True)
               for q in QUESTIONS]
    params = SamplingParams(temperature=1.0, topk=0, topp=1.0, max_tokens=args.max_tokens,
                            remasking_strategy="low_confidence_dynamic", dynamic_threshold=0.9, denoising_steps=4)
    for question, out in zip(QUESTIONS, llm.generate(prompts, params)):
        # Tokens per denoising forward: how much the dynamic strategy decodes in parallel.
        speedup = len(out["trajectory"]) / max(out["trajectory"])
        print(f"Q: {question}\nA: {out['completion_text']}\n"
              f"   ({len(out['completion_ids'])} tokens, {out['finish_reason']}, {speedup:.2f} tokens/step)\n")


if __name__ == "__main__":
    main()
