// The sampling flags of the verbs that decode from the command line (generate, chat): their help
// text, their names for ArgParser, and the SamplingParams they give.
#pragma once

#include <set>
#include <string>

#include "arg_parser.h"
#include "jet/engine.h"

namespace jet::cli {

// The "Sampling" section of a verb's --help.
extern const char* const kSamplingFlagsHelp;

// The sampling flags that take a value, and those that do not, added to a verb's own.
std::set<std::string> with_sampling_value_flags(std::set<std::string> flags);
std::set<std::string> with_sampling_bool_flags(std::set<std::string> flags);

// The flags' SamplingParams; denoising_steps is default_denoising_steps unless given. Checked
// against the engine here, so that a bad flag stops the verb before it reads any input (chat
// would otherwise only find out at its first message).
SamplingParams read_sampling(const ArgParser& args, const Engine& engine);

// SamplingParams' default of 4 denoising steps, capped at the engine's block length (S <= B), or
// at the sub-block length when that is set.
int default_denoising_steps(const Engine& engine, int sub_block_length = 0);

}  // namespace jet::cli
