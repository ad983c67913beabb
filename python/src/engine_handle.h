// EngineHandle: the jet::Engine behind the Python module. It releases the GIL while the engine
// works, serialises calls from several Python threads, turns Ctrl-C into KeyboardInterrupt and
// outputs into the original JetEngine's dicts.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "host_weights.h"
#include "jet/engine.h"

namespace jet::python {

namespace py = pybind11;

class EngineHandle {
 public:
  // Loads the model (GIL released: this can take a while).
  explicit EngineHandle(const EngineOptions& options);

  // Both return one dict per prompt, in submission order. `progress` (None or a callable taking
  // done, total, completion_tokens) is called with the GIL held whenever prompts finish; before
  // each call pending signal handlers run, so Ctrl-C raises KeyboardInterrupt and the engine
  // drops the unfinished prompts.
  py::list generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                    const py::object& progress);
  py::list generate_streaming(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                              int max_active, const py::object& progress);

  void update_weights(const NamedTensors& weights);
  void load_weights(const NamedTensors& weights);
  void offload_parameters();
  void free_all_resources();
  void reload_from_path(const std::string& dir);
  void sleep(int level);
  void wake_up(bool weights, bool kv_cache);
  bool is_sleeping();
  bool has_weights();

  // Tokenizer access; callable (GIL released) while another thread generates.
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  int32_t token_to_id(const std::string& token) const;
  std::string id_to_token(int32_t id) const;
  size_t vocab_size() const;
  size_t model_vocab_size() const;
  int32_t eos_id() const;
  int32_t bos_id() const;
  int32_t pad_id() const;
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  std::optional<bool> enable_thinking, const std::string& extra_variables_json) const;
  ModelSummary summary() const;
  // (model forwards, seconds the device sat idle between forwards) since construction.
  std::pair<int64_t, double> counters();

 private:
  std::unique_ptr<Engine> engine_;
  // One generation or weight operation at a time: the engine is not re-entrant.
  std::mutex run_mutex_;
  // Shared by tokenizer and template calls; exclusive while reload_from_path replaces the
  // tokenizer. Taken after run_mutex_ where both are needed. Every lock is taken with the GIL
  // released, so a waiting thread never blocks one that needs the GIL to finish.
  mutable std::shared_mutex tokenizer_mutex_;
};

}  // namespace jet::python
