"""An engine model folder loaded as HF transformers' own model of the same network, on the GPU
(imports torch and transformers when called: the GPU scripts' other parts run without them).

    load_as(model_dir, tmp, "float32", "qwen2", "Qwen2ForCausalLM", drop=("bd_size",))

The copy under `tmp` has the engine family's config.json with transformers' model_type and
architectures (auto_map and the keys in `drop` removed) beside the same safetensors; the model
runs eager attention, so a 4D additive mask gives it the family's attention rule, with fp32
matmuls at full precision.
"""

import json
import shutil
from pathlib import Path


def load_as(model_dir, tmp, dtype_name, model_type, architecture, drop=()):
    import torch
    import transformers

    torch.set_float32_matmul_precision("highest")
    hf_dir = Path(tmp) / f"{model_type}-{Path(model_dir).name}"
    hf_dir.mkdir(exist_ok=True)
    config = json.loads((Path(model_dir) / "config.json").read_text())
    for key in ("auto_map", *drop):
        config.pop(key, None)
    config.update({"model_type": model_type, "architectures": [architecture]})
    (hf_dir / "config.json").write_text(json.dumps(config))
    for f in Path(model_dir).glob("*.safetensors*"):
        shutil.copy(f, hf_dir / f.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=getattr(torch, dtype_name),
                                                              attn_implementation="eager")
    return model.to("cuda").eval()
