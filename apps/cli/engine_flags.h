// The engine flags that every verb building an Engine takes (generate, serve): their help text,
// their names for ArgParser, and the EngineOptions they give.
#pragma once

#include <set>
#include <string>

#include "arg_parser.h"
#include "jet/engine.h"

namespace jet::cli {

// The "Engine" section of a verb's --help.
extern const char* const kEngineFlagsHelp;

// The engine flags that take a value, and those that do not, added to a verb's own.
std::set<std::string> with_engine_value_flags(std::set<std::string> flags);
std::set<std::string> with_engine_bool_flags(std::set<std::string> flags);

EngineOptions read_engine_options(const ArgParser& args);

}  // namespace jet::cli
