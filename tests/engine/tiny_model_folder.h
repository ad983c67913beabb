// A tiny random model for the engine tests, written by tools/make_tiny_model.py into a folder of
// the calling process's own: ctest runs every test as a separate process, several at once, so a
// fixed folder name let one test rewrite the checkpoint another was reading.
#pragma once

#include <string>

namespace jet::test {

// Runs make_tiny_model.py with `args` (e.g. "--arch sdar --seed 1") into a new folder under the
// system's temporary directory and returns its path; the folder is removed when the process exits.
// Fails the current test (and returns the path anyway) when the script fails.
std::string tiny_model_folder(const std::string& args);

}  // namespace jet::test
