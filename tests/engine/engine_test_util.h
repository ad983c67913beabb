// Helpers the engine tests share: a tiny random model in a folder of the calling process's own
// (ctest runs every test as a separate process, several at once, so a fixed folder name let one
// test rewrite the checkpoint another was reading), CPU engine options, greedy sampling params,
// a greedy decode of two fixed prompts, a checkpoint as weight views and an error-message check.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jet/engine.h"
#include "model/checkpoint.h"

namespace jet::test {

// Runs make_tiny_model.py with `args` (e.g. "--arch sdar --seed 1") into a new folder under the
// system's temporary directory and returns its path; the folder is removed when the process exits.
// Fails the current test (and returns the path anyway) when the script fails.
std::string tiny_model_folder(const std::string& args);

// EngineOptions for `dir` on the CPU backend, everything else default.
EngineOptions cpu_options(const std::string& dir);

// Greedy sampling of exactly max_tokens tokens (EOS ignored).
SamplingParams greedy(int max_tokens);

// Greedy decodes of the prompts {5..10} and {11, 12, 13}, max_tokens each (EOS ignored).
std::vector<GenerationOutput> greedy_decode(Engine& engine, int max_tokens);

// Every tensor of a bf16 checkpoint as weight views (the checkpoint must outlive them).
std::vector<WeightView> checkpoint_views(const Checkpoint& ckpt);

// Calls f, expecting a jet::Error whose message contains `part`.
void expect_error(const std::function<void()>& f, const std::string& part);

}  // namespace jet::test
