// KV-cache page accounting with blocks that do not line up with pages: blocks that start inside a
// page and end in the next, blocks of several pages, prefix reuse up to a block boundary, and
// preemption under KV pressure (BlockManager and Scheduler, no model).
#include <gtest/gtest.h>

#include <vector>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "scheduler_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

// What the engine does once a block is committed and the sequence goes on: the next block.
void next_block(Sequence& seq, int block_length) { seq.block_start += block_length; }

}  // namespace

TEST(KvPages, BlockStartingInsideAPageTakesThePagesItReaches) {
  const int B = 96, page = 256;
  Scheduler sched(limits(B), 16, page);
  Sequence seq = sequence_of(200);  // prefill [0, 192), first block [192, 288): pages 0 and 1
  sched.add(&seq);
  ASSERT_EQ(sched.schedule().size(), 1u);
  EXPECT_EQ(seq.block_start, 192);
  EXPECT_TRUE(seq.needs_prefill);
  EXPECT_EQ(seq.pages.size(), 2u);
  // Blocks [288, 384) and [384, 480) stay in page 1; [480, 576) reaches page 2.
  for (int expected : {2, 2, 3}) {
    next_block(seq, B);
    sched.schedule();
    EXPECT_EQ(static_cast<int>(seq.pages.size()), expected) << "block at " << seq.block_start;
  }
}

TEST(KvPages, BlockLongerThanAPageSpansSeveralPages) {
  const int B = 1024, page = 256;
  Scheduler sched(limits(B), 16, page);
  Sequence seq = sequence_of(100);  // pure diffusion: no prefill, the prompt inside block [0, 1024)
  sched.add(&seq);
  ASSERT_EQ(sched.schedule().size(), 1u);
  EXPECT_EQ(seq.block_start, 0);
  EXPECT_FALSE(seq.needs_prefill);
  EXPECT_EQ(seq.pages.size(), 4u);
  next_block(seq, B);
  sched.schedule();
  EXPECT_EQ(seq.pages.size(), 8u);
  EXPECT_EQ(sched.pages_for(2048), 8);

  Sequence hybrid = sequence_of(1030);  // prefill [0, 1024), first block [1024, 2048)
  sched.add(&hybrid);
  ASSERT_EQ(sched.schedule().size(), 1u);
  EXPECT_EQ(hybrid.block_start, 1024);
  EXPECT_TRUE(hybrid.needs_prefill);
  EXPECT_EQ(hybrid.pages.size(), 8u);
}

TEST(KvPages, PressurePreemptsTheNewestAndFreesItsPages) {
  // Blocks of 300 in pages of 256: each first block (prompt 50, no prefill) needs 2 pages, the
  // second block [300, 600) 3. Four pages hold two first blocks, not a first and a second block.
  const int B = 300, page = 256;
  Sequence older = sequence_of(50), newer = sequence_of(50);
  Scheduler tight(limits(B), 4, page);
  tight.add(&older);
  tight.add(&newer);
  ASSERT_EQ(tight.schedule().size(), 2u);
  EXPECT_EQ(older.pages.size(), 2u);
  EXPECT_EQ(newer.pages.size(), 2u);

  next_block(older, B);
  EXPECT_TRUE(tight.schedule().empty());  // the preempted one cannot come back: no page left
  EXPECT_EQ(older.pages.size(), 3u);
  const std::vector<Sequence*> preempted = tight.take_preempted();
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], &newer);
  EXPECT_TRUE(newer.pages.empty());
  EXPECT_EQ(newer.status, SeqStatus::Waiting);
  EXPECT_EQ(newer.block_start, 0);
  ASSERT_EQ(tight.running().size(), 1u);
  EXPECT_EQ(tight.num_waiting(), 1u);

  // Once the older one finishes, its pages take the newer one back in.
  tight.finish(&older);
  ASSERT_EQ(tight.schedule().size(), 1u);
  EXPECT_EQ(newer.pages.size(), 2u);
}

TEST(KvPages, CachedPrefixEndsOnABlockBoundary) {
  // Pages of 6 under blocks of 8: only a prefix of 24 tokens (4 pages, 3 blocks) ends on both.
  const int page = 6, B = 8;
  BlockManager pages(16, page);
  const std::vector<int32_t> prompt = iota_tokens(40);
  std::vector<int32_t> held;
  ASSERT_TRUE(pages.allocate(6, held));
  pages.publish_prefix(prompt, 32, held);  // pages 0..4 lie below 32 tokens
  for (const auto& [cacheable, expected] : std::vector<std::pair<int, size_t>>{{32, 4}, {24, 4}, {23, 0}, {16, 0}}) {
    std::vector<int32_t> reused = pages.acquire_cached_prefix(prompt, cacheable, B);
    EXPECT_EQ(reused.size(), expected) << "cacheable " << cacheable;
    for (size_t i = 0; i < reused.size(); ++i) EXPECT_EQ(reused[i], held[i]);
    pages.release(reused);
  }
  // A boundary of one page takes every matching page.
  std::vector<int32_t> all = pages.acquire_cached_prefix(prompt, 32, page);
  EXPECT_EQ(all.size(), 5u);
  pages.release(all);
  // A prompt that leaves the shared prefix at token 20 matches pages 0..2 (18 tokens), which end
  // inside the block [16, 24): none of them is reused.
  std::vector<int32_t> other = prompt;
  other[20] = 999;
  EXPECT_TRUE(pages.acquire_cached_prefix(other, 32, B).empty());
  // Nothing taken leaves the reference counts as they were: releasing the holder frees all.
  pages.release(held);
  EXPECT_EQ(pages.num_free(), 16);
}

TEST(KvPages, SchedulerReusesPrefixPagesOnlyUpToABlockBoundary) {
  const int B = 8, page = 6;
  Scheduler sched(limits(B, 4, /*prefix_caching=*/true), 32, page);
  Sequence first = sequence_of(30);  // prefill [0, 24): pages 0..3 full, published after prefill
  sched.add(&first);
  ASSERT_EQ(sched.schedule().size(), 1u);
  EXPECT_EQ(first.num_cached, 0);
  sched.publish_prompt(first);

  Sequence same = sequence_of(30);
  Sequence diverging = sequence_of(30);
  diverging.prompt[20] = 999;  // shares pages 0..2 only, which end inside a block
  sched.add(&same);
  sched.add(&diverging);
  ASSERT_EQ(sched.schedule().size(), 2u);
  EXPECT_EQ(same.num_cached, 24);
  EXPECT_FALSE(same.needs_prefill);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(same.pages[i], first.pages[i]);
  EXPECT_EQ(diverging.num_cached, 0);
  EXPECT_TRUE(diverging.needs_prefill);
  EXPECT_EQ(diverging.pages.size(), 6u);  // [0, 32) for its first block [24, 32)
}
