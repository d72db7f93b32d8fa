// --quantize int8 with one activation scale per row (fairseq_stream/ops/int8_rows.py, fairseq_stream/model/quantize.py):
// our own int8 product, whose result is the same for every row count, thread count and instruction set.
//
//   y[r][n] = relu?( ((float)S[r][n] * s_w[n]) * (m_r / L) + b[n] ),  S[r][n] = sum_k q[r][k] * W_q[n][k]
//
// m_r = max_k |x[r][k]| (1 for an all-zero row), q[r][k] = nearbyint((x[r][k] / m_r) * L) in [-L, L] with
// L = 127 (8-bit activations) or 63 (7 bits, FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7), W_q the int8 weights
// with one scale s_w[n] per output channel. S is an integer sum (exact in 32 bits: |S| <= 127 * 127 * K),
// so it is the same whatever the order, the tile or the SIMD width; the rest is per element in the
// order written (-ffp-contract=off: no fused multiply-add). A row's result never depends on the other
// rows of the call (what keeps var-stream == var-batch and Jacobi == greedy exact under int8), and the
// AVX-512 VNNI, AVX2 and scalar builds give the same bits (tests/unit/test_quantize.py builds all three).
// A row with a NaN or an infinity gives NaN (before the ReLU).
//
// Why not fbgemm's int8 product (the kernel before, through PyTorch's packed parameters): at the one
// to few rows of a batch-1 or k = 5 step its per-call work (packing the activations, its requantisation,
// its kernel cache's lookup) cost more than the arithmetic, and on CPUs without VNNI its 16-bit pair
// sums saturate with 8-bit activations (7 bits were used there: other hypotheses per CPU kind).
//
// Packing: W_q (N, K) as nn.Linear holds it, into panels of 16 columns by groups of 4 inputs,
// (ceil(N / 16), ceil(K / 4), 16, 4): one 64-byte load is 4 inputs of 16 columns, vpdpbusd's layout
// (it multiplies 4 unsigned bytes of the row by 4 signed bytes of a column into one 32-bit sum). The
// VNNI build stores q + 128 (unsigned) and subtracts 128 * sum_k W_q[n][k]; the AVX2 build moves the signs onto
// one side (vpsignb) and multiplies magnitudes by signed bytes into exact 16-bit pairs (vpmaddubsw, see tile); the
// scalar build multiplies ints.
#include <torch/extension.h>
#include "panel_tiles.h"
#include "raw_kernels.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__AVX512VNNI__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

using torch::Tensor;

constexpr int64_t kPanel = 16, kGroup = 4;

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
using Act = uint8_t;  // q + 128
constexpr int32_t kActOffset = 128;
constexpr int kRowsPerTile = 4, kPanelsPerTile = 4, kOneRowPanels = 8;

inline int32_t load4(const Act* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// S (plus 128 * the column sums) of rows [0, MR) x panels [0, PB) into s (MR, 16 PB). A function of its own: inlined
// into int8_linear_raw's tile lambda, GCC kept the panel vectors on the stack (4 rows, 6024 x 256: 46 µs a call, 40 as
// its own function with them pinned in registers).
template <int MR, int PB>
__attribute__((noinline)) void tile(const Act* x, int64_t ldx, const int8_t* panels, int64_t G, int32_t* s) {
  __m512i acc[MR][PB];
  _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) acc[r][p] = _mm512_setzero_si512();
  for (int64_t g = 0; g < G; ++g) {
    __m512i w[PB];
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
      w[p] = _mm512_loadu_si512(panels + (p * G + g) * kPanel * kGroup);
      fairseq_stream_ops::pin_for_rows<MR>(w[p]);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
      const __m512i a = _mm512_set1_epi32(load4(x + r * ldx + g * kGroup));
      _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], a, w[p]);
    }
  }
  _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p)
      _mm512_storeu_si512(s + r * PB * kPanel + p * kPanel, acc[r][p]);
}
#elif defined(__AVX2__)
using Act = int8_t;
constexpr int32_t kActOffset = 0;
constexpr int kRowsPerTile = 4, kPanelsPerTile = 1, kOneRowPanels = 4;

inline __m256i broadcast4(const Act* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 8 columns' sums of 4 inputs: vpmaddubsw multiplies unsigned bytes `u` by signed bytes `v` into 16-bit pair
// sums (no saturation: |pair| <= 2 * 128 * 127 < 2^15), vpmaddwd by ones adds the pairs into 32 bits.
inline __m256i column_sums(__m256i u, __m256i v) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), _mm256_set1_epi16(1));
}

// |W| (0..128 fits an unsigned byte) times q carrying W's sign (vpsignb; |q| <= 127, so never the -128 that vpsignb
// cannot negate): exact for every weight. Several rows take |W| once a group for all MR rows; one row takes it per
// weight vector and reads every half panel of its PB panels at each group (q broadcast once a group, each 64-byte
// line read once, PB lines in flight). Against widening both to 16 bits for vpmaddwd (the kernel before), the
// operator at 8000 x 256 on a Xeon as AVX2 (scripts/bench/int8_linear_time.py): 1 / 4 / 35 rows 72 -> 62, 163 -> 134,
// 1193 -> 1036 us a call; the demo's int8 batch-1 C++ step 192 -> 177 us (its weights come from L3: the bytes, not
// the operations, bound it).
// Moving q's sign onto W instead saves |W| at one row but leaves -128 wrong where q < 0: fixing those up after the
// tile cost more than it saved (199 us a step).
template <int MR, int PB>
inline void tile(const Act* x, int64_t ldx, const int8_t* panels, int64_t G, int32_t* s) {
  if constexpr (MR == 1) {
    __m256i acc[PB][2];
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) acc[p][0] = acc[p][1] = _mm256_setzero_si256();
    for (int64_t g = 0; g < G; ++g) {
      const __m256i q = broadcast4(x + g * kGroup);
      _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
        const int8_t* at = panels + (p * G + g) * kPanel * kGroup;
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; ++h) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 32 * h));
          acc[p][h] = _mm256_add_epi32(acc[p][h], column_sums(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w)));
        }
      }
    }
    _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p)
      for (int h = 0; h < 2; ++h) _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + p * kPanel + 8 * h), acc[p][h]);
    return;
  }
  _Pragma("GCC unroll 16") for (int p = 0; p < PB; ++p) {
    __m256i acc[MR][2];  // columns 0..7 and 8..15 of the panel
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t g = 0; g < G; ++g) {
      const int8_t* at = panels + (p * G + g) * kPanel * kGroup;
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 32));
      const __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {
        const __m256i q = broadcast4(x + r * ldx + g * kGroup);
        acc[r][0] = _mm256_add_epi32(acc[r][0], column_sums(u0, _mm256_sign_epi8(q, w0)));
        acc[r][1] = _mm256_add_epi32(acc[r][1], column_sums(u1, _mm256_sign_epi8(q, w1)));
      }
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r)
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * PB * kPanel + p * kPanel + 8 * h), acc[r][h]);
  }
}
#else
using Act = int16_t;
constexpr int32_t kActOffset = 0;
constexpr int kRowsPerTile = 1, kPanelsPerTile = 1, kOneRowPanels = 1;

template <int MR, int PB>
inline void tile(const Act* x, int64_t ldx, const int8_t* panels, int64_t G, int32_t* s) {
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < PB; ++p)
      for (int64_t j = 0; j < kPanel; ++j) {
        int32_t sum = 0;
        for (int64_t g = 0; g < G; ++g)
          for (int64_t i = 0; i < kGroup; ++i)
            sum += static_cast<int32_t>(x[r * ldx + g * kGroup + i]) *
                   static_cast<int32_t>(panels[((p * G + g) * kPanel + j) * kGroup + i]);
        s[r * PB * kPanel + p * kPanel + j] = sum;
      }
}
#endif

// The file's formula from S: rows [0, rows) of s (stride lds) into y's columns [col, col + n).
void finish(const int32_t* s, int64_t lds, int64_t rows, int64_t col, int64_t n, const int32_t* offset,
            const float* wscale, const float* rscale, const float* bias, bool relu, float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) {
    const float rs = rscale[r];
    float* out = y + r * ldy + col;
    const int32_t* sr = s + r * lds;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      float v = static_cast<float>(sr[j] - offset[col + j]) * wscale[col + j];
      v = v * rs;
      if (bias != nullptr) v = v + bias[col + j];
      out[j] = relu ? (v > 0.f ? v : 0.f) : v;
    }
  }
}

// Rows [0, rows) (rows <= MR), panels [0, PB): the template for the exact row count.
template <int PB>
void tile_rows(int64_t rows, const Act* x, int64_t ldx, const int8_t* panels, int64_t G, int32_t* s) {
  switch (rows) {
#define FS_TILE_CASE(R) \
  case R: tile<(R <= kRowsPerTile ? R : 1), PB>(x, ldx, panels, G, s); break;
    FS_TILE_CASE(1) FS_TILE_CASE(2) FS_TILE_CASE(3) FS_TILE_CASE(4)
#undef FS_TILE_CASE
    default: TORCH_CHECK(false, "int8_row_linear: a tile of more rows than the kernel holds");
  }
}

}  // namespace

// W_q (N, K) int8 -> (panels (ceil(N / 16), ceil(K / 4), 16, 4) int8, zero-padded; the column offsets
// (16 ceil(N / 16),) int32: 128 * sum_k W_q[n][k] where the build multiplies q + 128, else 0).
std::tuple<Tensor, Tensor> int8_rows_pack(const Tensor& qweight) {
  TORCH_CHECK(qweight.dim() == 2 && qweight.scalar_type() == torch::kChar && qweight.device().is_cpu(),
              "int8_rows_pack: a (N, K) int8 CPU weight");
  const Tensor w = qweight.contiguous();
  const int64_t N = w.size(0), K = w.size(1), P = (N + kPanel - 1) / kPanel, G = (K + kGroup - 1) / kGroup;
  Tensor packed = torch::zeros({P, G, kPanel, kGroup}, w.options());
  Tensor offset = torch::zeros({P * kPanel}, w.options().dtype(torch::kInt));
  const int8_t* from = w.data_ptr<int8_t>();
  int8_t* to = packed.data_ptr<int8_t>();
  int32_t* off = offset.data_ptr<int32_t>();
  for (int64_t n = 0; n < N; ++n) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      to[(((n / kPanel) * G + k / kGroup) * kPanel + n % kPanel) * kGroup + k % kGroup] = from[n * K + k];
      sum += from[n * K + k];
    }
    off[n] = kActOffset * sum;
  }
  return {packed, offset};
}

// y (M, N) of x (M, K), K > 0, on raw buffers (raw_kernels.h's Int8LinearFn): the operator below and the native
// step's raw layers (decoder_step.cpp) call it.
void int8_linear_raw(const float* xs, int64_t M, int64_t K, const int8_t* ws, int64_t P, int64_t G,
                     const int32_t* off, const float* sw, const float* bs, int64_t N, bool relu, int64_t levels,
                     float* ys) {
  if (M == 0 || N == 0) return;
  // The rows quantised once: q (+ 128 for VNNI), zero-padded to whole groups; their scales m_r / L.
  const int64_t ldx = G * kGroup;
  thread_local std::vector<Act> q;  // reused: a call at one row cost a malloc as much as its quantisation
  thread_local std::vector<float> rscale;
  q.assign(M * ldx, static_cast<Act>(kActOffset));
  rscale.resize(M);
  const float L = static_cast<float>(levels);
  // nearbyint by the float trick (x + 1.5 2^23) - 1.5 2^23: ties to even for |x| < 2^22, two exact-order IEEE
  // operations that vectorise (std::nearbyint does not), as torch.round rounds.
  constexpr float kRound = 12582912.0f;
  for (int64_t r = 0; r < M; ++r) {
    const float* row = xs + r * K;
    float m = 0.f, probe = 0.f;  // probe: NaN iff the row has a NaN or an infinity (order does not matter)
#pragma omp simd reduction(max : m) reduction(+ : probe)
    for (int64_t k = 0; k < K; ++k) {
      m = std::max(m, std::fabs(row[k]));
      probe += row[k] * 0.f;
    }
    if (probe != 0.f) {  // q stays 0: the row's NaN comes from its scale
      rscale[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    if (m == 0.f) m = 1.f;  // an all-zero row stays zero
    rscale[r] = m / L;
    Act* dst = q.data() + r * ldx;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) {
      const float t = (row[k] / m) * L;
      const float rounded = (t + kRound) - kRound;
      dst[k] = static_cast<Act>(static_cast<int32_t>(rounded) + kActOffset);
    }
  }
  const Act* xq = q.data();
  const int64_t panel_bytes = G * kPanel * kGroup;
  const float* rs = rscale.data();
  fairseq_stream_ops::for_each_tile<kRowsPerTile, kPanelsPerTile, kOneRowPanels>(
      M, P, std::max<int64_t>(1, 65536 / K), std::max<int64_t>(1, 16384 / K),
      [&](int64_t m0, int64_t rows, int64_t p0, auto panels, auto one_row) {
        constexpr int PB = decltype(panels)::value;
        int32_t s[kRowsPerTile * PB * kPanel];  // S of the tile (one row: its PB panels)
        const int8_t* w = ws + p0 * panel_bytes;
        if constexpr (decltype(one_row)::value) {
          tile<1, PB>(xq, ldx, w, G, s);
        } else {
          tile_rows<PB>(rows, xq + m0 * ldx, ldx, w, G, s);
        }
        finish(s, PB * kPanel, rows, p0 * kPanel, std::min<int64_t>(PB * kPanel, N - p0 * kPanel), off, sw, rs + m0,
               bs, relu, ys + m0 * N, N);
      });
}

// x (..., K) float32 -> (..., N): the file's formula. `levels` is L (127 or 63).
Tensor int8_row_linear(const Tensor& x, const Tensor& packed, const Tensor& offset, const Tensor& wscale,
                       const c10::optional<Tensor>& bias, int64_t out_features, bool relu, int64_t levels) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.device().is_cpu(), "int8_row_linear: float32 CPU input");
  TORCH_CHECK(packed.dim() == 4 && packed.size(2) == kPanel && packed.size(3) == kGroup && packed.is_contiguous() &&
                  packed.scalar_type() == torch::kChar,
              "int8_row_linear: packed int8 panels (int8_rows_pack)");
  const int64_t P = packed.size(0), G = packed.size(1), N = out_features, K = x.size(-1);
  TORCH_CHECK(G == (K + kGroup - 1) / kGroup, "int8_row_linear: input has ", K, " features, the weight ", G * kGroup);
  TORCH_CHECK(P == (N + kPanel - 1) / kPanel, "int8_row_linear: out_features does not match the panels");
  TORCH_CHECK(offset.numel() == P * kPanel && offset.is_contiguous() && offset.scalar_type() == torch::kInt,
              "int8_row_linear: the column offsets of int8_rows_pack");
  TORCH_CHECK(wscale.numel() == N && wscale.is_contiguous() && wscale.scalar_type() == torch::kFloat,
              "int8_row_linear: a float32 scale per output channel");
  TORCH_CHECK(!bias.has_value() || (bias->numel() == N && bias->is_contiguous() && bias->scalar_type() == torch::kFloat),
              "int8_row_linear: a contiguous float32 bias of out_features");
  TORCH_CHECK(levels >= 1 && levels <= 127, "int8_row_linear: levels in [1, 127]");
  const Tensor a = x.contiguous();
  const int64_t M = K == 0 ? 0 : a.numel() / K;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = N;
  Tensor y = torch::empty(shape, x.options());
  if (y.numel() == 0) return y;
  if (K == 0) {  // an empty sum: the bias alone
    y.zero_();
    if (bias.has_value()) y.add_(*bias);
    if (relu) y.clamp_min_(0);
    return y;
  }
  int8_linear_raw(a.data_ptr<float>(), M, K, packed.data_ptr<int8_t>(), P, G, offset.data_ptr<int32_t>(),
                  wscale.data_ptr<float>(), bias.has_value() ? bias->data_ptr<float>() : nullptr, N, relu, levels,
                  y.data_ptr<float>());
  return y;
}

// The address of int8_linear_raw (an Int8LinearFn), for the native step.
int64_t int8_row_linear_entry() {
  const fairseq_stream_ops::Int8LinearFn fn = &int8_linear_raw;
  return reinterpret_cast<int64_t>(fn);
}

TORCH_LIBRARY_FRAGMENT(fairseq_stream, m) {
  m.def("int8_rows_pack(Tensor qweight) -> (Tensor, Tensor)");
  m.def("int8_row_linear(Tensor x, Tensor packed, Tensor offset, Tensor wscale, Tensor? bias, int out_features, "
        "bool relu, int levels) -> Tensor");
  m.def("int8_row_linear_entry() -> int", &int8_row_linear_entry);
}
TORCH_LIBRARY_IMPL(fairseq_stream, CPU, m) {
  m.impl("int8_rows_pack", &int8_rows_pack);
  m.impl("int8_row_linear", &int8_row_linear);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
