// Element types of checkpoint tensors (bf16, f16, f32, FP8 e4m3) and exact conversions to and
// from f32 (e4m3's are in fp8.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace jet {

enum class DType : uint8_t { F32, F16, BF16, I32, F8E4M3 };

inline size_t dtype_size(DType t) { return t == DType::F8E4M3 ? 1 : t == DType::F16 || t == DType::BF16 ? 2 : 4; }
// "F32", "F16", "BF16", "I32", "F8_E4M3" (the safetensors spelling)
std::string_view dtype_name(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, NaN kept quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements of type `from` at src into f32 at dst.
void convert_to_f32(DType from, const void* src, float* dst, size_t n);
// Converts n f32 values at src into type `to` (F32, BF16 or F16, rounded to nearest even) at dst.
void convert_from_f32(DType to, const float* src, void* dst, size_t n);

}  // namespace jet
