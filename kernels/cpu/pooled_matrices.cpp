// Pooled S, P, dP, dS of one (batch, head) window recomputed tile by tile (see head_matrices.h):
// HeadTiles recomputes the q tiles in parallel and PooledCells pools each tile, so the result
// does not depend on the number of threads and equals what a backward pass pools on the way.
#include "kernels/cpu/cancel_poll.h"
#include "kernels/cpu/head_matrices.h"
#include "kernels/cpu/head_tiles.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/pooled_cells.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope {

PooledHeadMatrices cpu_pooled_matrices(const AttnParams& params, const CpuAttnOptions& options,
                                       const CpuAttnInputs& inputs, int64_t b, int64_t h,
                                       int64_t out_rows, int64_t out_cols, MatrixWindow window,
                                       MatrixSelection which, const ForwardRows* rows) {
  using cpu::kTileRows;
  const MatrixWindow w = resolve_window(params, window);
  const cpu::HeadTiles tiles(params, options.mode, inputs, b, h, cpu::last_stage(which), rows);
  const int threads = cpu::resolve_threads(options.threads);
  const int64_t tile_cols = options.mode == Mode::fused ? cpu::kTileCols : params.seqlen_k;
  cpu::PooledCells cells(tiles.operands().x, w, out_rows, out_cols, which, tile_cols, threads);
  std::vector<cpu::HeadTiles::Scratch> scratch(static_cast<size_t>(threads),
                                               cpu::HeadTiles::Scratch(tiles));
  const int64_t qt0 = w.row_begin / kTileRows, n_qt = (w.row_end - 1) / kTileRows - qt0 + 1;
  const cpu::CancelPoll cancel(options.cancelled);
  cpu::parallel_for(n_qt, threads, [&](int64_t item, int worker) {
    cancel.check();
    tiles.q_tile(qt0 + item, w.col_begin, w.col_end, scratch[static_cast<size_t>(worker)],
                 [&](const cpu::TileBlock& blk) {
                   cells.add(blk, worker);
                   cancel.check();
                 });
  });
  return cells.finish();
}

}  // namespace attnscope
