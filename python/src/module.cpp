// The `_jetengine` extension module: engine options, sampling parameters, chat messages, the model
// summary and the engine itself. The pure-Python package `jetengine` builds the original
// JetEngine's API on top of it; jet::Error becomes ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "engine_handle.h"
#include "jet/data_parallel.h"

namespace py = pybind11;
using jet::python::EngineHandle;

namespace {

void bind_options(py::module_& m) {
  py::class_<jet::EngineOptions>(m, "EngineOptions", "jet::EngineOptions (include/jet/engine.h)")
      .def(py::init<>())
      .def_readwrite("model", &jet::EngineOptions::model)
      .def_readwrite("device", &jet::EngineOptions::device)
      .def_readwrite("mask_token_id", &jet::EngineOptions::mask_token_id)
      .def_readwrite("block_length", &jet::EngineOptions::block_length)
      .def_readwrite("max_num_seqs", &jet::EngineOptions::max_num_seqs)
      .def_readwrite("max_model_len", &jet::EngineOptions::max_model_len)
      .def_readwrite("kvcache_page_size", &jet::EngineOptions::kvcache_page_size)
      .def_readwrite("max_num_batched_tokens", &jet::EngineOptions::max_num_batched_tokens)
      .def_readwrite("num_kvcache_pages", &jet::EngineOptions::num_kvcache_pages)
      .def_readwrite("kv_cache_memory_bytes", &jet::EngineOptions::kv_cache_memory_bytes)
      .def_readwrite("enable_prefix_caching", &jet::EngineOptions::enable_prefix_caching)
      .def_readwrite("num_threads", &jet::EngineOptions::num_threads)
      .def_readwrite("tensor_parallel_size", &jet::EngineOptions::tensor_parallel_size)
      .def_readwrite("enable_expert_parallel", &jet::EngineOptions::enable_expert_parallel)
      .def_readwrite("profile_ops", &jet::EngineOptions::profile_ops)
      .def_readwrite("enforce_eager", &jet::EngineOptions::enforce_eager)
      .def_readwrite("quantization", &jet::EngineOptions::quantization)
      .def_readwrite("gpu_memory_utilization", &jet::EngineOptions::gpu_memory_utilization)
      .def_readwrite("load_format", &jet::EngineOptions::load_format);

  m.def("remasking_strategies", &jet::remasking_strategies, "The names remasking_strategy accepts");
  m.def("data_parallel_share", &jet::data_parallel_share, py::arg("costs"), py::arg("world_size"), py::arg("rank"),
        "The prompt indices one data-parallel rank decodes (include/jet/data_parallel.h)");

  py::class_<jet::SamplingParams>(m, "SamplingParams", "jet::SamplingParams (include/jet/engine.h)")
      .def(py::init<>())
      .def_readwrite("temperature", &jet::SamplingParams::temperature)
      .def_readwrite("top_k", &jet::SamplingParams::top_k)
      .def_readwrite("top_p", &jet::SamplingParams::top_p)
      .def_readwrite("repetition_penalty", &jet::SamplingParams::repetition_penalty)
      .def_readwrite("max_tokens", &jet::SamplingParams::max_tokens)
      .def_readwrite("ignore_eos", &jet::SamplingParams::ignore_eos)
      .def_readwrite("stop_token_ids", &jet::SamplingParams::stop_token_ids)
      .def_readwrite("stop", &jet::SamplingParams::stop)
      .def_readwrite("block_length", &jet::SamplingParams::block_length)
      .def_readwrite("denoising_steps", &jet::SamplingParams::denoising_steps)
      .def_readwrite("sub_block_length", &jet::SamplingParams::sub_block_length)
      .def_readwrite("editing_threshold", &jet::SamplingParams::editing_threshold)
      .def_readwrite("max_post_steps", &jet::SamplingParams::max_post_steps)
      .def_readwrite("remasking_strategy", &jet::SamplingParams::remasking_strategy)
      .def_readwrite("dynamic_threshold", &jet::SamplingParams::dynamic_threshold)
      .def_readwrite("dynamic_factor", &jet::SamplingParams::dynamic_factor)
      .def_readwrite("eb_threshold", &jet::SamplingParams::eb_threshold)
      .def_readwrite("diversity_enforce_barrier", &jet::SamplingParams::diversity_enforce_barrier)
      .def_readwrite("epsilon_greedy", &jet::SamplingParams::epsilon_greedy)
      .def_readwrite("seed", &jet::SamplingParams::seed);

  py::class_<jet::ChatMessage>(m, "ChatMessage")
      // reasoning_content None is absent; "" is present and empty (include/jet/chat.h).
      .def(py::init([](std::string role, std::string content, std::optional<std::string> reasoning_content) {
             return jet::ChatMessage{std::move(role), std::move(content), std::move(reasoning_content)};
           }),
           py::arg("role"), py::arg("content"), py::arg("reasoning_content") = py::none());

  py::class_<jet::ModelSummary>(m, "ModelSummary", "What the loaded model is")
      .def_readonly("model_type", &jet::ModelSummary::model_type)
      .def_readonly("num_layers", &jet::ModelSummary::num_layers)
      .def_readonly("hidden", &jet::ModelSummary::hidden)
      .def_readonly("heads", &jet::ModelSummary::heads)
      .def_readonly("kv_heads", &jet::ModelSummary::kv_heads)
      .def_readonly("head_dim", &jet::ModelSummary::head_dim)
      .def_readonly("vocab", &jet::ModelSummary::vocab)
      .def_readonly("block_length", &jet::ModelSummary::block_length)
      .def_readonly("mask_token_id", &jet::ModelSummary::mask_token_id)
      .def_readonly("eos_token_ids", &jet::ModelSummary::eos_token_ids)
      .def_readonly("kv_pages", &jet::ModelSummary::kv_pages)
      .def_readonly("kv_page_size", &jet::ModelSummary::kv_page_size)
      .def_readonly("device", &jet::ModelSummary::device)
      .def_readonly("tensor_parallel_size", &jet::ModelSummary::tensor_parallel_size);
}

void bind_engine(py::module_& m) {
  using release_gil = py::call_guard<py::gil_scoped_release>;
  py::class_<EngineHandle>(m, "Engine", "jet::Engine; see jetengine.LLM for the documented Python API")
      .def(py::init<const jet::EngineOptions&>(), py::arg("options"), release_gil())
      .def("generate", &EngineHandle::generate, py::arg("prompts"), py::arg("params"), py::arg("progress") = py::none())
      .def("generate_streaming", &EngineHandle::generate_streaming, py::arg("prompts"), py::arg("params"),
           py::arg("max_active"), py::arg("progress") = py::none())
      .def("update_weights", &EngineHandle::update_weights, py::arg("weights"))
      .def("load_weights", &EngineHandle::load_weights, py::arg("weights"))
      .def("offload_parameters", &EngineHandle::offload_parameters, release_gil())
      .def("free_all_resources", &EngineHandle::free_all_resources, release_gil())
      .def("reload_from_path", &EngineHandle::reload_from_path, py::arg("dir"), release_gil())
      .def("sleep", &EngineHandle::sleep, py::arg("level"), release_gil())
      .def("wake_up", &EngineHandle::wake_up, py::arg("weights"), py::arg("kv_cache"), release_gil())
      .def("is_sleeping", &EngineHandle::is_sleeping, release_gil())
      .def("has_weights", &EngineHandle::has_weights, release_gil())
      .def("encode", &EngineHandle::encode, py::arg("text"), py::arg("add_special_tokens"), release_gil())
      .def("decode", &EngineHandle::decode, py::arg("ids"), py::arg("skip_special_tokens"), release_gil())
      .def("token_to_id", &EngineHandle::token_to_id, py::arg("token"), release_gil())
      .def("id_to_token", &EngineHandle::id_to_token, py::arg("id"), release_gil())
      .def("vocab_size", &EngineHandle::vocab_size, release_gil())
      .def("model_vocab_size", &EngineHandle::model_vocab_size, release_gil())
      .def("eos_id", &EngineHandle::eos_id, release_gil())
      .def("bos_id", &EngineHandle::bos_id, release_gil())
      .def("pad_id", &EngineHandle::pad_id, release_gil())
      .def("apply_chat_template", &EngineHandle::apply_chat_template, py::arg("messages"),
           py::arg("add_generation_prompt"), py::arg("enable_thinking"), py::arg("extra_variables_json"), release_gil())
      .def("summary", &EngineHandle::summary, release_gil())
      .def("counters", &EngineHandle::counters, release_gil());
}

}  // namespace

PYBIND11_MODULE(_jetengine, m) {
  m.doc() = "JetEngine's C++ engine (include/jet/engine.h); use the `jetengine` package";
  // Every jet::Error is a bad argument, file, tensor or request, named in its message.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const jet::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  bind_options(m);
  bind_engine(m);
}
