"""One rank of tests/python/test_data_parallel.py: reads a job (JSON, argv[1]), builds an LLM on the
tiny model, runs the job's generate calls and writes what each returned or raised (JSON, argv[2]).
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the test, as a launcher would set them."""

import json
import os
import sys

job = json.loads(open(sys.argv[1]).read())
sys.path.insert(0, job["package"])
if job.get("hide_torch"):
    sys.modules["torch"] = None  # `import torch` raises ImportError, as on a machine without PyTorch
from jetengine import LLM, SamplingParams  # noqa: E402

rank = int(os.environ["RANK"])
results = []
try:
    llm = LLM(job["model"], **job["engine"])
except Exception as error:  # noqa: BLE001  (the test checks the message)
    results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump(results, open(sys.argv[2], "w"))
    sys.exit(0)

decoded = []
real_decode = llm._decode


def counting_decode(prompt_ids, *args):
    decoded.append(len(prompt_ids))
    if job.get("fail_rank") == rank:
        raise RuntimeError(f"rank {rank} broke on purpose")
    return real_decode(prompt_ids, *args)


llm._decode = counting_decode
for call in job["calls"]:
    prompts = call["prompts"][str(rank)] if isinstance(call["prompts"], dict) else call["prompts"]
    params = [SamplingParams(**p) for p in call["params"]] if isinstance(call["params"], list) \
        else SamplingParams(**call["params"])
    decoded.clear()
    try:
        if call["method"] == "generate":
            outputs = llm.generate(prompts, params, use_tqdm=False)
        else:
            outputs = llm.generate_streaming(prompts, params, max_active=call.get("max_active"), use_tqdm=False)
        results.append({"outputs": outputs, "decoded": sum(decoded)})
    except Exception as error:  # noqa: BLE001
        results.append({"error": f"{type(error).__name__}: {error}", "decoded": sum(decoded)})
json.dump(results, open(sys.argv[2], "w"))
