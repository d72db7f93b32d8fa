// How the packed products (packed_linear.cpp, int8_rows.cpp) cover a call of M rows by P panels of 16
// columns with register tiles, over threads. Which rows and panels share a tile never changes a bit:
// each output element is one sum in one order (packed_linear.cpp) or an integer sum (int8_rows.cpp).
#pragma once
#include <ATen/Parallel.h>
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace fairseq_stream_ops {

// Keeps a loaded panel vector in a register for a tile's MR rows. Without it GCC folded the load into each of the
// MR multiply-adds that read it at 4 rows (MR loads of one panel vector a step instead of one), and on a CPU that
// loads one 512-bit vector a cycle (AMD Zen 4) the tile then waited on its loads, not on its arithmetic. An empty
// asm: no instruction, the same arithmetic in the same order (the same bits). Fewer rows keep the folded form (at
// 2-3 rows the weights' stream from memory bounds the tile, and pinned measured slower there).
template <int MR, typename V>
inline void pin_for_rows(V& v) {
#if defined(__x86_64__)
  if constexpr (MR >= 4) asm("" : "+v"(v));  // "v": any SIMD register
#endif
}

// One row (M == 1): ONE_ROW panels at a time (independent sums in flight), threads by panel groups of
// `grain_one_row` groups. More rows: tiles of ROWS rows by PANELS panels, a panel group read by every
// row block while it is in cache, threads by `grain` tiles. The panels past the last whole group go
// one by one. `tile(m0, rows, p0, panels, one_row)` computes rows [m0, m0 + rows) of panels [p0, p0 + panels),
// `panels` a std::integral_constant (the tile's width at compile time), `one_row` a std::bool_constant (M == 1:
// rows is 1), rows <= ROWS.
template <int ROWS, int PANELS, int ONE_ROW, typename Tile>
void for_each_tile(int64_t M, int64_t P, int64_t grain_one_row, int64_t grain, const Tile& tile) {
  using One = std::integral_constant<int, 1>;
  using Single = std::true_type;
  using Several = std::false_type;
  if (M == 1) {
    at::parallel_for(0, (P + ONE_ROW - 1) / ONE_ROW, grain_one_row, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t p0 = g * ONE_ROW;
        if (P - p0 >= ONE_ROW) {
          tile(0, 1, p0, std::integral_constant<int, ONE_ROW>(), Single());
        } else {
          for (int64_t p = p0; p < P; ++p) tile(0, 1, p, One(), Single());
        }
      }
    });
    return;
  }
  const int64_t groups = (P + PANELS - 1) / PANELS, blocks = (M + ROWS - 1) / ROWS;
  at::parallel_for(0, groups * blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p0 = t / blocks * PANELS, m0 = t % blocks * ROWS;
      const int64_t rows = std::min<int64_t>(ROWS, M - m0);
      if (P - p0 >= PANELS) {
        tile(m0, rows, p0, std::integral_constant<int, PANELS>(), Several());
      } else {
        for (int64_t p = p0; p < P; ++p) tile(m0, rows, p, One(), Several());
      }
    }
  });
}

}  // namespace fairseq_stream_ops
