// Pooling of score-shaped tiles into the cells of PooledHeadMatrices (head_matrices.h), shared
// by the recomputation (cpu_pooled_matrices) and the backward passes that pool on the way
// (CpuAttnOptions::pooled). Each tile is reduced on its own: a cell inside one tile is final at
// once, a cell spread over several tiles keeps one partial per tile, merged in (q tile, kv tile)
// order by finish(). The result depends neither on the order the tiles arrive in nor on the
// number of threads, and both callers produce the same bits.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/head_tiles.h"

namespace attnscope::cpu {

class PooledCells {
 public:
  // Cells of head (x.b, x.h) over `window` (resolve_window'd here; throws on a bad one):
  // out_rows x out_cols, each clamped to [1, window size]. Tiles arrive as q tiles of kTileRows
  // rows by kv tiles of tile_cols keys (kTileCols fused; Sk for the unfused row blocks).
  // workers: the largest worker index + 1 that add() will be called with. staged: tiles arrive
  // kv tile by kv tile (the fused backward), so each tile's final cells are written into its
  // own contiguous block first (cache friendly) and laid out row-major by finish().
  PooledCells(const HeadContext& x, MatrixWindow window, int64_t out_rows, int64_t out_cols,
              MatrixSelection which, int64_t tile_cols, int workers, bool staged = false);

  const HeadContext& head() const { return x_; }
  const MatrixWindow& window() const { return out_.window; }
  // Whether tile t (kTileRows-aligned i0, tile_cols-aligned j0) overlaps the window.
  bool overlaps(const ScoreTile& t) const;
  // Pools the window's part of block blk (every selected matrix non-null). Each overlapping
  // tile must arrive exactly once; distinct tiles may arrive concurrently from distinct workers.
  void add(const TileBlock& blk, int worker);
  // Merges the partials of the cells spread over several tiles and returns the matrices;
  // throws std::logic_error when some overlapping tile never arrived.
  PooledHeadMatrices finish();

  // Accumulated statistics of the part of one cell inside one tile.
  struct Cell {
    float max, min;
    double sum;
    int32_t finite, nan, pos_inf, neg_inf, masked;
  };

 private:
  struct Scratch {
    std::vector<uint8_t> cls, clean;
    std::vector<float> col_mx, col_mn, col_check;
    std::vector<double> col_sum;
    CellCounts totals[4];  // of the cells this worker stored
  };
  // Pixel rows [pr0, pr1] and columns [pc0, pc1] a tile overlaps.
  struct TileCells {
    int64_t pr0, pr1, pc0, pc1;
  };
  TileCells tile_cells(int64_t qt, int64_t jt) const;
  // Split cells (spread over several tiles) among the tile's columns, and in its pixel row pr;
  // a tile keeps the partials of its split cells in row-major order.
  int64_t split_cols(const TileCells& tc) const;
  int64_t split_in_row(const TileCells& tc, int64_t pr) const;
  bool is_split(int64_t pr, int64_t pc) const {
    return row_split_[static_cast<size_t>(pr)] || col_split_[static_cast<size_t>(pc)];
  }
  // Index of split cell (pr, pc) among all split cells, row-major.
  int64_t split_id(int64_t pr, int64_t pc) const;
  // Stores final statistics c at cell index `at` of m, counting them into totals.
  void store(PooledMatrix& m, size_t at, const Cell& c, CellCounts& totals) const;
  // Sizes m's arrays for n cells (those the selection keeps).
  void size_cells(PooledMatrix& m, size_t n) const;
  // Moves the staged final cells of q tile qt to their row-major places.
  void unstage(int64_t qt);

  const HeadContext x_;
  const MatrixSelection which_;
  const int64_t tile_cols_;
  const bool any_mask_;
  PooledHeadMatrices out_;
  std::vector<int64_t> row_pix_, col_pix_;      // [window rows], [window cols]: cell of each index
  std::vector<uint8_t> row_split_, col_split_;  // [rows], [cols]: spans several q / kv tiles
  std::vector<int64_t> col_split_before_;       // [cols + 1]: split columns before pc
  std::vector<int64_t> split_row_base_;         // [rows + 1]: split cells before row pr
  int64_t qt0_ = 0, n_qt_ = 0, jt0_ = 0, n_jt_ = 0;
  // [matrix][tile slot]: partials of the tile's split cells, row-major.
  std::vector<std::vector<Cell>> partial_[4];
  std::vector<Scratch> scratch_;
  const bool staged_;
  std::vector<int64_t> stage_at_;    // [tile slot]: first cell of the tile's staged block
  PooledMatrix stage_[4];            // staged blocks, [pixel rows x pixel cols] of each tile
  std::atomic<int64_t> arrived_{0};  // tiles added so far
};

}  // namespace attnscope::cpu
