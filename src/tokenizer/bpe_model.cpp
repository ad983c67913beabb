// BPE: loading vocab and merges, and the merge loop (linked list of symbols + min-heap of
// candidate pairs, O(n log n) per piece). Results of short pieces are cached.
#include "tokenizer/bpe_model.h"

#include <mutex>
#include <queue>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"

namespace jet::tokenizer {
namespace {

using json_fields::Json;

// Pieces up to this many bytes are cached; the cache is emptied when it reaches its capacity,
// which bounds memory while keeping the frequent pieces of the current text.
constexpr size_t kMaxCachedPieceBytes = 128;
constexpr size_t kCacheCapacity = 1 << 16;

void check_unsupported_options(const Json& spec) {
  const auto dropout = spec.find("dropout");
  JET_CHECK(dropout == spec.end() || dropout->is_null() || *dropout == 0, "model.dropout = ", dropout->dump(),
            " is not supported (BPE dropout is for training)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto value = spec.find(affix);
    JET_CHECK(value == spec.end() || value->is_null() || *value == "", "model.", affix, " = ", value->dump(),
              " is not supported by byte-level BPE");
  }
}

}  // namespace

struct BpeModel::PieceCache {
  std::mutex mutex;
  StringMap<std::vector<int32_t>> ids_of_piece;
};

BpeModel::BpeModel() : cache_(std::make_unique<PieceCache>()) { byte_ids_.fill(-1); }
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::build(const Json& spec, BpeTables&& tables, Vocabulary& vocabulary) {
  const std::string type = json_fields::component_type(spec, "model");
  JET_CHECK(type == "BPE", "model.type '", type, "' is not supported (supported: BPE)");
  check_unsupported_options(spec);
  JET_CHECK(tables.has_vocab,
            spec.contains("vocab") ? "model.vocab must be an object {token: id}" : "model.vocab is missing");
  JET_CHECK(tables.has_merges, spec.contains("merges") ? "model.merges must be an array" : "model.merges is missing");
  BpeModel model;
  model.ignore_merges_ = json_fields::optional_bool(spec, "ignore_merges", false, "model");

  model.vocab_size_ = tables.vocab.size();
  vocabulary.reserve(tables.vocab.size());
  for (auto& [token, id] : tables.vocab) {
    if (model.ignore_merges_) model.whole_piece_ids_.emplace(byte_level::decode(token).value_or(token), id);
    vocabulary.add(id, std::move(token), false, "model.vocab");
  }

  model.merges_.reserve(tables.merges.size());
  std::string merged;
  for (size_t rank = 0; rank < tables.merges.size(); ++rank) {
    const auto& [left, right] = tables.merges[rank];
    merged.assign(left).append(right);
    const int32_t left_id = vocabulary.find(left);
    const int32_t right_id = vocabulary.find(right);
    const int32_t merged_id = vocabulary.find(merged);
    JET_CHECK(left_id >= 0, "model.merges[", rank, "]: token '", left, "' is not in model.vocab");
    JET_CHECK(right_id >= 0, "model.merges[", rank, "]: token '", right, "' is not in model.vocab");
    JET_CHECK(merged_id >= 0, "model.merges[", rank, "]: the merged token '", merged, "' is not in model.vocab");
    // As in HF, a pair listed twice keeps its last rank.
    model.merges_.insert_or_assign(left_id, right_id, {static_cast<uint32_t>(rank), merged_id});
  }

  for (unsigned byte = 0; byte < 256; ++byte) {
    model.byte_ids_[byte] = vocabulary.find(byte_level::encode(std::string(1, static_cast<char>(byte))));
  }
  return model;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    auto it = cache_->ids_of_piece.find(piece);
    if (it != cache_->ids_of_piece.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  auto whole = ignore_merges_ ? whole_piece_ids_.find(piece) : whole_piece_ids_.end();
  if (whole != whole_piece_ids_.end()) {
    ids.push_back(whole->second);
  } else {
    merge(piece, ids);
  }
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->ids_of_piece.size() >= kCacheCapacity) cache_->ids_of_piece.clear();
    cache_->ids_of_piece.emplace(piece, std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& ids) const {
  // Symbols form a doubly linked list over the piece's bytes; a merged-away symbol has id -1.
  struct Symbol {
    int32_t id, prev, next;
  };
  std::vector<Symbol> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto byte = static_cast<unsigned char>(piece[i]);
    JET_CHECK(byte_ids_[byte] >= 0, "the vocabulary has no token for byte 0x", std::hex, static_cast<unsigned>(byte));
    symbols[i] = {byte_ids_[byte], static_cast<int32_t>(i) - 1,
                  i + 1 < piece.size() ? static_cast<int32_t>(i) + 1 : -1};
  }

  // A candidate stays valid while both of its symbols still hold the ids it was made from
  // (a merge always produces a new, longer token, so the ids change when a symbol changes).
  struct Candidate {
    uint32_t rank;
    int32_t position, left_id, right_id, merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto add_candidate = [&](int32_t position) {
    if (position < 0 || symbols[position].next < 0) return;
    const int32_t left_id = symbols[position].id;
    const int32_t right_id = symbols[symbols[position].next].id;
    if (const MergeTable::Merge* rule = merges_.find(left_id, right_id)) {
      queue.push({rule->rank, position, left_id, right_id, rule->merged_id});
    }
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) add_candidate(static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.merged_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.position;
    right.id = -1;
    add_candidate(left.prev);
    add_candidate(top.position);
  }
  for (int32_t i = piece.empty() ? -1 : 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace jet::tokenizer
