// --cpu-matmul packed (fairseq_stream/ops/packed_linear.py): y = x W^T + b, in float32, with W packed once.
//
// Why our own product: at the few rows of a batch-1 or k = 5 step, oneDNN's product through PyTorch
// (mkldnn::_linear_pointwise) costs ~30 us a call before its arithmetic (a 256 x 256 layer at one row
// is ~65k multiply-adds, ~3 us), and a decoder step makes ~20 such calls.
//
// The arithmetic, the same for every row count, thread count and instruction set: each output
//   y[m][n] = relu?( (fma(x[m][K-1], W[n][K-1], ... fma(x[m][1], W[n][1], fma(x[m][0], W[n][0], 0)))) + b[n] )
// one fused multiply-add per k, in the order k = 0, 1, ..., K-1, into one accumulator, then the bias
// (one rounding), then the ReLU. So a row's result never depends on which rows share the call (what
// keeps var-stream == var-batch exact when beams regroup), and AVX-512, AVX2 and the scalar fallback
// give the same bits (a fused multiply-add is exactly rounded whatever its width). Tiles differ by
// instruction set (how many rows and columns are in registers at once), never the order of one sum.
//
// Packing: W (N, K) as nn.Linear holds it, into panels of 16 columns, panel p = (K, 16), column j of
// the panel = W[16 p + j] (zero beyond N): a k-step of a panel is one contiguous 64-byte load.
//
// Half panels: where every weight of a layer is a float16 value (a checkpoint saved in float16, as fairseq's
// --fp16 training and our export save them) the panels may hold those float16 bits instead (packed_linear.py
// decides). Each k-step then widens 16 halves to float32, which is exact (every float16 is a float32), and runs
// the same multiply-adds in the same order: the same bits as the float32 panels, with half the bytes to read.
// At one row a step's products stream their weights from the cache or memory, so the bytes are their time.
#include <torch/extension.h>
#include "panel_tiles.h"
#include "raw_kernels.h"
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <cstdlib>
#include <memory>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kPanel = 16;  // columns per panel

// A float16 value's float32, exactly: c10::Half's own widening (the scalar build's; the SIMD builds use F16C).
inline float half_to_float(uint16_t h) { return static_cast<float>(c10::Half(h, c10::Half::from_bits())); }
inline float widen(float w) { return w; }
inline float widen(uint16_t w) { return half_to_float(w); }

// 16 halves to 16 floats, exactly.
inline void widen16(const uint16_t* from, float* to) {
#if defined(__AVX512F__)
  _mm512_storeu_ps(to, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(from))));
#elif defined(__F16C__)
  _mm256_storeu_ps(to, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from))));
  _mm256_storeu_ps(to + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 8))));
#else
  for (int j = 0; j < 16; ++j) to[j] = half_to_float(from[j]);
#endif
}

// One tile: rows [0, MR) of x (stride lda) times panels [0, PB) (each K x 16, consecutive), into
// y's rows (stride ldy) at columns [col, col + 16 PB) clipped to n_valid.
#if defined(__AVX512F__)
inline __m512 load16(const float* w) { return _mm512_loadu_ps(w); }
inline __m512 load16(const uint16_t* w) {  // 16 halves widened: exact
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}
template <int MR, int PB, typename WT>
__attribute__((noinline))  // its registers its own (as GCC compiled it anyway; int8_rows.cpp: inlined, it spilled)
void tile(const float* x, int64_t lda, const WT* panels, int64_t K, const float* bias, bool relu, float* y,
          int64_t ldy, int64_t col, int64_t n_total) {
  __m512 acc[MR][PB];
  _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 w[PB];
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
      w[p] = load16(panels + (p * K + k) * kPanel);
      fairseq_stream_ops::pin_for_rows<MR>(w[p]);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * lda + k]);
      _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) acc[r][p] = _mm512_fmadd_ps(a, w[p], acc[r][p]);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
    const int64_t c = col + p * kPanel;
    const int64_t n = std::max<int64_t>(0, std::min<int64_t>(kPanel, n_total - c));  // no early exit: the
    // accumulators stay in registers only where every index is a constant
    const __mmask16 mask = n >= kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + c) : zero;
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
      __m512 v = bias ? _mm512_add_ps(acc[r][p], b) : acc[r][p];
      if (relu) v = _mm512_max_ps(v, zero);
      _mm512_mask_storeu_ps(y + r * ldy + c, mask, v);
    }
  }
}
constexpr int kRowsPerTile = 6, kPanelsPerTile = 4;  // 24 of 32 zmm registers accumulate
constexpr int kOneRowPanels = 8;                        // one row: 8 independent sums in flight
#elif defined(__AVX2__) && defined(__FMA__)
inline __m256 load8(const float* w) { return _mm256_loadu_ps(w); }
inline __m256 load8(const uint16_t* w) {  // 8 halves widened: exact
#if defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
#else
  alignas(32) float f[8];
  for (int j = 0; j < 8; ++j) f[j] = half_to_float(w[j]);
  return _mm256_load_ps(f);
#endif
}
template <int MR, int PB, typename WT>
inline void tile(const float* x, int64_t lda, const WT* panels, int64_t K, const float* bias, bool relu, float* y,
                 int64_t ldy, int64_t col, int64_t n_total) {
  __m256 acc[MR][2 * PB];  // a panel is two ymm halves
  _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
    _Pragma("GCC unroll 16") for (int p = 0; p < 2 * PB; ++p) acc[r][p] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m256 w[2 * PB];
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
      w[2 * p] = load8(panels + (p * K + k) * kPanel);
      w[2 * p + 1] = load8(panels + (p * K + k) * kPanel + 8);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * lda + k);
      _Pragma("GCC unroll 16") for (int p = 0; p < 2 * PB; ++p) acc[r][p] = _mm256_fmadd_ps(a, w[p], acc[r][p]);
    }
  }
  _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
    const int64_t c = col + p * kPanel;
    const int64_t n = std::max<int64_t>(0, std::min<int64_t>(kPanel, n_total - c));
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
      alignas(32) float out[kPanel];
      _mm256_store_ps(out, acc[r][2 * p]);
      _mm256_store_ps(out + 8, acc[r][2 * p + 1]);
      for (int64_t j = 0; j < n; ++j) {
        float v = bias ? out[j] + bias[c + j] : out[j];
        y[r * ldy + c + j] = relu ? std::max(v, 0.0f) : v;
      }
    }
  }
}
// 12 of 16 ymm registers accumulate: 8 accumulators (4 rows) left the two FMA pipes waiting on their 4-cycle latency,
// and a 5-row call ran as 4 + 1 (Xeon as AVX2, half panels, the demo's layers: 5 rows 0.62-0.65x, 25 rows 0.91-0.93x
// the 4-row tiles' time; scripts/bench/packed_linear_time.py)
constexpr int kRowsPerTile = 6, kPanelsPerTile = 1;
constexpr int kOneRowPanels = 4;
#else
template <int MR, int PB, typename WT>
inline void tile(const float* x, int64_t lda, const WT* panels, int64_t K, const float* bias, bool relu, float* y,
                 int64_t ldy, int64_t col, int64_t n_total) {
  _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
    const int64_t c = col + p * kPanel;
    const int64_t n = std::min<int64_t>(kPanel, n_total - c);
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc = std::fma(x[r * lda + k], widen(panels[(p * K + k) * kPanel + j]), acc);
        float v = bias ? acc + bias[c + j] : acc;
        y[r * ldy + c + j] = relu ? std::max(v, 0.0f) : v;
      }
  }
}
constexpr int kRowsPerTile = 1, kPanelsPerTile = 1;
constexpr int kOneRowPanels = 1;
#endif

// Rows [0, rows) (rows <= MR) of one tile: the template for the exact row count.
template <int PB, typename WT>
inline void tile_rows(int64_t rows, const float* x, int64_t lda, const WT* panels, int64_t K, const float* bias,
                      bool relu, float* y, int64_t ldy, int64_t col, int64_t n_total) {
  switch (rows) {
#define FS_TILE_CASE(R) \
  case R: tile<(R <= kRowsPerTile ? R : 1), PB, WT>(x, lda, panels, K, bias, relu, y, ldy, col, n_total); break;
    FS_TILE_CASE(1) FS_TILE_CASE(2) FS_TILE_CASE(3) FS_TILE_CASE(4) FS_TILE_CASE(5) FS_TILE_CASE(6)
#undef FS_TILE_CASE
    default: TORCH_CHECK(false, "packed_linear: a tile of more rows than the kernel holds");
  }
}

}  // namespace

// From this many rows a call widens each group of half panels once into a float32 buffer (the L1/L2) and runs the
// float32 tiles on it, instead of widening in every tile's inner loop: there the conversions, one per panel vector a
// k-step for every 6-row tile, took the multiply-adds' issue slots (a 3+3 x 256 step's products on an Intel Xeon:
// 25 rows 1.04x the float32 panels' time, 50 rows 1.15x; widened once, 1.0x from 20 rows up, while below 20 the
// in-loop widening is the faster, 0.55x at 1-4 rows, 0.7-0.95x at 8-19). The same values, so the same bits.
constexpr int64_t kWidenRows = 20;

void widened_tiles(const float* xs, int64_t M, int64_t K, const uint16_t* ws, int64_t N, int64_t P, const float* bs,
                   bool relu, float* ys) {
  const int64_t groups = (P + kPanelsPerTile - 1) / kPanelsPerTile;
  at::parallel_for(0, groups, std::max<int64_t>(1, 4096 / (K * kPanelsPerTile)), [&](int64_t g0, int64_t g1) {
    // 64-byte aligned, as a tensor's panels are: a panel vector is one cache line, not two
    std::unique_ptr<float, decltype(&std::free)> buffer(
        static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(kPanelsPerTile * K * kPanel) * sizeof(float))),
        &std::free);
    TORCH_CHECK(buffer, "packed_linear: no memory for a widened panel group");
    float* w = buffer.get();
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t p0 = g * kPanelsPerTile, panels = std::min<int64_t>(kPanelsPerTile, P - p0);
      const uint16_t* from = ws + p0 * K * kPanel;
      for (int64_t i = 0; i < panels * K * kPanel; i += kPanel) widen16(from + i, w + i);
      for (int64_t m0 = 0; m0 < M; m0 += kRowsPerTile) {
        const int64_t rows = std::min<int64_t>(kRowsPerTile, M - m0);
        if (panels == kPanelsPerTile) {
          tile_rows<kPanelsPerTile, float>(rows, xs + m0 * K, K, w, K, bs, relu, ys + m0 * N, N, p0 * kPanel, N);
        } else {
          for (int64_t p = 0; p < panels; ++p)
            tile_rows<1, float>(rows, xs + m0 * K, K, w + p * K * kPanel, K, bs, relu, ys + m0 * N, N,
                                (p0 + p) * kPanel, N);
        }
      }
    }
  });
}

// y (M, N) = relu?(x (M, K) W^T + b) on raw buffers, float32 or half panels (raw_kernels.h's PackedLinearFn and
// PackedLinearHalfFn): the operator below and the native step's raw layers (decoder_step.cpp) call it.
template <typename WT>
void packed_raw(const float* xs, int64_t M, int64_t K, const WT* ws, int64_t N, const float* bs, bool relu,
                float* ys) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: the bias alone
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const float v = bs ? 0.0f + bs[n] : 0.0f;
        ys[m * N + n] = relu ? std::max(v, 0.0f) : v;
      }
    return;
  }
  const int64_t P = (N + kPanel - 1) / kPanel;
  if constexpr (std::is_same<WT, uint16_t>::value) {
    if (M >= kWidenRows) {  // many rows: widen each panel group once, then the float32 tiles over every row block
      widened_tiles(xs, M, K, ws, N, P, bs, relu, ys);
      return;
    }
  }
  fairseq_stream_ops::for_each_tile<kRowsPerTile, kPanelsPerTile, kOneRowPanels>(
      M, P, std::max<int64_t>(1, 16384 / K), std::max<int64_t>(1, 4096 / K),
      [&](int64_t m0, int64_t rows, int64_t p0, auto panels, auto one_row) {
        constexpr int PB = decltype(panels)::value;
        const WT* w = ws + p0 * K * kPanel;
        if constexpr (decltype(one_row)::value) {
          tile<1, PB, WT>(xs, K, w, K, bs, relu, ys, N, p0 * kPanel, N);
        } else {
          tile_rows<PB, WT>(rows, xs + m0 * K, K, w, K, bs, relu, ys + m0 * N, N, p0 * kPanel, N);
        }
      });
}

void packed_linear_raw(const float* xs, int64_t M, int64_t K, const float* ws, int64_t N, const float* bs, bool relu,
                       float* ys) {
  packed_raw<float>(xs, M, K, ws, N, bs, relu, ys);
}
void packed_linear_half_raw(const float* xs, int64_t M, int64_t K, const uint16_t* ws, int64_t N, const float* bs,
                            bool relu, float* ys) {
  packed_raw<uint16_t>(xs, M, K, ws, N, bs, relu, ys);
}

// W (N, K) float32 -> panels (ceil(N / 16), K, 16), zero-padded.
torch::Tensor packed_linear_pack(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat && weight.device().is_cpu(),
              "packed_linear_pack: a (N, K) float32 CPU weight");
  const torch::Tensor w = weight.contiguous();
  const int64_t N = w.size(0), K = w.size(1), P = (N + kPanel - 1) / kPanel;
  torch::Tensor packed = torch::zeros({P, K, kPanel}, w.options());
  const float* from = w.data_ptr<float>();
  float* to = packed.data_ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) to[((n / kPanel) * K + k) * kPanel + n % kPanel] = from[n * K + k];
  return packed;
}

// x (..., K) float32 -> y (..., N) = relu?(x W^T + b); `packed` from packed_linear_pack (float32 panels) or its
// exact float16 copy (half panels), N its weight's rows.
torch::Tensor packed_linear(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias,
                            int64_t out_features, bool relu) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.device().is_cpu(), "packed_linear: float32 CPU input");
  TORCH_CHECK(packed.dim() == 3 && packed.size(2) == kPanel && packed.is_contiguous() &&
              (packed.scalar_type() == torch::kFloat || packed.scalar_type() == torch::kHalf),
              "packed_linear: packed panels, float32 or float16");
  const int64_t K = packed.size(1), N = out_features, P = packed.size(0);
  TORCH_CHECK(x.size(-1) == K, "packed_linear: input has ", x.size(-1), " features, the weight ", K);
  TORCH_CHECK(P == (N + kPanel - 1) / kPanel, "packed_linear: out_features does not match the panels");
  TORCH_CHECK(!bias.has_value() || (bias->numel() == N && bias->is_contiguous() && bias->scalar_type() == torch::kFloat),
              "packed_linear: a contiguous float32 bias of out_features");
  const torch::Tensor a = x.contiguous();
  int64_t M = 1;  // the rows: every dimension but the last (numel / K would divide by zero at K = 0)
  for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = N;
  torch::Tensor y = torch::empty(shape, x.options());
  const float* b = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  if (packed.scalar_type() == torch::kHalf) {
    packed_linear_half_raw(a.data_ptr<float>(), M, K, reinterpret_cast<const uint16_t*>(packed.data_ptr<at::Half>()),
                           N, b, relu, y.data_ptr<float>());
  } else {
    packed_linear_raw(a.data_ptr<float>(), M, K, packed.data_ptr<float>(), N, b, relu, y.data_ptr<float>());
  }
  return y;
}

// The address of packed_linear_raw (a PackedLinearFn), for the native step.
int64_t packed_linear_entry() {
  const fairseq_stream_ops::PackedLinearFn fn = &packed_linear_raw;
  return reinterpret_cast<int64_t>(fn);
}
// ... and of packed_linear_half_raw (a PackedLinearHalfFn).
int64_t packed_linear_half_entry() {
  const fairseq_stream_ops::PackedLinearHalfFn fn = &packed_linear_half_raw;
  return reinterpret_cast<int64_t>(fn);
}

TORCH_LIBRARY_FRAGMENT(fairseq_stream, m) {
  m.def("packed_linear_pack(Tensor weight) -> Tensor");
  m.def("packed_linear(Tensor x, Tensor packed, Tensor? bias, int out_features, bool relu=False) -> Tensor");
  m.def("packed_linear_entry() -> int", &packed_linear_entry);
  m.def("packed_linear_half_entry() -> int", &packed_linear_half_entry);
}
TORCH_LIBRARY_IMPL(fairseq_stream, CPU, m) {
  m.impl("packed_linear_pack", &packed_linear_pack);
  m.impl("packed_linear", &packed_linear);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
