// The kernels a native decoder step calls on raw buffers (decoder_step.cpp's raw step): the packed float32
// product (packed_linear.cpp), our int8 product (int8_rows.cpp) and the decode attention (decode_attention.cpp),
// and the fused output layer's search its native loops call (fused_topk.cpp),
// each compiled in its own module with its own flags, so the same machine code as their operators run. Each
// module registers an `*_entry() -> int` operator returning the kernel's address: the step resolves it once
// (when its model is prepared) and then calls the kernel without the dispatcher, an output tensor or a
// contiguity check — what a call at one row cost as much as its arithmetic.
#pragma once
#include <cstdint>

namespace fairseq_stream_ops {

// y (M, N) = relu?(x (M, K) W^T + b), W packed by packed_linear_pack into ceil(N / 16) panels (K, 16).
using PackedLinearFn = void (*)(const float* x, int64_t M, int64_t K, const float* panels, int64_t N,
                                const float* bias, bool relu, float* y);
// The same over half panels (packed_linear.cpp: the float16 bits of weights that are all float16 values, each
// widened exactly; the same bits as the float32 panels).
using PackedLinearHalfFn = void (*)(const float* x, int64_t M, int64_t K, const uint16_t* panels, int64_t N,
                                    const float* bias, bool relu, float* y);

// y (M, N) = int8_row_linear's formula for x (M, K): `packed` (P, G, 16, 4) int8 panels, `offset` (P * 16,) the
// column offsets, `wscale` (N,) the scales per output channel, `levels` L.
using Int8LinearFn = void (*)(const float* x, int64_t M, int64_t K, const int8_t* packed, int64_t P, int64_t G,
                              const int32_t* offset, const float* wscale, const float* bias, int64_t N, bool relu,
                              int64_t levels, float* y);

// One decode_attention call (decode_attention.cpp): query row i = r * H + h at q + r * q_row + h * D; keys and
// values of buffer row n, head h, slot j at k / v + n * sn + h * sh + j * D; the output (R, H, D) contiguous.
struct AttentionArgs {
  const float* q;
  int64_t q_row;  // floats between query rows r and r + 1 (H * D when the queries are contiguous)
  int64_t R, H, D;
  const float* k;
  const float* v;
  int64_t N, L, sn, sh;
  const int64_t* kv_row;   // (R,) or null: row r reads buffer row r
  const int64_t* last;     // (R,) or null: no limit but L
  const bool* padding;     // (N, pad_stride) or null
  int64_t pad_stride;
  const int64_t* table;    // (table_rows, table_stride) or null: the caches that never move
  int64_t table_rows, table_stride;
  float scale;
  float* out;
  // (R,) or null: consecutive rows with one value here are attended together, their shared keys read once from
  // memory (each row's arithmetic as alone); null: as kv_row, or each row alone without it
  const int64_t* group;
};
using AttentionFn = void (*)(const AttentionArgs&);

// The fused output layer's search of R rows of V float32 scores (fused_topk.cpp): each row's top k (k <= V; values
// best first, ties to the lower id) and its log-normaliser.
using TopkLseFn = void (*)(const float* rows, int64_t R, int64_t V, int64_t k, float* values, int64_t* ids,
                           float* lse);

}  // namespace fairseq_stream_ops
