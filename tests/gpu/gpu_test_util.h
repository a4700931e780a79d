// Shared by the GPU tests that call kernel launchers directly.
#pragma once

#include <gtest/gtest.h>

// Fails the test (and returns) when a CUDA runtime call does not return cudaSuccess.
#define CUDA_ASSERT(call)                                        \
  do {                                                           \
    const cudaError_t cuda_assert_err = (call);                  \
    ASSERT_EQ(cuda_assert_err, cudaSuccess)                      \
        << #call << ": " << cudaGetErrorString(cuda_assert_err); \
  } while (0)
