// UTF-8 decoding by the well-formed byte sequence table of the Unicode standard (Table 3-7).
#include "core/utf8.h"

namespace jet::utf8 {
namespace {

struct ByteRange {
  unsigned char low, high;
};

// For a lead byte: total sequence length, and the allowed range of the second byte
// (later continuation bytes are always 80..BF). Length 0 marks a byte that cannot start one.
struct LeadInfo {
  size_t length;
  ByteRange second;
};

LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, {0, 0}};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, {0x80, 0xBF}};
  if (lead == 0xE0) return {3, {0xA0, 0xBF}};  // no overlong forms
  if (lead == 0xED) return {3, {0x80, 0x9F}};  // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {3, {0x80, 0xBF}};
  if (lead == 0xF0) return {4, {0x90, 0xBF}};  // no overlong forms
  if (lead == 0xF4) return {4, {0x80, 0x8F}};  // nothing above U+10FFFF
  if (lead >= 0xF1 && lead <= 0xF3) return {4, {0x80, 0xBF}};
  return {0, {0, 0}};
}

}  // namespace

Sequence decode_one(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length == 0) return {Sequence::Kind::INVALID, 1, 0};
  if (info.length == 1) return {Sequence::Kind::CHARACTER, 1, lead};
  static constexpr unsigned char kLeadPayloadMask[] = {0, 0, 0x1F, 0x0F, 0x07};
  char32_t code_point = lead & kLeadPayloadMask[info.length];
  for (size_t i = 1; i < info.length; ++i) {
    if (pos + i >= text.size()) return {Sequence::Kind::TRUNCATED, i, 0};
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const ByteRange range = i == 1 ? info.second : ByteRange{0x80, 0xBF};
    if (byte < range.low || byte > range.high) return {Sequence::Kind::INVALID, i, 0};
    code_point = (code_point << 6) | (byte & 0x3F);
  }
  return {Sequence::Kind::CHARACTER, info.length, code_point};
}

std::optional<size_t> first_invalid_offset(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {  // ASCII fast path
      ++pos;
      continue;
    }
    const Sequence seq = decode_one(text, pos);
    if (seq.kind != Sequence::Kind::CHARACTER) return pos;
    pos += seq.length;
  }
  return std::nullopt;
}

std::string decode_lossy(std::string_view bytes) {
  if (!first_invalid_offset(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Sequence seq = decode_one(bytes, pos);
    if (seq.kind == Sequence::Kind::CHARACTER) {
      out.append(bytes.substr(pos, seq.length));
    } else {
      out.append(kReplacementCharacter);
    }
    pos += seq.length;
  }
  return out;
}

size_t incomplete_tail_length(std::string_view bytes) {
  // A sequence is at most 4 bytes, so an incomplete one starts within the last 3.
  const size_t first_candidate = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = bytes.size(); pos-- > first_candidate;) {
    const auto byte = static_cast<unsigned char>(bytes[pos]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    const Sequence seq = decode_one(bytes, pos);
    return seq.kind == Sequence::Kind::TRUNCATED ? bytes.size() - pos : 0;
  }
  return 0;
}

void append_code_point(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace jet::utf8
