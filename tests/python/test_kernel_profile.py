"""bench/kernel_profile.py's bookkeeping, without a GPU: how a stream of kernel launches is cut
into forwards (a denoise forward starts at its gather_block_tokens kernels, a prefill at the
embedding kernel; the embedding kernels that gather the last layer's rows and the LM head's stay
in their forward), which component each kernel counts for, and the real run's exclusive times."""
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


def last_layer():
    """The last layer of a forward with logits: attention's output and the residual are gathered to
    the logit rows (two embedding kernels) before o_proj."""
    first = layer()
    return first[:4] + ["embedding_kernel<8>", "embedding_kernel<8>"] + first[4:]


def denoise_forward():
    return (["gather_block_tokens_kernel", "gather_block_tokens_kernel", "embedding_kernel<8>"] + layer()
            + last_layer() + ["add_rmsnorm_kernel<8>", "nvjet_sm90_tss_lm_head", "sample_step_positions",
                              "commit_selected_positions"])


def prefill_forward():
    return ["embedding_kernel<8>"] + layer() + layer()


def test_forwards_are_cut_at_their_first_kernel():
    stream = launches(*(prefill_forward() + denoise_forward() + denoise_forward()))
    forwards = kernel_profile.split_forwards(stream)
    assert [len(f) for f in forwards] == [len(prefill_forward()), len(denoise_forward()), len(denoise_forward())]
    assert forwards[1][0][0] == "gather_block_tokens_kernel"
    # The last layer's row gathers (embedding kernels right after attention) stay inside.
    assert sum("embedding_kernel" in name for name, _, _ in forwards[1]) == 3


def test_lm_head_is_the_last_gemm_of_a_denoise_forward():
    forward = launches(*denoise_forward())
    comps = kernel_profile.labels(forward, is_denoise=True)
    assert comps.count("lm_head") == 1 and comps[forward.index(("nvjet_sm90_tss_lm_head", "(1, 1, 1)", 1.0))] == "lm_head"
    assert "lm_head" not in kernel_profile.labels(forward, is_denoise=False)


def test_exclusive_times_do_not_count_a_kernel_waiting_for_the_one_before():
    # (name, grid, us, start_ns, end_ns, graph_id): the second starts (programmatic launch) 2 us
    # before the first ends, the third 5 us after the second ends.
    forward = [("a", "1", 10.0, 0, 10_000, 1), ("b", "1", 7.0, 8_000, 15_000, 1), ("c", "1", 5.0, 20_000, 25_000, 1)]
    assert kernel_profile.exclusive_times(forward) == [(10.0, 0.0), (5.0, 0.0), (5.0, 5.0)]


def test_saved_traces_load_back(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("kernel,grid,us,start_ns,end_ns,graph_id\n"
                    "\"void f<1, 2>(int)\",8x1x1,1.5,100,1600,3\n"
                    "g,1x1x1,2.0,None,None,None\n")
    assert kernel_profile.load_saved(path) == [("void f<1, 2>(int)", "8x1x1", 1.5, 100, 1600, 3),
                                               ("g", "1x1x1", 2.0, None, None, None)]


def test_components():
    assert kernel_profile.component("attention_kernel<128, 1>") == "attention"
    assert kernel_profile.component("combine_splits_kernel") == "attention"
    assert kernel_profile.component("add_rmsnorm_kernel<8>") == "norms"
    assert kernel_profile.component("qk_norm_rope_kernel<2>") == "qk_norm_rope"
    assert kernel_profile.component("commit_selected_positions") == "sampling"
    assert kernel_profile.component("nvjet_sm90_tst_128x128_TNT") == "gemm"
    assert kernel_profile.component("void cublasLt::splitKreduce_kernel<32, 16>") == "gemm"
    assert kernel_profile.component("embedding_kernel<8>") == "embedding+gather"
