// EngineHandle: GIL, locking, interrupts and output conversion around jet::Engine.
#include "engine_handle.h"

#include <pybind11/stl.h>

#include <utility>

namespace jet::python {

namespace {

py::dict to_dict(const GenerationOutput& out) {
  py::dict d;
  d["text"] = out.text;
  d["token_ids"] = py::cast(out.token_ids);
  d["trajectory"] = py::cast(out.trajectory);
  d["logprobs"] = py::cast(out.logprobs);
  d["entropies"] = py::cast(out.entropies);
  d["completion_ids"] = py::cast(out.completion_ids);
  d["completion_text"] = out.completion_text;
  d["finish_reason"] = out.finish_reason;
  d["num_forwards"] = out.num_forwards;
  d["prompt_len"] = out.prompt_len;
  return d;
}

py::list to_list(const std::vector<GenerationOutput>& outputs) {
  py::list list;
  for (const GenerationOutput& out : outputs) list.append(to_dict(out));
  return list;
}

// The engine reports progress on the calling thread, which holds no GIL while the engine runs.
// A Ctrl-C only sets a flag in the interpreter; running the signal handlers here turns it into a
// KeyboardInterrupt that unwinds through the engine (which drains itself) back to Python.
ProgressFn progress_with_signals(const py::object& callback) {
  return [&callback](size_t done, size_t total, size_t tokens) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!callback.is_none()) callback(done, total, tokens);
  };
}

}  // namespace

EngineHandle::EngineHandle(const EngineOptions& options) : engine_(std::make_unique<Engine>(options)) {}

py::list EngineHandle::generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                const py::object& progress) {
  std::vector<GenerationOutput> outputs;
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(run_mutex_);
    outputs = engine_->generate(prompts, params, progress_with_signals(progress));
  }
  return to_list(outputs);
}

py::list EngineHandle::generate_streaming(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                          int max_active, const py::object& progress) {
  std::vector<GenerationOutput> outputs(prompts.size());
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(run_mutex_);
    engine_->generate_streaming(
        prompts, params, max_active, [&outputs](size_t i, GenerationOutput&& out) { outputs[i] = std::move(out); },
        progress_with_signals(progress));
  }
  return to_list(outputs);
}

void EngineHandle::update_weights(const NamedTensors& weights) {
  const HostWeights host(weights);  // destroyed after `nogil`, with the GIL held again
  py::gil_scoped_release nogil;
  std::lock_guard lock(run_mutex_);
  engine_->update_weights(host.views());
}

void EngineHandle::load_weights(const NamedTensors& weights) {
  const HostWeights host(weights);
  py::gil_scoped_release nogil;
  std::lock_guard lock(run_mutex_);
  engine_->load_weights(host.views());
}

void EngineHandle::offload_parameters() {
  std::lock_guard lock(run_mutex_);
  engine_->offload_parameters();
}

void EngineHandle::free_all_resources() {
  std::lock_guard lock(run_mutex_);
  engine_->free_all_resources();
}

void EngineHandle::reload_from_path(const std::string& dir) {
  std::lock_guard run(run_mutex_);
  std::unique_lock tokenizer(tokenizer_mutex_);
  engine_->reload_from_path(dir);
}

void EngineHandle::sleep(int level) {
  std::lock_guard lock(run_mutex_);
  engine_->sleep(level);
}

void EngineHandle::wake_up(bool weights, bool kv_cache) {
  std::lock_guard lock(run_mutex_);
  engine_->wake_up(weights, kv_cache);
}

bool EngineHandle::is_sleeping() {
  std::lock_guard lock(run_mutex_);
  return engine_->is_sleeping();
}

bool EngineHandle::has_weights() {
  std::lock_guard lock(run_mutex_);
  return engine_->has_weights();
}

std::vector<int32_t> EngineHandle::encode(const std::string& text, bool add_special_tokens) const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().encode(text, add_special_tokens);
}

std::string EngineHandle::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().decode(ids, skip_special_tokens);
}

int32_t EngineHandle::token_to_id(const std::string& token) const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().token_to_id(token);
}

std::string EngineHandle::id_to_token(int32_t id) const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().id_to_token(id);
}

size_t EngineHandle::vocab_size() const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().size();
}

size_t EngineHandle::model_vocab_size() const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().model_vocab_size();
}

int32_t EngineHandle::eos_id() const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().eos_id();
}

int32_t EngineHandle::bos_id() const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().bos_id();
}

int32_t EngineHandle::pad_id() const {
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->tokenizer().pad_id();
}

std::string EngineHandle::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              std::optional<bool> enable_thinking,
                                              const std::string& extra_variables_json) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.enable_thinking = enable_thinking;
  options.extra_variables_json = extra_variables_json;
  std::shared_lock lock(tokenizer_mutex_);
  return engine_->apply_chat_template(messages, options);
}

std::pair<int64_t, double> EngineHandle::counters() {
  std::lock_guard lock(run_mutex_);
  return {engine_->num_forwards(), engine_->device_idle_seconds()};
}

ModelSummary EngineHandle::summary() const {
  std::shared_lock lock(tokenizer_mutex_);  // reload_from_path replaces the summary too
  return engine_->summary();
}

}  // namespace jet::python
