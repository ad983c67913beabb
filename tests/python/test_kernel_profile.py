"""bench/kernel_profile.py's bookkeeping, without a GPU: how a stream of kernel launches is cut
into forwards (a denoise forward starts at its gather_block_tokens kernels, a prefill at the
embedding kernel; the embedding kernel after the final norm is the LM head's row gather and
stays in its forward) and which component each kernel counts for."""
import sys

from jet_test_utils import REPO

sys.path.insert(0, str(REPO / "bench"))
import kernel_profile  # noqa: E402


def launches(*names):
    return [(name, "(1, 1, 1)", 1.0) for name in names]


def layer():
    return ["add_rmsnorm_kernel<8>", "nvjet_sm90_tst_128x128_TNT", "qk_norm_rope_kernel<2>",
            "attention_kernel<128, 1>", "nvjet_sm90_tst_96x128_TNN", "add_rmsnorm_kernel<8>",
            "nvjet_sm90_tst_448x64_TNN", "swiglu_kernel<8>", "nvjet_sm90_tst_256x64_TNT"]


def denoise_forward():
    return (["gather_block_tokens_kernel", "gather_block_tokens_kernel", "embedding_kernel<8>"] + layer() + layer()
            + ["add_rmsnorm_kernel<8>", "embedding_kernel<8>", "nvjet_sm90_tss_lm_head", "sample_masked_positions",
               "commit_selected_positions"])


def prefill_forward():
    return ["embedding_kernel<8>"] + layer() + layer()


def test_forwards_are_cut_at_their_first_kernel():
    stream = launches(*(prefill_forward() + denoise_forward() + denoise_forward()))
    forwards = kernel_profile.split_forwards(stream)
    assert [len(f) for f in forwards] == [len(prefill_forward()), len(denoise_forward()), len(denoise_forward())]
    assert forwards[1][0][0] == "gather_block_tokens_kernel"
    # The LM head's row gather (an embedding kernel right after the final norm) stays inside.
    assert sum("embedding_kernel" in name for name, _, _ in forwards[1]) == 2


def test_components():
    assert kernel_profile.component("attention_kernel<128, 1>") == "attention"
    assert kernel_profile.component("combine_splits_kernel") == "attention"
    assert kernel_profile.component("add_rmsnorm_kernel<8>") == "norms"
    assert kernel_profile.component("qk_norm_rope_kernel<2>") == "qk_norm_rope"
    assert kernel_profile.component("commit_selected_positions") == "sampling"
    assert kernel_profile.component("nvjet_sm90_tst_128x128_TNT") == "gemm"
    assert kernel_profile.component("void cublasLt::splitKreduce_kernel<32, 16>") == "gemm"
    assert kernel_profile.component("embedding_kernel<8>") == "embedding+gather"
