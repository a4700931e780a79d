// Which KV tiles split z of a split-KV attention launch takes. Shared by the attention kernel
// and a CPU unit test; no CUDA headers, so the CPU build can include it.
#pragma once

#include <cstdint>

#ifndef LOCUS_HOST_DEVICE
#if defined(__CUDACC__)
#define LOCUS_HOST_DEVICE __host__ __device__
#else
#define LOCUS_HOST_DEVICE
#endif
#endif

namespace locus::cuda::attention {

struct TileRange {
  int begin = 0;
  int end = 0;  // exclusive; begin == end: the split has no tile
};

// Split z of `splits` over `tiles` KV tiles. With no more tiles than splits, split z takes tile z
// and splits z >= tiles are empty, so a merge need only read the first `tiles` splits. Otherwise
// every split gets floor or ceil of tiles / splits consecutive tiles, and the last split the
// floor: it also loads the newest key after the PDL wait, so it should not get a tile more.
LOCUS_HOST_DEVICE inline TileRange split_tiles(int tiles, int splits, int z) {
  TileRange r;
  if (tiles <= splits) {
    r.begin = z < tiles ? z : tiles;
    r.end = z + 1 < tiles ? z + 1 : tiles;
    return r;
  }
  const int64_t after = splits - z;
  r.begin = tiles - static_cast<int>(after * tiles / splits);
  r.end = tiles - static_cast<int>((after - 1) * tiles / splits);
  return r;
}

}  // namespace locus::cuda::attention
