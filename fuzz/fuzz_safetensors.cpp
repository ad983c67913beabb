// libFuzzer target: arbitrary bytes as a whole .safetensors file image. The parser must either
// return tensors whose views lie inside the input or throw jet::Error; any other exception, crash
// or out-of-bounds read (ASan) is a bug.
//
// Build (clang) and the short run CTest does (JET_FUZZ_SECONDS, 20 s by default):
//   cmake -S . -B build-fuzz -G Ninja -DJET_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//         -DJET_TESTS=OFF
//   ninja -C build-fuzz fuzz_safetensors && ctest --test-dir build-fuzz -R fuzz_safetensors --output-on-failure
// Long run (e.g. 4 hours on every core), growing a corpus kept outside the repository:
//   mkdir -p /tmp/safetensors-corpus
//   build-fuzz/fuzz/fuzz_safetensors -dict=fuzz/fuzz_safetensors.dict -jobs=$(nproc) -workers=$(nproc) \
//       -max_total_time=14400 -rss_limit_mb=4096 /tmp/safetensors-corpus fuzz/corpus/fuzz_safetensors
// A failure leaves crash-<sha1> (or leak-/timeout-) in the working directory; replay it with
//   build-fuzz/fuzz/fuzz_safetensors crash-<sha1>
// and add the fixed input to fuzz/corpus/fuzz_safetensors/ as a regression seed.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const jet::TensorInfo& t : jet::parse_safetensors(data, size, "fuzz input")) {
      if (t.nbytes == 0) continue;
      // Read both ends of every view: one outside the input trips ASan.
      const auto* bytes = static_cast<const volatile uint8_t*>(t.data);
      (void)bytes[0];
      (void)bytes[t.nbytes - 1];
    }
  } catch (const jet::Error&) {
    // Rejecting malformed input is the expected outcome.
  }
  return 0;
}
