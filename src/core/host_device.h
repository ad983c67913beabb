// JET_HOST_DEVICE marks header-only functions that the CPU code and the CUDA kernels share
// (so both backends compute the same thing from one definition).
#pragma once

#ifdef __CUDACC__
#define JET_HOST_DEVICE __host__ __device__
#else
#define JET_HOST_DEVICE
#endif
