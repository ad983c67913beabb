// dtype names and the f16 <-> f32 conversions (bf16 ones are inline in dtype.h).
#include "core/dtype.h"

#include "core/error.h"
#include "core/fp8.h"

namespace jet {

namespace {

// Conversions of whole weight tensors (hundreds of MB at load) are split over threads; small ones
// stay on the calling thread, where starting a team would cost more than the loop.
constexpr size_t kParallelElements = size_t{1} << 20;

template <typename Convert>
void convert_each(size_t n, Convert convert) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (size_t i = 0; i < n; ++i) convert(i);
}

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::F8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = bits & 0x7fffffu;
  if (((bits >> 23) & 0xffu) == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | static_cast<uint32_t>(exp) << 10 | mant >> 13;
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

void convert_to_f32(DType from, const void* src, float* dst, size_t n) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      convert_each(n, [&](size_t i) { dst[i] = bf16_to_f32(s[i]); });
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      convert_each(n, [&](size_t i) { dst[i] = f16_to_f32(s[i]); });
      return;
    }
    case DType::F8E4M3: {
      const auto* s = static_cast<const uint8_t*>(src);
      convert_each(n, [&](size_t i) { dst[i] = e4m3_to_f32(s[i]); });
      return;
    }
    case DType::I32:
      break;
  }
  throw Error(str("cannot convert ", dtype_name(from), " to F32"));
}

void convert_from_f32(DType to, const float* src, void* dst, size_t n) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      convert_each(n, [&](size_t i) { d[i] = f32_to_bf16(src[i]); });
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      convert_each(n, [&](size_t i) { d[i] = f32_to_f16(src[i]); });
      return;
    }
    case DType::F8E4M3:
    case DType::I32:
      break;
  }
  throw Error(str("cannot convert F32 to ", dtype_name(to)));
}

}  // namespace jet
