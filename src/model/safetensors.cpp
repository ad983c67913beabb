// safetensors header parsing and validation, and the memory-mapped SafetensorsFile.
#include "model/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/json_object.h"

namespace jet {
namespace {

constexpr size_t kLengthPrefixBytes = 8;
// The limit of the format's reference implementation; real headers are a few MB at most.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// A valid header nests objects and arrays at most this deep ({name: {"shape": [dims]}}).
// Deeper input is rejected while parsing, before it can grow a deep tree.
constexpr int kMaxContainerDepth = 2;
constexpr const char* kMetadataKey = "__metadata__";

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (DType t : {DType::BF16, DType::F16, DType::F32, DType::I32, DType::F8E4M3}) {
    if (dtype_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Parses the header text, rejecting duplicate tensor names (JSON would silently keep the last)
// and over-deep nesting while the parser runs.
Json parse_header(std::string_view text, const std::string& source) {
  // The JSON parser stops at a NUL as at the end of its input, which would hide what follows.
  JET_CHECK(text.find('\0') == std::string_view::npos, source, ": safetensors header holds a NUL byte");
  std::set<std::string> names;
  auto guard = [&](int depth, Json::parse_event_t event, Json& parsed) {
    bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    JET_CHECK(!opens || depth <= kMaxContainerDepth, source,
              ": safetensors header nests deeper than a tensor entry can");
    if (event == Json::parse_event_t::key && depth == 1) {
      const auto& name = parsed.get_ref<const std::string&>();
      JET_CHECK(names.insert(name).second, source, ": tensor '", name, "' appears twice in the header");
    }
    return true;
  };
  try {
    return Json::parse(text, guard);
  } catch (const Json::exception& e) {
    throw Error(str(source, ": safetensors header is not valid JSON (", e.what(), ")"));
  }
}

// Reads a non-negative JSON integer; `what` names it in the error.
uint64_t read_count(const Json& value, const std::string& where, std::string_view what) {
  JET_CHECK(value.is_number_integer(), where, what, " must be an integer, got ", json_type_name(value));
  JET_CHECK(value.is_number_unsigned() || value.get<int64_t>() >= 0, where, what, " is negative (",
            value.get<int64_t>(), ")");
  return value.get<uint64_t>();
}

const Json& field(const Json& entry, const char* key, const std::string& where) {
  auto it = entry.find(key);
  JET_CHECK(it != entry.end(), where, "missing '", key, "'");
  return *it;
}

// Where the data section lies inside the file image.
struct DataSection {
  const unsigned char* begin;
  uint64_t size;
  uint64_t file_offset;  // of the first data byte
};

struct ParsedEntry {
  TensorInfo info;
  uint64_t begin, end;  // offsets inside the data section
};

ParsedEntry parse_entry(const std::string& name, const Json& entry, const DataSection& data,
                        const std::string& source) {
  const std::string where = str(source, ": tensor '", name, "': ");
  JET_CHECK(entry.is_object(), where, "entry must be an object, got ", json_type_name(entry));

  const Json& dtype_json = field(entry, "dtype", where);
  JET_CHECK(dtype_json.is_string(), where, "dtype must be a string, got ", json_type_name(dtype_json));
  const auto& dtype_text = dtype_json.get_ref<const std::string&>();
  DType dtype{};
  JET_CHECK(dtype_from_name(dtype_text, &dtype), where, "unsupported dtype '", dtype_text,
            "' (supported: ", kSupportedSafetensorsDtypes, ")");

  const Json& shape_json = field(entry, "shape", where);
  JET_CHECK(shape_json.is_array(), where, "shape must be an array, got ", json_type_name(shape_json));
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (const Json& dim_json : shape_json) {
    uint64_t dim = read_count(dim_json, where, "shape dimension");
    JET_CHECK(!__builtin_mul_overflow(numel, dim, &numel) && numel <= static_cast<uint64_t>(INT64_MAX), where, "shape ",
              json_excerpt(shape_json), " has too many elements");
    shape.push_back(static_cast<int64_t>(dim));
  }

  const Json& offsets = field(entry, "data_offsets", where);
  JET_CHECK(offsets.is_array() && offsets.size() == 2, where, "data_offsets must be an array [begin, end], got ",
            offsets.is_array() ? str("an array of ", offsets.size()) : std::string(json_type_name(offsets)));
  uint64_t begin = read_count(offsets[0], where, "data_offsets begin");
  uint64_t end = read_count(offsets[1], where, "data_offsets end");
  JET_CHECK(begin <= end, where, "data_offsets begin ", begin, " > end ", end);
  JET_CHECK(end <= data.size, where, "data_offsets end ", end, " lies beyond the data section (", data.size, " bytes)");

  const size_t elem = dtype_size(dtype);
  uint64_t expected_bytes = 0;
  JET_CHECK(!__builtin_mul_overflow(numel, elem, &expected_bytes), where, "byte size of shape ",
            json_excerpt(shape_json), " overflows");
  JET_CHECK(end - begin == expected_bytes, where, "holds ", end - begin, " bytes but ", dtype_text, " ",
            json_excerpt(shape_json), " needs ", expected_bytes);
  // Consumers read elements in place, so each tensor must start on an element boundary (the
  // standard writers pad the header to a multiple of 8 to guarantee it).
  JET_CHECK((data.file_offset + begin) % elem == 0, where, "data starts at file offset ", data.file_offset + begin,
            ", not aligned to its ", elem, "-byte elements");

  TensorInfo info{name, dtype, std::move(shape), data.begin + begin, static_cast<size_t>(end - begin)};
  return {std::move(info), begin, end};
}

// Two tensors may not share bytes; gaps between them are allowed.
void check_no_overlap(std::vector<const ParsedEntry*> entries, const std::string& source) {
  entries.erase(std::remove_if(entries.begin(), entries.end(), [](auto* e) { return e->begin == e->end; }),
                entries.end());
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    const ParsedEntry& prev = *entries[i - 1];
    const ParsedEntry& cur = *entries[i];
    JET_CHECK(cur.begin >= prev.end, source, ": tensors '", prev.info.name, "' [", prev.begin, ", ", prev.end,
              ") and '", cur.info.name, "' [", cur.begin, ", ", cur.end, ") overlap");
  }
}

void check_metadata(const Json& metadata, const std::string& source) {
  JET_CHECK(metadata.is_object(), source, ": ", kMetadataKey, " must be an object, got ", json_type_name(metadata));
  for (const auto& [key, value] : metadata.items()) {
    JET_CHECK(value.is_string(), source, ": ", kMetadataKey, " value '", key, "' must be a string, got ",
              json_type_name(value));
  }
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorInfo> parse_safetensors(const unsigned char* bytes, size_t size, const std::string& source) {
  JET_CHECK(size >= kLengthPrefixBytes, source, ": file too short for safetensors (", size,
            " bytes; the header length alone takes 8)");
  const uint64_t header_bytes = read_u64_le(bytes);
  JET_CHECK(header_bytes <= size - kLengthPrefixBytes, source, ": header length ", header_bytes,
            " exceeds the file size (", size, " bytes)");
  JET_CHECK(header_bytes <= kMaxHeaderBytes, source, ": header length ", header_bytes, " exceeds the limit of ",
            kMaxHeaderBytes, " bytes");

  const char* header_text = reinterpret_cast<const char*>(bytes + kLengthPrefixBytes);
  Json header = parse_header(std::string_view(header_text, header_bytes), source);
  JET_CHECK(header.is_object(), source, ": safetensors header must be a JSON object, got ", json_type_name(header));

  const uint64_t data_offset = kLengthPrefixBytes + header_bytes;
  const DataSection data{bytes + data_offset, size - data_offset, data_offset};
  std::vector<ParsedEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      check_metadata(entry, source);
    } else {
      entries.push_back(parse_entry(name, entry, data, source));
    }
  }
  std::vector<const ParsedEntry*> views;
  for (const auto& e : entries) views.push_back(&e);
  check_no_overlap(std::move(views), source);

  std::vector<TensorInfo> tensors;  // sorted by name: JSON objects iterate in key order
  tensors.reserve(entries.size());
  for (auto& e : entries) tensors.push_back(std::move(e.info));
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(path), tensors_(parse_safetensors(file_.data(), file_.size(), path)) {
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  JET_CHECK(t, path(), ": no tensor named '", name, "'");
  return *t;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.name);
  return out;
}

}  // namespace jet
