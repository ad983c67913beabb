// Unicode normalisation through utf8proc (Unicode 15 tables), always with an explicit length so
// that text containing U+0000 is normalised whole.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_classes.h"
#include "core/utf8.h"

namespace jet::tokenizer {
namespace {

utf8proc_option_t options_of(Normalizer::Form form) {
  switch (form) {
    case Normalizer::Form::NFC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case Normalizer::Form::NFD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case Normalizer::Form::NFKC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case Normalizer::Form::NFKD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  JET_ASSERT(false, "unknown normalisation form");
}

// True when `form` provably leaves `text` unchanged: ASCII is stable under every form, and
// for NFC so is a text made only of NFC-inert characters (the common case, Chinese included).
bool is_stable(Normalizer::Form form, std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (form != Normalizer::Form::NFC) return false;
    const utf8::Sequence seq = utf8::decode_one(text, pos);
    if (!unicode::is_nfc_inert(seq.code_point)) return false;
    pos += seq.length;
  }
  return true;
}

void normalize_into(Normalizer::Form form, std::string_view text, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                               static_cast<utf8proc_ssize_t>(text.size()), &result, options_of(form));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  // The tokenizer validates UTF-8 before normalising, so utf8proc cannot reject the text.
  JET_ASSERT(length >= 0, "utf8proc_map failed: ", utf8proc_errmsg(length));
  out.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& spec) {
  Normalizer normalizer;
  if (!spec.is_null()) normalizer.add_from_json(spec, "normalizer");
  return normalizer;
}

void Normalizer::add_from_json(const nlohmann::json& spec, const std::string& where) {
  const std::string type = json_fields::component_type(spec, where);
  if (type == "Sequence") {
    const auto& steps = json_fields::require(spec, "normalizers", where);
    JET_CHECK(steps.is_array(), where, ".normalizers must be an array");
    for (size_t i = 0; i < steps.size(); ++i) {
      add_from_json(steps[i], str(where, ".normalizers[", i, "]"));
    }
  } else if (type == "NFC") {
    forms_.push_back(Form::NFC);
  } else if (type == "NFD") {
    forms_.push_back(Form::NFD);
  } else if (type == "NFKC") {
    forms_.push_back(Form::NFKC);
  } else if (type == "NFKD") {
    forms_.push_back(Form::NFKD);
  } else {
    throw Error(
        str(where, ": unsupported normalizer type '", type, "' (supported: NFC, NFD, NFKC, NFKD, Sequence, null)"));
  }
}

std::string_view Normalizer::apply(std::string_view text, std::string& scratch) const {
  std::string_view current = text;
  std::string step_output;
  for (Form form : forms_) {
    if (is_stable(form, current)) continue;
    normalize_into(form, current, step_output);
    scratch.swap(step_output);
    current = scratch;
  }
  return current;
}

}  // namespace jet::tokenizer
