// Scheduler: FIFO admission within slots and pages, pages grown block by block, preemption of
// the newest when the cache is full (docs/decoding.md §7), prefix sharing, finish / cancel.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "scheduler_test_util.h"

using namespace jet;
using namespace jet::test;

TEST(Scheduler, AdmitsInOrderWhileSlotsLast) {
  Scheduler s(limits(4, 2), 100, 4);
  Sequence a = sequence_of(8), b = sequence_of(5), c = sequence_of(3);
  s.add(&a);
  s.add(&b);
  s.add(&c);
  const std::vector<Sequence*> admitted = s.schedule();
  ASSERT_EQ(admitted, (std::vector<Sequence*>{&a, &b}));
  EXPECT_EQ(s.num_waiting(), 1u);
  EXPECT_NE(a.slot, b.slot);
  // Prefill of whole blocks, then the first block: a (8 tokens) starts its block at 8, b at 4.
  EXPECT_EQ(a.block_start, 8);
  EXPECT_EQ(b.block_start, 4);
  EXPECT_EQ(a.pages.size(), 3u);  // positions [0, 12)
  EXPECT_EQ(b.pages.size(), 2u);  // [0, 8)
  EXPECT_TRUE(a.needs_prefill && b.needs_prefill);
  EXPECT_EQ(a.status, SeqStatus::Denoising);
  EXPECT_LT(a.arrival, b.arrival);
  s.finish(&a);
  EXPECT_EQ(a.slot, -1);
  EXPECT_EQ(s.schedule(), std::vector<Sequence*>{&c});  // the freed slot goes to c
}

TEST(Scheduler, PureDiffusionPromptsNeedNoPrefill) {
  Scheduler s(limits(16, 1), 10, 4);
  Sequence a = sequence_of(5);  // shorter than the block: the prompt lies inside it
  s.add(&a);
  s.schedule();
  EXPECT_FALSE(a.needs_prefill);
  EXPECT_EQ(a.block_start, 0);
  EXPECT_EQ(a.pages.size(), 4u);
}

TEST(Scheduler, GrowsPagesForTheNextBlock) {
  Scheduler s(limits(4, 1), 10, 4);
  Sequence a = sequence_of(4);
  s.add(&a);
  s.schedule();
  ASSERT_EQ(a.pages.size(), 2u);
  a.block_start += 4;  // the block committed
  s.schedule();
  EXPECT_EQ(a.pages.size(), 3u);
}

TEST(Scheduler, PreemptsTheNewestWhenTheCacheIsFull) {
  Scheduler s(limits(4, 4), 4, 4);
  Sequence old = sequence_of(4), young = sequence_of(1);
  s.add(&old);
  s.add(&young);
  ASSERT_EQ(s.schedule().size(), 2u);  // old: 2 pages, young: 1 page, 1 page free
  old.block_start += 4;                // old needs a third page: the free one
  young.block_start += 4;              // young needs a second, none is left
  // young is preempted (its page freed), restarts from its prompt and, fitting again, is
  // admitted anew in the same call.
  EXPECT_EQ(s.schedule(), std::vector<Sequence*>{&young});
  EXPECT_EQ(s.take_preempted(), std::vector<Sequence*>{&young});
  EXPECT_EQ(s.running(), (std::vector<Sequence*>{&old, &young}));
  EXPECT_EQ(young.block_start, 0);
  EXPECT_EQ(young.pages.size(), 1u);
  EXPECT_EQ(old.pages.size(), 3u);
  EXPECT_TRUE(s.take_preempted().empty());
  // When even the restarted sequence cannot fit, it waits.
  old.block_start += 4;  // a fourth page for old: young must give its one up
  EXPECT_TRUE(s.schedule().empty());
  EXPECT_EQ(s.running(), std::vector<Sequence*>{&old});
  EXPECT_EQ(young.status, SeqStatus::Waiting);
  EXPECT_TRUE(young.pages.empty());
  EXPECT_EQ(s.num_waiting(), 1u);
}

TEST(Scheduler, WaitsWhenPagesRunOutAtAdmission) {
  Scheduler s(limits(4, 4), 3, 4);
  Sequence a = sequence_of(8), b = sequence_of(8);  // 3 pages each
  s.add(&a);
  s.add(&b);
  EXPECT_EQ(s.schedule(), std::vector<Sequence*>{&a});
  EXPECT_EQ(s.num_waiting(), 1u);
  EXPECT_TRUE(b.pages.empty());
}

TEST(Scheduler, SharesPublishedPromptPagesWithPrefixCaching) {
  Scheduler s(limits(4, 4, true), 20, 4);
  Sequence a = sequence_of(9), b = sequence_of(9);  // the same 9-token prompt
  s.add(&a);
  s.schedule();
  s.publish_prompt(a);
  s.add(&b);
  s.schedule();
  EXPECT_EQ(b.num_cached, 8);  // two full pages, ending on a block boundary
  EXPECT_FALSE(b.needs_prefill);
  EXPECT_EQ(std::vector<int32_t>(b.pages.begin(), b.pages.begin() + 2),
            std::vector<int32_t>(a.pages.begin(), a.pages.begin() + 2));
  s.forget_cached_prefixes();
  Sequence c = sequence_of(9);
  s.add(&c);
  s.schedule();
  EXPECT_EQ(c.num_cached, 0);
}

TEST(Scheduler, CancelAndAbortDropSequencesWherever) {
  Scheduler s(limits(4, 1), 10, 4);
  Sequence a = sequence_of(4), b = sequence_of(4);
  s.add(&a);
  s.add(&b);
  s.schedule();
  s.cancel(&b);  // waiting
  EXPECT_EQ(s.num_waiting(), 0u);
  s.cancel(&a);  // running
  EXPECT_TRUE(s.idle());
  Sequence c = sequence_of(4), d = sequence_of(4);
  s.add(&c);
  s.add(&d);
  s.schedule();
  s.abort_all();
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(c.slot, -1);
}
