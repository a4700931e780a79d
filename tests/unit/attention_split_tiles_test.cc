// The split-KV tile assignment the CUDA attention kernel uses (split_tiles.h, host-callable):
// its merge reads only the first min(splits, tiles) splits, which is only right if every tile
// lands in exactly one split and splits past the tiles are the empty ones.
#include "backend/cuda/kernels/attention/split_tiles.h"

#include <gtest/gtest.h>

namespace locus {
namespace {

using cuda::attention::split_tiles;
using cuda::attention::TileRange;

TEST(AttentionSplitTiles, EveryTileInExactlyOneSplitInOrder) {
  for (int tiles = 0; tiles <= 90; ++tiles) {
    for (int splits = 1; splits <= 70; ++splits) {
      SCOPED_TRACE(::testing::Message() << tiles << " tiles, " << splits << " splits");
      int next = 0;
      for (int z = 0; z < splits; ++z) {
        const TileRange r = split_tiles(tiles, splits, z);
        ASSERT_EQ(r.begin, next) << "split " << z;
        ASSERT_GE(r.end, r.begin) << "split " << z;
        next = r.end;
      }
      EXPECT_EQ(next, tiles);
    }
  }
}

TEST(AttentionSplitTiles, FewTilesGoOnePerSplitFromTheFirst) {
  // A graph captured for long contexts plans many splits; a short context must leave the
  // empty ones at the end, where the merge does not look.
  for (int z = 0; z < 64; ++z) {
    const TileRange r = split_tiles(17, 64, z);
    EXPECT_EQ(r.end - r.begin, z < 17 ? 1 : 0) << "split " << z;
    if (z < 17) {
      EXPECT_EQ(r.begin, z);
    }
  }
  const TileRange last = split_tiles(5, 5, 4);
  EXPECT_EQ(last.begin, 4);
  EXPECT_EQ(last.end, 5);
}

TEST(AttentionSplitTiles, MoreTilesThanSplitsBalanceAndTheLastSplitGetsTheShortRun) {
  for (int splits = 1; splits <= 40; ++splits) {
    for (int tiles = splits + 1; tiles <= 200; ++tiles) {
      SCOPED_TRACE(::testing::Message() << tiles << " tiles, " << splits << " splits");
      for (int z = 0; z < splits; ++z) {
        const TileRange r = split_tiles(tiles, splits, z);
        const int size = r.end - r.begin;
        EXPECT_TRUE(size == tiles / splits || size == (tiles + splits - 1) / splits)
            << "split " << z << " has " << size;
      }
      // The split with the newest key gets the shorter run.
      const TileRange last = split_tiles(tiles, splits, splits - 1);
      EXPECT_EQ(last.end - last.begin, tiles / splits);
    }
  }
  // 17 tiles over 16 splits: the first split takes two, the rest one each.
  EXPECT_EQ(split_tiles(17, 16, 0).end, 2);
  EXPECT_EQ(split_tiles(17, 16, 15).begin, 16);
}

}  // namespace
}  // namespace locus
