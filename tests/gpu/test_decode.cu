// GPU test of CudaBackend's denoise step (sample_positions in random chunks of logits rows, then
// commit_step) against the CPU backend's (the reference): random decode states and logits
// (V = 151936 with B in {1, 4, 8, 32, 256}, and a small odd V with B up to 4096; every strategy;
// temperature 0 / 0.7 / 1.3; top-k 0/1/50, top-p 1/0.9, repetition penalty 1/1.3 with random
// seen sets; the exploration modifiers (a diversity barrier, epsilon-greedy 0.5); token editing
// from a random position with thresholds 0 / 0.02 / 0.3; random seeds, flat, peaked and exactly
// tied logits, one row per sampled position in the compact layout of StepRow::logits_row0), one
// step each from identical states on both backends, then every state
// element compared. Committed tokens and trajectory must match exactly except for rare near-ties
// of the fp32 softmax (counted, reported, at most 0.5%); logprobs / entropies to 1e-4; everything
// else bit for bit (logprobs and entropies start as NaN, so an element the GPU forgot to write
// fails). Each case is stepped a second time as tensor-parallel ranks holding the LM head by
// vocabulary would (sample_vocab_parts on uneven slices, the parts summed, combine_vocab_parts;
// place_vocab_columns and sample_positions when a slot's draw needs whole rows), against the same
// CPU reference. Then bad input, and the time of one step at batch 128, B = 4, V = 151936.
//
// A plain program (PASS / FAIL lines, non-zero exit on failure): target test_decode of
// tests/gpu/CMakeLists.txt, run by tests/gpu/run.sh. test_decode [--quick]: --quick compares the
// small vocabulary only and skips the timing (about 1 s; for compute-sanitizer).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_test_util.h"
#include "sampling/remasking.h"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"
#include "sampling/vocab_parts.h"

using namespace jet;

namespace {

constexpr int kSlots = 7;
constexpr int kLargeVocab = 151936;
constexpr int kSmallVocab = 333;
constexpr double kMaxMismatchRate = 0.005;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr Strategy kStrategies[] = {
    Strategy::Sequential,          Strategy::AntiSequential, Strategy::Random,         Strategy::Dilated,
    Strategy::LowConfidenceStatic, Strategy::MarginStatic,   Strategy::EntropyStatic,  Strategy::LowConfidenceDynamic,
    Strategy::DynamicFactor,       Strategy::DynamicPmax,    Strategy::EntropyBounded,
};

// ---- Random logits ----------------------------------------------------------------------------

// Roughly standard normal, from one hash: the sum of four 16-bit uniforms, centred and scaled.
float noise(uint64_t row_seed, int id) {
  const uint64_t h = mix64(row_seed + static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull);
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k) sum += static_cast<float>((h >> (16 * k)) & 0xFFFF) / 65536.0f;
  return (sum - 2.0f) * 1.7320508f;
}

// One position's logits in one of four shapes: flat, peaked (a few hot ids far ahead, the mask id
// highest of all: it must be ignored), quantised to halves (many exact ties), and a four-way exact
// tie at the top. `hot` are ids the seen sets also favour, so the penalty meets the leaders.
void fill_logits(float* row, int V, uint64_t row_seed, const std::vector<int32_t>& hot, int32_t mask_id) {
  const int shape = static_cast<int>(mix64(row_seed) % 4);
  for (int id = 0; id < V; ++id) {
    const float n = noise(row_seed, id);
    switch (shape) {
      case 0:
        row[id] = n;
        break;
      case 1:
        row[id] = 2.0f * n;
        break;
      case 2:
        row[id] = std::round(3.0f * n) / 2.0f;
        break;
      default:
        row[id] = 0.5f * n;
        break;
    }
  }
  if (shape == 1) {
    for (size_t k = 0; k < hot.size(); ++k) row[hot[k]] += 11.0f - static_cast<float>(k);
    row[mask_id] = 40.0f;
  } else if (shape == 3) {
    for (size_t k = 0; k < 4 && k < hot.size(); ++k) row[hot[k]] = 6.0f;
  }
}

// ---- Backend plumbing ---------------------------------------------------------------------------

Tensor upload_tensor(Backend& be, std::vector<Buffer>& owner, DType dtype, std::initializer_list<int64_t> dims,
                     const void* data) {
  Tensor t = be.alloc_tensor(owner, dtype, dims);
  be.upload(t.data, data, t.nbytes());
  return t;
}

Tensor upload_rows(Backend& be, std::vector<Buffer>& owner, const std::vector<StepRow>& rows) {
  return upload_tensor(be, owner, DType::I32, {static_cast<int64_t>(rows.size() * sizeof(StepRow) / 4)}, rows.data());
}

struct StateSnapshot {
  std::vector<int32_t> tokens, trajectory, masks_left, changes;
  std::vector<float> logprobs, entropies;
};

template <typename T>
std::vector<T> download(Backend& be, const Tensor& t) {
  std::vector<T> out(t.nbytes() / sizeof(T));
  be.download(out.data(), t.data, t.nbytes());
  return out;
}

StateSnapshot snapshot(Backend& be, const DecodeState& st) {
  return {download<int32_t>(be, st.tokens),  download<int32_t>(be, st.trajectory), download<int32_t>(be, st.masks_left),
          download<int32_t>(be, st.changes), download<float>(be, st.logprobs),     download<float>(be, st.entropies)};
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

bool close(float gpu, float cpu) {
  return std::isfinite(gpu) && std::fabs(gpu - cpu) <= 1e-4f * std::max(1.0f, std::fabs(cpu));
}

// ---- One comparison case --------------------------------------------------------------------------

struct CaseSpec {
  int vocab;
  int block_length;
  Strategy strategy;
  float temperature;
  int index;  // distinct per case: the seed of everything random in it
};

struct Tally {
  int64_t cases = 0;
  int64_t positions = 0;   // masked positions sampled by both backends
  int64_t mismatches = 0;  // of those, committed token or trajectory differs
  int64_t failures = 0;    // any other difference
};

std::string describe(const CaseSpec& c) {
  return str("V=", c.vocab, " B=", c.block_length, " ", strategy_name(c.strategy), " T=", c.temperature,
             " case=", c.index);
}

// Slot s of case c: every (top_k, top_p, penalty) combination comes round across slots and cases,
// and so do the exploration modifiers (rows start at positions below 5,000: a barrier of 2,500
// turns about half of them sequential; epsilon 0.5 about half of the rest random).
SlotParams slot_params(const CaseSpec& c, int s, std::mt19937_64& rng) {
  const int combo = (c.index * kSlots + s) % 12;
  const int exploration = (c.index + s) % 4;
  SlotParams p;
  p.temperature = c.temperature;
  p.top_k = std::array<int32_t, 3>{0, 1, 50}[combo % 3];
  p.top_p = (combo / 3) % 2 == 0 ? 1.0f : 0.9f;
  p.repetition_penalty = combo / 6 == 0 ? 1.0f : 1.3f;
  p.dynamic_threshold = std::array<float, 3>{0.9f, 0.3f, 0.02f}[rng() % 3];
  p.dynamic_factor = rng() % 2 ? 1.0f : 4.0f;
  p.eb_threshold = rng() % 2 ? 0.35f : 6.0f;
  p.strategy = c.strategy;
  p.sequential_below = exploration == 1 || exploration == 3 ? 2500 : 0;
  p.epsilon_greedy = exploration >= 2 ? 0.5f : 0.0f;
  p.mask_id = static_cast<int32_t>(rng() % c.vocab);
  p.editing_threshold = std::array<float, 3>{0.0f, 0.02f, 0.3f}[rng() % 3];
  p.seed = rng();
  return p;
}

// The positions of row r's block with logits rows: masked candidates and edit candidates (StepRow).
int64_t sampled_positions(const std::vector<int32_t>& tokens, const StepRow& r, int B, int32_t mask_id) {
  int64_t n = 0;
  for (int j = 0; j < B; ++j) n += has_logits_row(r, j, tokens[int64_t{r.slot} * B + j] == mask_id);
  return n;
}

class DecodeComparison {
 public:
  DecodeComparison(Backend& cpu, Backend& gpu) : cpu_(cpu), gpu_(gpu) {}

  void run(const CaseSpec& c, Tally& tally) {
    const int B = c.block_length, V = c.vocab;
    std::mt19937_64 rng(0x5EEDull * 1000003 + static_cast<uint64_t>(c.index));
    DecodeState cst = cpu_.alloc_decode_state(kSlots, B, V), gst = gpu_.alloc_decode_state(kSlots, B, V);
    DecodeState parts_st = gpu_.alloc_decode_state(kSlots, B, V);  // stepped through vocabulary parts
    std::vector<int32_t> hot(6);
    for (int32_t& id : hot) id = static_cast<int32_t>(rng() % V);

    // Identical slot states: params, block (about 3/4 masked; slot 0 fully), earlier steps'
    // trajectory on the unmasked positions, NaN logprobs / entropies, a seen set.
    std::vector<SlotParams> params(kSlots);
    std::vector<int32_t> tokens(int64_t{kSlots} * B);
    for (int s = 0; s < kSlots; ++s) {
      params[s] = slot_params(c, s, rng);
      std::vector<int32_t> block(B), traj(B, 0);
      for (int j = 0; j < B; ++j) {
        const bool masked = s == 0 || rng() % 4 != 0;
        block[j] = masked ? params[s].mask_id : static_cast<int32_t>((params[s].mask_id + 1 + rng() % (V - 1)) % V);
        if (!masked) traj[j] = static_cast<int32_t>(rng() % 50);
      }
      std::copy(block.begin(), block.end(), tokens.begin() + s * B);
      std::vector<int32_t> seen(rng() % std::min(300, V / 3));
      for (int32_t& id : seen) id = rng() % 3 == 0 ? hot[rng() % hot.size()] : static_cast<int32_t>(rng() % V);
      const std::vector<float> nans(B, kNaN);
      for (auto [be, state] : {std::pair{&cpu_, &cst}, std::pair{&gpu_, &gst}, std::pair{&gpu_, &parts_st}}) {
        DecodeState& st = *state;
        be->set_slot_params(st, s, params[s]);
        be->start_block(st, s, block, params[s].mask_id);
        be->upload(st.trajectory.ptr<int32_t>() + s * B, traj.data(), B * sizeof(int32_t));
        be->upload(st.logprobs.ptr<float>() + s * B, nans.data(), B * sizeof(float));
        be->upload(st.entropies.ptr<float>() + s * B, nans.data(), B * sizeof(float));
        be->clear_seen(st, s);
        be->mark_seen(st, s, seen);
      }
    }

    // A random subset of the slots steps, in random order, each with its own schedule.
    std::vector<int> order(kSlots);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const int num_rows = std::max(1, std::min(kSlots - 1, 96 / B));
    // Logits rows for the sampled positions only, each row's after the previous row's.
    std::vector<StepRow> rows;
    int64_t num_logits = 0;
    for (int i = 0; i < num_rows; ++i) {
      StepRow r;
      r.slot = order[i];
      r.position0 = static_cast<int32_t>(rng() % 5000);
      r.global_step = static_cast<int32_t>(rng() % 300);
      r.n_sched = static_cast<int32_t>(rng() % (B + 1));
      r.is_last = rng() % 7 == 0;
      r.logits_row0 = static_cast<int32_t>(num_logits);
      // Some rows have a window of candidates: a head step's position 0, or a sub-block.
      if (rng() % 5 == 0) {
        r.candidates_begin = rng() % 2 ? 0 : static_cast<int32_t>(rng() % (B + 1));
        r.candidates_end = r.candidates_begin == 0 && rng() % 2
                               ? 1
                               : r.candidates_begin + static_cast<int32_t>(rng() % (B - r.candidates_begin + 1));
      }
      // Some edit the committed positions from a random one on (token editing).
      if (rng() % 3 == 0) r.edits_begin = static_cast<int32_t>(rng() % (B + 1));
      num_logits += sampled_positions(tokens, r, B, params[r.slot].mask_id);
      rows.push_back(r);
    }
    num_logits = std::max<int64_t>(num_logits, 1);  // no tensor of zero rows
    std::vector<float> logits(num_logits * V);
    for (const StepRow& r : rows) {
      const int64_t sampled = sampled_positions(tokens, r, B, params[r.slot].mask_id);
      for (int64_t row = r.logits_row0; row < r.logits_row0 + sampled; ++row) {
        fill_logits(logits.data() + row * V, V, rng(), hot, params[r.slot].mask_id);
      }
    }

    // The CPU samples every logits row in one call, the GPU a random chunk of rows at a time.
    std::vector<Buffer> owner;
    const Tensor cpu_logits = upload_tensor(cpu_, owner, DType::F32, {num_logits, V}, logits.data());
    cpu_.denoise_step(cpu_logits, upload_rows(cpu_, owner, rows), num_rows, cst);
    const Tensor gpu_logits = upload_tensor(gpu_, owner, DType::F32, {num_logits, V}, logits.data());
    const Tensor gpu_rows = upload_rows(gpu_, owner, rows);
    const int64_t chunk = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(num_logits));
    for (int64_t first = 0; first < num_logits; first += chunk) {
      gpu_.sample_positions(gpu_logits.rows(first, std::min(num_logits, first + chunk)), first, gpu_rows, num_rows,
                            gst);
    }
    gpu_.commit_step(gpu_rows, num_rows, num_logits, gst);
    const StateSnapshot reference = snapshot(cpu_, cst);
    compare(c, rows, tokens, params, reference, snapshot(gpu_, gst), tally);
    ++tally.cases;

    // The same step with the logits split by vocabulary over ranks, as tensor-parallel ranks hold
    // the LM head: uneven slices, in some cases one of slot 0's mask id alone.
    std::vector<int> bounds{0, V};
    for (int k = 0; k < 3; ++k) bounds.push_back(1 + static_cast<int>(rng() % (V - 1)));
    if (c.index % 2 == 0) bounds.insert(bounds.end(), {params[0].mask_id, params[0].mask_id + 1});
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    bool whole_rows = false;
    for (const StepRow& r : rows) whole_rows = whole_rows || needs_whole_rows(params[r.slot], V);
    for (int64_t first = 0; first < num_logits; first += chunk) {
      step_vocab_parts(logits, V, first, std::min(num_logits, first + chunk), bounds, whole_rows, gpu_rows, num_rows,
                       parts_st, owner);
    }
    gpu_.commit_step(gpu_rows, num_rows, num_logits, parts_st);
    compare(c, rows, tokens, params, reference, snapshot(gpu_, parts_st), parts_tally_);
    ++parts_tally_.cases;
    if (whole_rows) ++whole_rows_cases_;
  }

  const Tally& parts_tally() const { return parts_tally_; }
  int64_t whole_rows_cases() const { return whole_rows_cases_; }

 private:
  void compare(const CaseSpec& c, const std::vector<StepRow>& rows, const std::vector<int32_t>& tokens_before,
               const std::vector<SlotParams>& params, const StateSnapshot& cpu, const StateSnapshot& gpu,
               Tally& tally) {
    const int B = c.block_length;
    std::vector<const StepRow*> row_of(kSlots, nullptr);  // null: the slot did not step
    for (const StepRow& r : rows) row_of[r.slot] = &r;
    for (int s = 0; s < kSlots; ++s) {
      int row_mismatches = 0;
      for (int j = 0; j < B; ++j) {
        const int64_t at = int64_t{s} * B + j;
        const bool sampled = row_of[s] && has_logits_row(*row_of[s], j, tokens_before[at] == params[s].mask_id);
        const bool committed = sampled && cpu.tokens[at] != tokens_before[at];  // a commit or an edit
        bool token_match = cpu.tokens[at] == gpu.tokens[at] && cpu.trajectory[at] == gpu.trajectory[at];
        if (sampled) ++tally.positions;
        if (!token_match && sampled) {
          ++row_mismatches;
          report_mismatch(c, s, j, cpu, gpu, at);
          continue;
        }
        const bool values_match =
            committed
                ? close(gpu.logprobs[at], cpu.logprobs[at]) && close(gpu.entropies[at], cpu.entropies[at])
                : same_bits(gpu.logprobs[at], cpu.logprobs[at]) && same_bits(gpu.entropies[at], cpu.entropies[at]);
        if (!token_match || !values_match) {
          fail(tally, str(describe(c), " slot ", s, " position ", j, ": cpu token ", cpu.tokens[at], " traj ",
                          cpu.trajectory[at], " logprob ", cpu.logprobs[at], " entropy ", cpu.entropies[at],
                          " | gpu token ", gpu.tokens[at], " traj ", gpu.trajectory[at], " logprob ", gpu.logprobs[at],
                          " entropy ", gpu.entropies[at]));
        }
      }
      tally.mismatches += row_mismatches;
      // A differing commit count is only explained by differing positions of the same row.
      if ((cpu.masks_left[s] != gpu.masks_left[s] || (row_of[s] && cpu.changes[s] != gpu.changes[s])) &&
          row_mismatches == 0) {
        fail(tally, str(describe(c), " slot ", s, ": masks_left cpu ", cpu.masks_left[s], " gpu ", gpu.masks_left[s],
                        ", changes cpu ", cpu.changes[s], " gpu ", gpu.changes[s]));
      }
    }
  }

  void report_mismatch(const CaseSpec& c, int s, int j, const StateSnapshot& cpu, const StateSnapshot& gpu,
                       int64_t at) {
    if (++reported_mismatches_ > 20) return;
    std::printf(
        "  near-tie mismatch %s slot %d position %d: cpu token %d traj %d conf %.7g | gpu token %d traj %d "
        "conf %.7g\n",
        describe(c).c_str(), s, j, cpu.tokens[at], cpu.trajectory[at], std::exp(cpu.logprobs[at]), gpu.tokens[at],
        gpu.trajectory[at], std::exp(gpu.logprobs[at]));
  }

  void fail(Tally& tally, const std::string& what) {
    if (++tally.failures <= 20) std::printf("  FAIL %s\n", what.c_str());
  }

  // Logits rows [first, end) sampled as ranks holding the vocabulary slices [bounds[r],
  // bounds[r + 1]) would: each rank's parts (or, when a draw needs them, its columns of whole
  // rows), summed over the ranks as the all-reduce does, then combined (or sampled).
  void step_vocab_parts(const std::vector<float>& logits, int V, int64_t first, int64_t end,
                        const std::vector<int>& bounds, bool whole_rows, const Tensor& rows, int num_rows,
                        DecodeState& st, std::vector<Buffer>& owner) {
    const int64_t n_rows = end - first;
    const int ranks = static_cast<int>(bounds.size()) - 1;
    const int64_t width = whole_rows ? V : int64_t{ranks} * kVocabPartFloats;
    std::vector<float> sum(n_rows * width, 0.0f);
    for (int r = 0; r < ranks; ++r) {
      const int v0 = bounds[r], n = bounds[r + 1] - bounds[r];
      std::vector<float> slice(n_rows * n);
      for (int64_t i = 0; i < n_rows; ++i) {
        std::copy_n(logits.data() + (first + i) * V + v0, n, slice.data() + i * n);
      }
      const Tensor slice_t = upload_tensor(gpu_, owner, DType::F32, {n_rows, n}, slice.data());
      Tensor out = whole_rows ? gpu_.alloc_tensor(owner, DType::F32, {n_rows, V})
                              : gpu_.alloc_tensor(owner, DType::F32, {ranks, n_rows, kVocabPartFloats});
      if (whole_rows) {
        gpu_.place_vocab_columns(slice_t, v0, out);
      } else {
        gpu_.sample_vocab_parts(slice_t, v0, first, rows, num_rows, st, out, r);
      }
      const std::vector<float> got = download<float>(gpu_, out);
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += got[k];
    }
    if (whole_rows) {
      gpu_.sample_positions(upload_tensor(gpu_, owner, DType::F32, {n_rows, V}, sum.data()), first, rows, num_rows, st);
    } else {
      gpu_.combine_vocab_parts(upload_tensor(gpu_, owner, DType::F32, {ranks, n_rows, kVocabPartFloats}, sum.data()),
                               first, rows, num_rows, st);
    }
  }

  Backend& cpu_;
  Backend& gpu_;
  int reported_mismatches_ = 0;
  Tally parts_tally_;
  int64_t whole_rows_cases_ = 0;
};

bool compare_backends(Backend& cpu, Backend& gpu, int vocab) {
  DecodeComparison comparison(cpu, gpu);
  Tally tally;
  int index = vocab;  // distinct seeds per vocabulary
  const auto start = std::chrono::steady_clock::now();
  // Blocks past 256 at the large vocabulary would make the CPU reference the test's whole time.
  const std::vector<int> block_lengths =
      vocab > 1000 ? std::vector<int>{1, 4, 8, 32, 256} : std::vector<int>{1, 4, 8, 32, 64, 100, 1024, 4096};
  for (int B : block_lengths) {
    for (Strategy strategy : kStrategies) {
      for (float temperature : {0.0f, 0.7f, 1.3f}) {
        comparison.run({vocab, B, strategy, temperature, index++}, tally);
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto verdict = [&](const char* what, const Tally& t, const std::string& extra) {
    const double rate = t.positions ? static_cast<double>(t.mismatches) / t.positions : 0.0;
    const bool ok = t.failures == 0 && rate <= kMaxMismatchRate && t.positions > 0;
    std::printf(
        "%s %s vs CPU, V=%d: %lld cases, %lld sampled positions, %lld near-tie mismatches (%.4f%%, limit %.1f%%), "
        "%lld other differences%s\n",
        ok ? "PASS" : "FAIL", what, vocab, static_cast<long long>(t.cases), static_cast<long long>(t.positions),
        static_cast<long long>(t.mismatches), 100.0 * rate, 100.0 * kMaxMismatchRate,
        static_cast<long long>(t.failures), extra.c_str());
    return ok;
  };
  const bool whole = verdict("denoise_step", tally, str(" (", seconds, " s)"));
  const bool parts = verdict("denoise_step from vocabulary parts (uneven slices)", comparison.parts_tally(),
                             str(", ", comparison.whole_rows_cases(), " cases through whole rows"));
  return whole && parts;
}

// ---- Bad input ------------------------------------------------------------------------------------

bool expect_error(const std::string& what, const std::string& needle, const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    const bool ok = std::string(e.what()).find(needle) != std::string::npos;
    std::printf("%s %s: \"%s\"\n", ok ? "PASS" : "FAIL", what.c_str(), e.what());
    return ok;
  }
  std::printf("FAIL %s: no error\n", what.c_str());
  return false;
}

bool expect_no_error(const std::string& what, const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    std::printf("FAIL %s: \"%s\"\n", what.c_str(), e.what());
    return false;
  }
  return true;
}

bool test_bad_input(Backend& gpu) {
  constexpr int kB = 4, kV = 32, kMask = 31;
  std::vector<Buffer> owner;
  DecodeState st = gpu.alloc_decode_state(2, kB, kV);
  SlotParams p;
  p.temperature = 0.0f;
  p.strategy = Strategy::Sequential;
  p.mask_id = kMask;
  auto reset = [&] {
    for (int s = 0; s < 2; ++s) {
      gpu.set_slot_params(st, s, p);
      gpu.start_block(st, s, std::vector<int32_t>(kB, kMask), kMask);
      gpu.clear_seen(st, s);
    }
  };
  reset();
  const std::vector<float> zeros(2 * kB * kV, 0.0f);
  const Tensor logits = upload_tensor(gpu, owner, DType::F32, {2 * kB, kV}, zeros.data());
  const Tensor one_row = upload_rows(gpu, owner, {{0, 0, 0, 1, 0}});
  // A row fault is seen by the first denoise_step after the faulty one has finished.
  auto next_step = [&] {
    gpu.synchronize();
    gpu.denoise_step(logits, one_row, 0, st);
  };

  bool ok = true;
  const Tensor narrow = upload_tensor(gpu, owner, DType::F32, {2 * kB, kV - 1}, zeros.data());
  ok &= expect_error("logits of the wrong width are refused", "tensor logits",
                     [&] { gpu.denoise_step(narrow, one_row, 1, st); });
  ok &= expect_error("a rows tensor shorter than num_rows is refused", "StepRows",
                     [&] { gpu.denoise_step(logits, one_row, 2, st); });

  ok &= expect_no_error("a bad slot does not stop its step", [&] {
    gpu.denoise_step(logits, upload_rows(gpu, owner, {{5, 0, 0, 1, 0}}), 1, st);
  });
  ok &= expect_error("a bad slot is reported by the next step", "slot 5", next_step);
  ok &= expect_no_error("the report is cleared once thrown", next_step);

  // Slot 1's four masks need logits rows [5, 9) of the 8 given; [-1, 3) is out too.
  for (int32_t row0 : {5, -1}) {
    ok &= expect_no_error(str("logits rows from ", row0, " past the logits do not stop the step"), [&] {
      gpu.denoise_step(logits, upload_rows(gpu, owner, {{1, 0, 0, 1, 0, row0}}), 1, st);
    });
    ok &= expect_error("logits rows past the logits are reported", "logits rows outside the logits", next_step);
  }
  const bool untouched = download<int32_t>(gpu, st.masks_left)[1] == kB;
  std::printf("%s a row with logits rows past the logits commits nothing\n", untouched ? "PASS" : "FAIL");
  ok &= untouched;
  // Slot 0's logits rows [0, 4) and slot 1's from 2 overlap.
  ok &= expect_no_error("overlapping logits rows do not stop the step", [&] {
    gpu.denoise_step(logits, upload_rows(gpu, owner, {{0, 0, 0, 1, 0, 0}, {1, 0, 0, 1, 0, 2}}), 2, st);
  });
  ok &= expect_error("overlapping logits rows are reported", "logits rows outside the logits", next_step);
  reset();

  ok &= expect_no_error("a repeated slot does not stop its step", [&] {
    gpu.denoise_step(logits, upload_rows(gpu, owner, {{0, 0, 0, 1, 0}, {0, 0, 0, 1, 0}}), 2, st);
  });
  ok &= expect_error("a repeated slot is reported", "repeats slot 0", next_step);
  const std::vector<int32_t> masks_left = download<int32_t>(gpu, st.masks_left);
  const bool first_row_only = masks_left[0] == kB - 1;
  std::printf("%s a repeated slot commits its first row only (masks_left %d)\n", first_row_only ? "PASS" : "FAIL",
              masks_left[0]);
  ok &= first_row_only;

  reset();
  SlotParams bad_mask = p;
  bad_mask.mask_id = kV + 3;
  gpu.set_slot_params(st, 1, bad_mask);
  ok &= expect_no_error("a mask id outside the vocabulary does not stop its step", [&] {
    gpu.denoise_step(logits, upload_rows(gpu, owner, {{1, 0, 0, 1, 0}}), 1, st);
  });
  ok &= expect_error("a mask id outside the vocabulary is reported", "mask id", next_step);
  return ok;
}

// ---- Timing -----------------------------------------------------------------------------------------

struct TimedConfig {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float repetition_penalty;
};

// One step over batch 128, B = 4, V = 151936, every position masked. n_sched = 0 commits nothing,
// so every timed call samples all 512 positions (the ranking still runs).
void time_denoise_step(Backend& cpu, cuda::CudaBackend& gpu) {
  constexpr int kBatch = 128, kB = 4, kV = kLargeVocab, kMask = 151669;
  std::vector<float> logits(int64_t{kBatch} * kB * kV);
  const std::vector<int32_t> hot = {11, 2024, 7777, 151000, 42, 99999};
  for (int64_t row = 0; row < int64_t{kBatch} * kB; ++row) {
    fill_logits(logits.data() + row * kV, kV, mix64(static_cast<uint64_t>(row) * 4 + 1), hot, kMask);
  }
  std::vector<StepRow> rows;
  for (int s = 0; s < kBatch; ++s) rows.push_back({s, 64 + 4 * s, s % 16, 0, 0, kB * s});
  std::vector<int32_t> seen(200);
  std::iota(seen.begin(), seen.end(), 1000);

  const TimedConfig configs[] = {
      {"greedy", 0.0f, 0, 1.0f, 1.0f},        {"T=1", 1.0f, 0, 1.0f, 1.0f},
      {"T=1 top_k=1", 1.0f, 1, 1.0f, 1.0f},   {"T=1 top_k=50", 1.0f, 50, 1.0f, 1.0f},
      {"T=1 top_p=0.9", 1.0f, 0, 0.9f, 1.0f}, {"T=1 top_k=50 top_p=0.9 penalty=1.3", 1.0f, 50, 0.9f, 1.3f}};
  for (Backend* be : {static_cast<Backend*>(&gpu), &cpu}) {
    std::vector<Buffer> owner;
    DecodeState st = be->alloc_decode_state(kBatch, kB, kV);
    const Tensor l = upload_tensor(*be, owner, DType::F32, {int64_t{kBatch} * kB, kV}, logits.data());
    const Tensor r = upload_rows(*be, owner, rows);
    for (const TimedConfig& config : configs) {
      SlotParams p;
      p.temperature = config.temperature;
      p.top_k = config.top_k;
      p.top_p = config.top_p;
      p.repetition_penalty = config.repetition_penalty;
      p.strategy = Strategy::LowConfidenceStatic;
      p.mask_id = kMask;
      for (int s = 0; s < kBatch; ++s) {
        p.seed = static_cast<uint64_t>(s) + 1;
        be->set_slot_params(st, s, p);
        be->start_block(st, s, std::vector<int32_t>(kB, kMask), kMask);
        be->clear_seen(st, s);
        be->mark_seen(st, s, seen);
      }
      if (be == &cpu) {
        const auto start = std::chrono::steady_clock::now();
        be->denoise_step(l, r, kBatch, st);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        std::printf("TIME denoise_step cpu  batch=%d B=%d V=%d %-36s %9.3f ms\n", kBatch, kB, kV, config.name, ms);
        continue;
      }
      constexpr int kWarmup = 3, kRuns = 20;
      for (int k = 0; k < kWarmup; ++k) be->denoise_step(l, r, kBatch, st);
      cudaEvent_t begin, end;
      cudaEventCreate(&begin);
      cudaEventCreate(&end);
      cudaEventRecord(begin, gpu.stream());
      for (int k = 0; k < kRuns; ++k) be->denoise_step(l, r, kBatch, st);
      cudaEventRecord(end, gpu.stream());
      cudaEventSynchronize(end);
      float stream_ms = 0.0f;
      cudaEventElapsedTime(&stream_ms, begin, end);
      cudaEventDestroy(begin);
      cudaEventDestroy(end);
      // Each call followed by a synchronize, as the engine does today (reads masks_left back).
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < kRuns; ++k) {
        be->denoise_step(l, r, kBatch, st);
        be->synchronize();
      }
      const double synced_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRuns;
      std::printf("TIME denoise_step cuda batch=%d B=%d V=%d %-36s %9.3f ms back to back, %.3f ms with a sync each\n",
                  kBatch, kB, kV, config.name, stream_ms / kRuns, synced_ms);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (jet::gpu_test::skip_without_device()) return jet::gpu_test::kSkipWithoutDevice;
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  try {
    std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    cuda::CudaBackend gpu(0);
    bool ok = compare_backends(*cpu, gpu, kSmallVocab);
    if (!quick) ok &= compare_backends(*cpu, gpu, kLargeVocab);
    ok &= test_bad_input(gpu);
    if (!quick) time_denoise_step(*cpu, gpu);
    std::printf("%s test_decode\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL test_decode: %s\n", e.what());
    return 1;
  }
}
