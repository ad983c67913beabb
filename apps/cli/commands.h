// The CLI verbs. Each takes the arguments after the verb and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace jet::cli {

using Args = std::vector<std::string>;

int cmd_tokenize(const Args& args);    // cmd_tokenize.cpp
int cmd_detokenize(const Args& args);  // cmd_tokenize.cpp
int cmd_inspect(const Args& args);     // cmd_inspect.cpp
int cmd_generate(const Args& args);    // cmd_generate.cpp
int cmd_chat(const Args& args);        // cmd_chat.cpp
int cmd_bench(const Args& args);       // cmd_bench.cpp
int cmd_serve(const Args& args);       // cmd_serve.cpp (when built with the server, JET_SERVER)

}  // namespace jet::cli
