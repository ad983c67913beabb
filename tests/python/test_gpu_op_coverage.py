"""Every op the CUDA backend implements has a parity test against the CPU backend in tests/gpu
(which CTest runs under the label `gpu` on a machine with a GPU): each op the CudaBackend
overrides (src/backend/cuda/cuda_backend.h) is called in a tests/gpu source. Memory and
bookkeeping members (alloc, alloc_host, upload, ..., the supports_* capabilities, copy_on_device and
check_device_memory, which
tests/gpu/weights_from_device.py drives, run_recorded, whose CUDA graphs engine_parity.py
checks against eager launches, use_on_this_thread, which every Engine entry point calls) are not
ops."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_OPS = {"name", "compute_dtype", "alloc", "alloc_host", "copy_on_device", "check_device_memory", "upload",
           "download", "synchronize", "default_kv_budget_bytes", "available_memory_bytes", "run_recorded",
           "use_on_this_thread"}


def cuda_ops():
    header = (REPO / "src" / "backend" / "cuda" / "cuda_backend.h").read_text()
    names = re.findall(r"\b([a-z_0-9]+)\([^;{]*\)\s*(?:const\s*)?override", header, re.S)
    return sorted(name for name in set(names) - NOT_OPS if not name.startswith("supports_"))


def called_in_gpu_tests(op):
    call = re.compile(r"[.>]" + re.escape(op) + r"\(")
    return any(call.search(path.read_text()) for path in (REPO / "tests" / "gpu").glob("test_*.c*"))


def test_the_cuda_ops_are_found():
    ops = cuda_ops()
    assert {"matmul", "attention", "moe", "sample_positions", "commit_step"} <= set(ops), ops


def test_every_cuda_op_has_a_gpu_parity_test():
    assert [op for op in cuda_ops() if not called_in_gpu_tests(op)] == []
