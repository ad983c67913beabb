"""The demo models' training scripts run end to end on a CPU and write folders the engine decodes.

tools/train_tiny_sdar.py and tools/train_tiny_llada.py at toy sizes for a few seconds (the
weights learn nothing yet): the run completes, training_log.json holds the final check at every
decode setting and strategy of the script, and the engine (CPU backend) loads the folder as the
script's family and decodes a chat prompt at those block lengths. Needs torch (skipped without
it); no safetensors, transformers or GPU. About 20 s on two cores.
"""
import json
import subprocess
import sys

import pytest

from jet_test_utils import BUILD, REPO

sys.path.insert(0, str(BUILD / "python"))

TOY = ["--layers", "2", "--hidden", "64", "--heads", "2", "--intermediate", "128", "--batch", "16",
       "--pool", "2000", "--minutes", "0.05", "--log-every", "5", "--eval-every", "1000",
       "--eval-problems", "8", "--final-problems", "16", "--device", "cpu"]
# config.json's model_type -> the script, its extra options, the block lengths its final check decodes at
RUNS = {"sdar": ("train_tiny_sdar.py", ["--kv-heads", "1", "--head-dim", "32"], (4,)),
        "llada": ("train_tiny_llada.py", [], (64, 8))}
STRATEGIES = {"low_confidence_static", "low_confidence_dynamic"}


@pytest.mark.parametrize("family", RUNS)
def test_training_writes_a_model_the_engine_decodes(tmp_path, family):
    pytest.importorskip("torch")
    script, extra, blocks = RUNS[family]
    out = tmp_path / family
    subprocess.run([sys.executable, str(REPO / "tools" / script), "--out", str(out),
                    "--tokenizer-dir", str(REPO / "models" / "sdar-tiny-arith"), *TOY, *extra],
                   check=True, capture_output=True, text=True, timeout=600)
    log = json.loads((out / "training_log.json").read_text(encoding="utf-8"))
    assert log["status"] == "completed" and log["steps"] > 0
    assert {(r["block_length"], r["strategy"]) for r in log["final"]} == {(b, s) for b in blocks for s in STRATEGIES}
    assert all(r["forwards"] > 0 and r["problems"] == 16 for r in log["final"])
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["model_type"] == family

    from jetengine import LLM, SamplingParams
    for block in blocks:
        llm = LLM(str(out), device="cpu", block_length=block)
        assert llm.summary.model_type == family
        prompt = llm.tokenizer.apply_chat_template([{"role": "user", "content": "What is 4821 + 937?"}],
                                                   add_generation_prompt=True)
        (output,) = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=8, denoising_steps=block),
                                 use_tqdm=False)
        assert 1 <= len(output["completion_ids"]) <= 8
