// jet::ChatTemplate: the real Qwen3/SDAR, LLaDA and LLaDA2 (Ling 2.0) templates, reading templates
// from model folders, and the variables passed to templates (as transformers' apply_chat_template
// passes them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "chat/jinja_test_helpers.h"
#include "core/mapped_file.h"
#include "jet/chat.h"

namespace jet {
namespace {

const std::string kRepo = JET_REPO_DIR;
const std::string kQwen3Config = kRepo + "/models/qwen3-tokenizer/tokenizer_config.json";

std::string llada_template() { return read_text_file(kRepo + "/tests/chat/templates/llada.jinja"); }
// Ling 2.0's template, which LLaDA2.0 / 2.1 inherit with its tokenizer, as a llama.cpp server printed
// it from a Ling-2.0 checkpoint's metadata.
std::string ling2_template() { return read_text_file(kRepo + "/tests/chat/templates/ling2.jinja"); }

// A scratch folder for tokenizer_config.json variants, removed afterwards.
class ConfigFolder {
 public:
  ConfigFolder() : path_(std::filesystem::temp_directory_path() / ("jet_chat_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ConfigFolder() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

TEST(ChatTemplate, Qwen3SingleTurnIsTheDocumentedPrompt) {
  const ChatTemplate chat = ChatTemplate::from_tokenizer_config(kQwen3Config);
  EXPECT_EQ(chat.render({{"user", "What is 2+2?"}}, {}),
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  ChatTemplateOptions no_thinking;
  no_thinking.enable_thinking = false;
  EXPECT_EQ(chat.render({{"user", "Hi"}}, no_thinking),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ChatTemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(chat.render({{"system", "Be brief."}, {"user", "Hi"}}, no_prompt),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3KeepsReasoningOnlyAfterTheLastUserTurn) {
  const ChatTemplate chat = ChatTemplate::from_tokenizer_config(kQwen3Config);
  const std::vector<ChatMessage> messages = {
      {"user", "q1"},
      {"assistant", "<think>\nold plan\n</think>\n\na1"},  // reasoning parsed out of the content
      {"user", "q2"},
      {"assistant", "a2", "new plan"},  // reasoning given separately, after the last user turn
  };
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(chat.render(messages, options),
            "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
            "<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\nnew plan\n</think>\n\na2<|im_end|>\n");
}

TEST(ChatTemplate, EmptyReasoningIsPresentNotAbsent) {
  // As in transformers, an empty reasoning_content is a defined string, not a missing key.
  const ChatTemplate probe(
      "{% for m in messages %}{{ m.reasoning_content is defined }} {{ m.reasoning_content is string }};{% endfor %}");
  EXPECT_EQ(probe.render({{"assistant", "a"}, {"assistant", "a", ""}, {"assistant", "a", "r"}}, {}),
            "False False;True True;True True;");
  // So Qwen3 parses the reasoning out of a content holding </think> only when it is absent; an
  // empty one keeps the content whole (outputs from jinja2 through tools/render_chat_template.py).
  const ChatTemplate chat = ChatTemplate::from_tokenizer_config(kQwen3Config);
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  const std::string content = "<think>\nplan\n</think>\n\nanswer";
  EXPECT_EQ(chat.render({{"user", "q"}, {"assistant", content}}, options),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n");
  EXPECT_EQ(chat.render({{"user", "q"}, {"assistant", content, ""}}, options),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3ToolsAndToolCallsThroughExtraVariables) {
  const ChatTemplate chat = ChatTemplate::from_tokenizer_config(kQwen3Config);
  const std::string variables = R"({
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
      {"role": "tool", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    "add_generation_prompt": true})";
  EXPECT_EQ(
      chat.render_with_variables(variables),
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}\n</tools>\n\n"
      "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
      "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n"
      "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n");
}

TEST(ChatTemplate, LladaMatchesTheModelCardExample) {
  const ChatTemplate chat(llada_template());
  ChatTemplateOptions options;
  options.bos_token = "<|startoftext|>";
  EXPECT_EQ(chat.render({{"user", "Hi"}}, options),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Content is trimmed, BOS comes only once, and the assistant header ends the prompt even when
  // add_generation_prompt is off (the LLaDA template ignores it).
  options.add_generation_prompt = false;
  EXPECT_EQ(chat.render({{"system", "  sys \n"}, {"user", "\tq "}}, options),
            "<|startoftext|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llada2MatchesItsDocumentedPrompts) {
  const ChatTemplate chat(ling2_template());
  // The prompt SGLang's and dInfer's LLaDA2 examples write by hand (no system message: the template
  // opens a system turn of its own).
  EXPECT_EQ(chat.render({{"user", " Write a brief introduction of the great wall "}}, {}),
            "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role> Write a brief introduction of "
            "the great wall <|role_end|><role>ASSISTANT</role>");
  // The example conversation that llama.cpp's server printed beside the template.
  EXPECT_EQ(chat.render({{"system", "You are a helpful assistant"},
                         {"user", "Hello"},
                         {"assistant", "Hi there"},
                         {"user", "How are you?"}},
                        {}),
            "<role>SYSTEM</role>You are a helpful assistant\ndetailed thinking off<|role_end|><role>HUMAN</role>Hello"
            "<|role_end|><role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>How are you?<|role_end|>"
            "<role>ASSISTANT</role>");
  // Reasoning after the last user turn is kept inside <think>, earlier reasoning dropped.
  ChatTemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(
      chat.render({{"user", "q1"}, {"assistant", "<think>old</think>a1"}, {"user", "q2"}, {"assistant", "a2", "new"}},
                  no_prompt),
      "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>q1<|role_end|>"
      "<role>ASSISTANT</role>a1<|role_end|><role>HUMAN</role>q2<|role_end|>"
      "<role>ASSISTANT</role>\n<think>\nnew\n</think>\n\na2<|role_end|>");
}

TEST(ChatTemplate, VariablesMirrorTransformers) {
  ChatTemplateOptions options;
  options.bos_token = "<s>";
  const jinja::Dict variables = chat_template_variables({{"assistant", "a", "r"}, {"user", "u"}}, options);
  const ChatTemplate probe(
      "{{ messages }} {{ tools }} {{ documents }} {{ add_generation_prompt }} {{ enable_thinking is defined }} "
      "{{ bos_token }} {{ eos_token is defined }}");
  EXPECT_EQ(probe.render({{"assistant", "a", "r"}, {"user", "u"}}, options),
            "[{'role': 'assistant', 'content': 'a', 'reasoning_content': 'r'}, {'role': 'user', 'content': 'u'}] "
            "None None True False <s> False");
  EXPECT_EQ(variables.size(), 5u);
  options.enable_thinking = true;
  options.extra_variables_json = R"({"tools": [1], "custom": "x"})";
  const ChatTemplate extra("{{ enable_thinking }} {{ tools }} {{ custom }}");
  EXPECT_EQ(extra.render({}, options), "True [1] x");
  options.extra_variables_json = "[1]";
  EXPECT_THROW(extra.render({}, options), Error);
}

TEST(ChatTemplate, ReadsTemplatesTheWayTransformersDoes) {
  ConfigFolder folder;
  const std::string plain = folder.write("tokenizer_config.json", R"({"chat_template": "A{{ messages | length }}"})");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(plain).render({{"user", "x"}}, {}), "A1");
  folder.write("tokenizer_config.json",
               R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(plain).render({}, {}), "D");
  folder.write("chat_template.jinja", "J{{ add_generation_prompt }}\n");  // the sidecar file wins
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(plain).render({}, {}), "JTrue");
}

TEST(ChatTemplate, MissingOrBrokenTemplatesAreClearErrors) {
  ConfigFolder folder;
  const std::string path = folder.write("tokenizer_config.json", R"({"eos_token": "x"})");
  const auto error_of = [](const std::string& config) {
    try {
      ChatTemplate::from_tokenizer_config(config);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(path).find("has no \"chat_template\""), std::string::npos);
  folder.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "R"}]})");
  EXPECT_NE(error_of(path).find("none is called \"default\""), std::string::npos);
  folder.write("tokenizer_config.json", "{not json");
  EXPECT_NE(error_of(path).find("is not valid JSON"), std::string::npos);
  folder.write("tokenizer_config.json", R"({"chat_template": "{% if x %}"})");
  EXPECT_EQ(error_of(path), path +
                                ": chat template line 1, column 11: syntax error: unexpected end of template, "
                                "expected 'elif' or 'else' or 'endif'");
  EXPECT_NE(error_of(kRepo + "/no/such/tokenizer_config.json").find("no/such/tokenizer_config.json"),
            std::string::npos);
}

TEST(ChatTemplate, RaiseExceptionReachesTheCallerVerbatim) {
  const ChatTemplate chat(
      "{% for m in messages %}{% if m.role == 'system' %}"
      "{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}ok");
  EXPECT_EQ(chat.render({{"user", "hi"}}, {}), "ok");
  try {
    chat.render({{"system", "s"}}, {});
    FAIL() << "expected raise_exception to throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "System role not supported");
  }
}

}  // namespace
}  // namespace jet
