// Post-processors: only the "single" template matters, since encode takes one sequence.
#include "tokenizer/post_processor.h"

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace jet::tokenizer {

using json_fields::Json;

PostProcessor PostProcessor::from_json(const Json& spec) {
  PostProcessor processor;
  if (!spec.is_null()) processor.add_from_json(spec, "post_processor");
  return processor;
}

void PostProcessor::add_from_json(const Json& spec, const std::string& where) {
  const std::string type = json_fields::component_type(spec, where);
  if (type == "Sequence") {
    const Json& processors = json_fields::require(spec, "processors", where);
    JET_CHECK(processors.is_array(), where, ".processors must be an array");
    for (size_t i = 0; i < processors.size(); ++i) {
      add_from_json(processors[i], str(where, ".processors[", i, "]"));
    }
  } else if (type == "TemplateProcessing") {
    add_template(spec, where);
  } else if (type != "ByteLevel") {  // ByteLevel only trims offsets, which encode does not return
    throw Error(str(where, ": unsupported post_processor type '", type,
                    "' (supported: ByteLevel, TemplateProcessing, Sequence, null)"));
  }
}

void PostProcessor::add_template(const Json& spec, const std::string& where) {
  const Json& single = json_fields::require(spec, "single", where);
  const Json& special_tokens = json_fields::require(spec, "special_tokens", where);
  JET_CHECK(single.is_array(), where, ".single must be an array");
  // A later processor wraps the output of the earlier ones.
  std::vector<int32_t> prefix, suffix;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item_where = str(where, ".single[", i, "]");
    const Json& item = single[i];
    if (item.is_object() && item.contains("Sequence")) {
      const std::string sequence = json_fields::require_string(item["Sequence"], "id", item_where + ".Sequence");
      JET_CHECK(sequence == "A" && !seen_sequence, item_where, ": the single template must hold ",
                "the sequence $A exactly once, found ", item.dump());
      seen_sequence = true;
    } else if (item.is_object() && item.contains("SpecialToken")) {
      const std::string name = json_fields::require_string(item["SpecialToken"], "id", item_where + ".SpecialToken");
      const Json& token = json_fields::require(special_tokens, name, where + ".special_tokens");
      const Json& ids = json_fields::require(token, "ids", where + ".special_tokens." + name);
      JET_CHECK(ids.is_array(), where, ".special_tokens.", name, ".ids must be an array");
      for (const Json& id : ids) {
        (seen_sequence ? suffix : prefix)
            .push_back(json_fields::to_token_id(id, where + ".special_tokens." + name + ".ids"));
      }
    } else {
      throw Error(str(item_where, " = ", item.dump(), " must be {\"Sequence\": ...} or {\"SpecialToken\": ...}"));
    }
  }
  JET_CHECK(seen_sequence, where, ".single has no {\"Sequence\": {\"id\": \"A\"}} item");
  prefix_.insert(prefix_.begin(), prefix.begin(), prefix.end());
  suffix_.insert(suffix_.end(), suffix.begin(), suffix.end());
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace jet::tokenizer
