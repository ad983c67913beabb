// White_Space as listed in Unicode's PropList.txt; word characters by general category (utf8proc).
#include "tokenizer/unicode_classes.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <memory>

namespace jet::unicode {
namespace {

constexpr std::array<char32_t, 25> kWhiteSpace = {
    0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
    0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
};

// From utf8proc's tables. Composition membership is asked only as "in any composition pair at
// all" (comb_index set), which does not depend on how utf8proc encodes first and second.
// Hangul conjoining jamo compose algorithmically, outside those tables, so they are excluded.
bool compute_nfc_inert(char32_t code_point) {
  if (code_point >= 0x1100 && code_point <= 0x11FF) return false;
  const utf8proc_property_t* property = utf8proc_get_property(static_cast<utf8proc_int32_t>(code_point));
  // Compatibility decompositions (decomp_type != 0, e.g. fullwidth forms) do not apply in NFC.
  const bool canonical_decomposition = property->decomp_seqindex != UINT16_MAX && property->decomp_type == 0;
  return property->combining_class == 0 && !canonical_decomposition && property->comb_index == UINT16_MAX;
}

// The answers for the Basic Multilingual Plane, computed once (64K bits).
const std::bitset<0x10000>& bmp_nfc_inert() {
  static const auto table = [] {
    auto bits = std::make_unique<std::bitset<0x10000>>();
    for (char32_t code_point = 0; code_point < 0x10000; ++code_point) {
      (*bits)[code_point] = compute_nfc_inert(code_point);
    }
    return bits;
  }();
  return *table;
}

}  // namespace

std::span<const char32_t> white_space_code_points() { return kWhiteSpace; }

bool is_white_space(char32_t code_point) {
  return std::binary_search(kWhiteSpace.begin(), kWhiteSpace.end(), code_point);
}

bool is_word_character(char32_t code_point) {
  if (code_point == 0x200C || code_point == 0x200D) return true;  // Join_Control
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(code_point))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_nfc_inert(char32_t code_point) {
  // Below U+0300 nothing decomposes canonically or composes as a second character.
  if (code_point < 0x300) return true;
  if (code_point < 0x10000) return bmp_nfc_inert()[code_point];
  return compute_nfc_inert(code_point);
}

}  // namespace jet::unicode
