// The host all-reduce of the CPU backend's tensor-parallel ranks: every rank ends with the same
// sum (fp32 and bf16, sizes that the ranks do not divide, one element, none), ranks that wait for
// a failed one give up instead of hanging, and the group works again after reset.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "backend/communicator.h"
#include "core/rank_threads.h"

namespace {

using jet::Communicator;
using jet::DType;
using jet::Tensor;

// Each of `size` ranks holds value(rank, i) at element i; after the all-reduce every rank must
// hold their sum, converted as the dtype rounds it.
void check_sum(int size, int64_t n, DType dtype) {
  auto comms = jet::make_host_communicators(size);
  std::vector<std::vector<float>> f32(size, std::vector<float>(n));
  std::vector<std::vector<uint16_t>> bf16(size, std::vector<uint16_t>(n));
  std::vector<float> expected(n, 0.0f);
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = jet::bf16_to_f32(jet::f32_to_bf16(0.25f * static_cast<float>((r + 1) * (i % 7)) - 0.5f));
      f32[r][i] = v;
      bf16[r][i] = jet::f32_to_bf16(v);
      expected[i] += v;
    }
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      void* data = dtype == DType::F32 ? static_cast<void*>(f32[r].data()) : static_cast<void*>(bf16[r].data());
      Tensor t(data, dtype, {n});
      comms[r]->all_reduce_sum(t);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float got = dtype == DType::F32 ? f32[r][i] : jet::bf16_to_f32(bf16[r][i]);
      const float want = dtype == DType::F32 ? expected[i] : jet::bf16_to_f32(jet::f32_to_bf16(expected[i]));
      ASSERT_EQ(got, want) << "rank " << r << " element " << i;
    }
  }
}

}  // namespace

TEST(HostCommunicator, EveryRankGetsTheSum) {
  for (int size : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 5, 1000}) {
      check_sum(size, n, DType::F32);
      check_sum(size, n, DType::BF16);
    }
  }
}

TEST(RankThreads, AFailedRankReleasesTheOthersAndTheGroupRunsAgain) {
  auto comms = jet::make_host_communicators(3);
  jet::RankThreads threads(
      3,
      [&] {
        for (auto& c : comms) c->abort();
      },
      [&] {
        for (auto& c : comms) c->reset();
      });
  std::vector<float> values(3 * 4, 1.0f);
  try {
    threads.run([&](int rank) {
      if (rank == 1) throw jet::Error("rank 1 fails before its collective");
      Tensor t(values.data() + rank * 4, DType::F32, {4});
      comms[rank]->all_reduce_sum(t);  // waits for rank 1, which never comes
    });
    ADD_FAILURE() << "expected rank 1's error";
  } catch (const jet::Error& e) {
    EXPECT_STREQ(e.what(), "rank 1 fails before its collective");
  }
  std::fill(values.begin(), values.end(), 1.0f);
  threads.run([&](int rank) {
    Tensor t(values.data() + rank * 4, DType::F32, {4});
    comms[rank]->all_reduce_sum(t);
  });
  for (float v : values) EXPECT_EQ(v, 3.0f);
}
