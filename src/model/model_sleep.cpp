// Model::sleep_weights / wake_weights: the weights move to host memory and back, bit for bit, so
// that an engine can hand the device to a trainer between rollouts without reloading them. The
// weight buffers are copied back to back into one host buffer, which stays for the next sleep
// (pinning host memory costs far more than the copy), and wake in one device buffer of the same
// layout: one allocation and one copy at the link's rate. The weight tensors and checkpoint slots
// keep their layout; on wake every pointer into an old buffer moves to its offset in the new one.
#include <algorithm>
#include <utility>
#include <vector>

#include "model/model.h"

namespace jet {

namespace {

// Offsets in the packed buffers keep every weight as aligned as its own allocation was.
constexpr size_t kPackAlignment = 256;

size_t packed(size_t bytes) { return (bytes + kPackAlignment - 1) / kPackAlignment * kPackAlignment; }

// Where each old backend buffer's bytes went: [old, old + bytes) -> fresh.
class Relocation {
 public:
  void add(const void* old_base, size_t bytes, char* fresh) {
    if (old_base) moves_.push_back({static_cast<const char*>(old_base), bytes, fresh});
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
  size_t total = 0;
  for (const Buffer& b : weights_.storage) total += packed(b.bytes());
  if (host_copy_.bytes() < total) {
    host_copy_ = Buffer();  // the old one first: host memory may be tight too
    host_copy_ = backend_.alloc_host(total);
  }
  size_t offset = 0;
  for (const Buffer& b : weights_.storage) {
    backend_.download(static_cast<char*>(host_copy_.data()) + offset, b.data(), b.bytes());
    host.parts.push_back({b.data(), b.bytes(), offset});
    offset += packed(b.bytes());
  }
  host.bytes = total;
  weights_.storage.clear();  // frees the backend memory; has_weights() is false until wake
  scratch_.clear();          // activations regrow on the next forward
  asleep_ = std::move(host);
}

void Model::wake_weights() {
  if (!asleep_) return;
  Buffer arena = backend_.alloc(asleep_->bytes);  // throws, still asleep, when the device is full
  backend_.upload(arena.data(), host_copy_.data(), asleep_->bytes);
  Relocation moved;
  for (const HostWeights::Part& part : asleep_->parts) {
    moved.add(part.old_base, part.bytes, static_cast<char*>(arena.data()) + part.offset);
  }
  moved.sort();
  moved.apply(weights_.embed);
  moved.apply(weights_.final_norm);
  moved.apply(weights_.lm_head);
  for (LayerWeights& l : weights_.layers) {
    for (Tensor* t :
         {&l.attn_norm, &l.qkv_bias, &l.q_norm, &l.k_norm, &l.mlp_norm, &l.moe.router, &l.moe.routing.bias}) {
      moved.apply(*t);
    }
    for (Linear* w :
         {&l.qkv, &l.o, &l.gate_up, &l.down, &l.moe.gate_up, &l.moe.down, &l.moe.shared_gate_up, &l.moe.shared_down}) {
      moved.apply(*w);
    }
  }
  for (auto& [name, slot] : slots_) {
    moved.apply(slot.data);
    moved.apply(slot.scale);
  }
  weights_.storage.clear();
  weights_.storage.push_back(std::move(arena));
  asleep_.reset();
}

size_t Model::asleep_bytes() const { return asleep_ ? asleep_->bytes : 0; }

}  // namespace jet
