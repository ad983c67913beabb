// Internals of jet::ChatTemplate (include/jet/chat.h) that its tests check directly: where a model
// folder keeps its template, and the variables transformers passes to a template.
#pragma once

#include <string>
#include <vector>

#include "jet/chat.h"
#include "chat/jinja_value.h"

namespace jet {

// The template source for a tokenizer_config.json path: the sibling chat_template.jinja if there
// is one, else the config's "chat_template" (a string, or the "default" entry of a list of
// {name, template}). Throws jet::Error naming the file when there is none.
std::string read_chat_template_source(const std::string& tokenizer_config_path);
// Whether there is a template source at all (a chat_template.jinja beside the config, or a
// non-null "chat_template" in it), whether or not it compiles.
bool has_chat_template_source(const std::string& tokenizer_config_path);

// messages, tools (None), documents (None), add_generation_prompt, enable_thinking (when set),
// bos_token / eos_token (when non-empty), then options.extra_variables_json on top.
jinja::Dict chat_template_variables(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options);

// Parses a JSON object of template variables; `what` names it in error messages.
jinja::Dict variables_from_json(const std::string& json_text, const std::string& what);

}  // namespace jet
