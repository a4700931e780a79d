# Decides LOCUS_HAS_CUDA from LOCUS_CUDA (ON/OFF/AUTO) and sets up nvcc for Hopper (sm_90a).
# Compiling needs only the toolkit, never a GPU.
set(LOCUS_HAS_CUDA OFF)
string(TOUPPER "${LOCUS_CUDA}" _locus_cuda)
if(_locus_cuda STREQUAL "OFF")
  message(STATUS "locus: CUDA backend off (LOCUS_CUDA=OFF)")
  return()
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_locus_cuda STREQUAL "ON")
    message(FATAL_ERROR "locus: LOCUS_CUDA=ON but no nvcc was found; install the CUDA toolkit "
                        "or set CMAKE_CUDA_COMPILER")
  endif()
  message(STATUS "locus: nvcc not found, CUDA backend off (LOCUS_CUDA=AUTO)")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # sm_90a: the arch-specific Hopper target, needed for wgmma and TMA.
  set(CMAKE_CUDA_ARCHITECTURES 90a)
endif()
enable_language(CUDA)
# CMake 3.25 does not know nvcc's C++20 flag (CMAKE_CUDA_STANDARD 20 fails its ABI check), so
# the dialect is passed directly; nvcc >= 12 accepts it.
string(APPEND CMAKE_CUDA_FLAGS " -std=c++20")
find_package(CUDAToolkit REQUIRED)
set(LOCUS_HAS_CUDA ON)
message(STATUS "locus: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES})")
