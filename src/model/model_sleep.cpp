// Model::sleep_weights / wake_weights: the weights move to host memory and back, bit for bit, so
// that an engine can hand the device to a trainer between rollouts without reloading them. The
// weight tensors and checkpoint slots keep their layout; on wake every pointer into the old
// backend buffers is moved to the same offset of the new ones.
#include <algorithm>
#include <utility>
#include <vector>

#include "model/model.h"

namespace jet {

namespace {

// Where each old backend buffer's bytes went: [old, old + bytes) -> fresh.
class Relocation {
 public:
  void add(const void* old_base, size_t bytes, void* fresh) {
    if (old_base) moves_.push_back({static_cast<const char*>(old_base), bytes, static_cast<char*>(fresh)});
  }

  void sort() {
    std::sort(moves_.begin(), moves_.end(), [](const Move& a, const Move& b) { return a.old < b.old; });
  }

  template <typename T>
  void apply(T*& p) const {
    if (!p) return;
    const char* c = reinterpret_cast<const char*>(p);
    auto it = std::upper_bound(moves_.begin(), moves_.end(), c, [](const char* x, const Move& m) { return x < m.old; });
    JET_ASSERT(it != moves_.begin(), "a weight pointer lies outside every weight buffer");
    --it;
    JET_ASSERT(c <= it->old + it->bytes, "a weight pointer lies outside every weight buffer");
    p = reinterpret_cast<T*>(it->fresh + (c - it->old));
  }

  void apply(Tensor& t) const { apply(t.data); }
  void apply(Linear& w) const {
    apply(w.weight);
    apply(w.scale);
  }

 private:
  struct Move {
    const char* old;
    size_t bytes;
    char* fresh;
  };
  std::vector<Move> moves_;
};

}  // namespace

void Model::sleep_weights() {
  if (!has_weights()) return;  // freed, or asleep already
  HostWeights host;
  for (const Buffer& b : weights_.storage) {
    Buffer copy = backend_.alloc_host(b.bytes());
    backend_.download(copy.data(), b.data(), b.bytes());
    host.old_bases.push_back(b.data());
    host.copies.push_back(std::move(copy));
  }
  weights_.storage.clear();  // frees the backend memory; has_weights() is false until wake
  scratch_.clear();          // activations regrow on the next forward
  asleep_ = std::move(host);
}

void Model::wake_weights() {
  if (!asleep_) return;
  std::vector<Buffer> storage;
  Relocation moved;
  for (size_t k = 0; k < asleep_->copies.size(); ++k) {
    const Buffer& copy = asleep_->copies[k];
    storage.push_back(backend_.alloc(copy.bytes()));  // throws, still asleep, when the device is full
    backend_.upload(storage.back().data(), copy.data(), copy.bytes());
    moved.add(asleep_->old_bases[k], copy.bytes(), storage.back().data());
  }
  moved.sort();
  moved.apply(weights_.embed);
  moved.apply(weights_.final_norm);
  moved.apply(weights_.lm_head);
  for (LayerWeights& l : weights_.layers) {
    for (Tensor* t : {&l.attn_norm, &l.q_norm, &l.k_norm, &l.mlp_norm, &l.moe.router}) moved.apply(*t);
    for (Linear* w : {&l.qkv, &l.o, &l.gate_up, &l.down, &l.moe.gate_up, &l.moe.down}) moved.apply(*w);
  }
  for (auto& [name, slot] : slots_) {
    moved.apply(slot.data);
    moved.apply(slot.scale);
  }
  weights_.storage = std::move(storage);
  asleep_.reset();
}

size_t Model::asleep_bytes() const {
  size_t bytes = 0;
  if (asleep_) {
    for (const Buffer& b : asleep_->copies) bytes += b.bytes();
  }
  return bytes;
}

}  // namespace jet
