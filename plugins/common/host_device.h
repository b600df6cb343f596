// FLEET_HOST_DEVICE marks a function that the CPU plugin (g++) and the CUDA plugin (nvcc) both
// compile from one definition, so the two plugins share the arithmetic itself instead of two
// copies that have to be kept in step by hand.
//
// Contract: under nvcc (__CUDACC__) the macro expands to `__host__ __device__`, so the function
// can be called from kernels and from host code; anywhere else it expands to nothing, so the
// header needs no CUDA header and the g++ side sees ordinary inline C++17. Headers using it stay
// header-only and C++17 (the CUDA plugin is built as C++17).
#pragma once

#if defined(__CUDACC__)
#define FLEET_HOST_DEVICE __host__ __device__
#else
#define FLEET_HOST_DEVICE
#endif
