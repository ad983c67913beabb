// Chat templates: render a HuggingFace tokenizer_config.json `chat_template` (Jinja) for a list
// of messages, the way transformers' apply_chat_template does (trim_blocks and lstrip_blocks on,
// raise_exception and a json.dumps-style tojson available). A built-in interpreter of the Jinja
// subset that chat templates use does the rendering.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace jet {

struct ChatMessage {
  std::string role;
  std::string content;
  // nullopt = absent. "" is present and empty, as in transformers: Qwen3's template tests
  // `reasoning_content is defined and is not none` (later versions: `is string`), and only an
  // absent one makes it parse the reasoning out of a content holding </think>. A JSON null or
  // Python None maps to absent: under those tests none and undefined render alike.
  std::optional<std::string> reasoning_content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // absent = the template's default
  std::string bos_token, eos_token;     // empty = not defined for the template
  // A JSON object of further template variables, e.g. {"tools": [...]} or {"messages": [...]}
  // with tool calls; its keys override the ones above. Empty = none.
  std::string extra_variables_json;
};

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source);  // parses; a syntax error -> jet::Error with line and column
  // Reads "chat_template" of a tokenizer_config.json: a string, or a list of {name, template}
  // from which "default" is used. Like transformers >= 4.47, a chat_template.jinja file next to
  // the config takes precedence. jet::Error if neither exists.
  static ChatTemplate from_tokenizer_config(const std::string& path);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // The template variables are those transformers passes: messages (role, content and, when
  // set, reasoning_content), tools = None, documents = None, add_generation_prompt,
  // enable_thinking (only when set), bos_token / eos_token (only when non-empty), then the extra
  // variables. jet::Error on a template runtime error (with line and column) or when the template
  // calls raise_exception(message) (the error text is the message).
  std::string render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;

  // Renders with `variables_json` (a JSON object) as the only template variables.
  std::string render_with_variables(const std::string& variables_json) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace jet
