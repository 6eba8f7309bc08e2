// Full-resolution S, P, dP, dS of one (batch, head) window (see head_matrices.h).
#include "kernels/cpu/head_matrices.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cancel_poll.h"
#include "kernels/cpu/head_tiles.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope {

HeadMatrices cpu_head_matrices(const AttnParams& params, const CpuAttnOptions& options,
                               const CpuAttnInputs& inputs, int64_t b, int64_t h,
                               MatrixWindow window, MatrixSelection which,
                               const ForwardRows* rows) {
  using cpu::kTileRows;
  HeadMatrices out;
  out.window = resolve_window(params, window);
  const MatrixWindow& w = out.window;
  const cpu::HeadTiles tiles(params, options.mode, inputs, b, h, cpu::last_stage(which), rows);
  out.rows = w.row_end - w.row_begin;
  out.cols = w.col_end - w.col_begin;
  const size_t n = static_cast<size_t>(out.rows * out.cols);
  std::vector<float>* mats[] = {&out.s, &out.p, &out.dp, &out.ds};
  const bool selected[] = {which.s, which.p, which.dp, which.ds};
  for (int k = 0; k < 4; ++k) {
    if (selected[k]) mats[k]->resize(n);
  }
  out.masked.resize(n);

  const int threads = cpu::resolve_threads(options.threads);
  const int64_t qt0 = w.row_begin / kTileRows, qt1 = (w.row_end - 1) / kTileRows;
  std::vector<cpu::HeadTiles::Scratch> scratch(static_cast<size_t>(threads),
                                               cpu::HeadTiles::Scratch(tiles));
  const cpu::CancelPoll cancel(options.cancelled);
  // Each q tile writes its own output rows.
  cpu::parallel_for(qt1 - qt0 + 1, threads, [&](int64_t item, int worker) {
    cancel.check();
    std::vector<uint8_t> cls;
    const auto copy_block = [&](const cpu::TileBlock& blk) {
      cancel.check();
      const cpu::ScoreTile& t = blk.t;
      cls.resize(static_cast<size_t>(t.rows * t.cols));
      cpu::mask_classes(tiles.operands().x, t, cls.data());
      const int64_t c0 = std::max(t.j0, w.col_begin), c1 = std::min(t.j0 + t.cols, w.col_end);
      const int64_t r0 = std::max(t.i0, w.row_begin), r1 = std::min(t.i0 + t.rows, w.row_end);
      const float* src[] = {blk.s, blk.p, blk.dp, blk.ds};
      for (int64_t i = r0; i < r1; ++i) {
        const int64_t from = (i - t.i0) * t.ld + (c0 - t.j0);
        const size_t to = static_cast<size_t>((i - w.row_begin) * out.cols + (c0 - w.col_begin));
        const size_t len = static_cast<size_t>(c1 - c0);
        for (int k = 0; k < 4; ++k) {
          if (selected[k]) std::memcpy(mats[k]->data() + to, src[k] + from, len * sizeof(float));
        }
        std::memcpy(out.masked.data() + to, cls.data() + (i - t.i0) * t.cols + (c0 - t.j0), len);
      }
    };
    tiles.q_tile(qt0 + item, w.col_begin, w.col_end, scratch[static_cast<size_t>(worker)],
                 copy_block);
  });
  return out;
}

}  // namespace attnscope
