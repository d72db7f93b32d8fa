// Attention of one query per row and head, as a decoder step asks it (b = 1; a causal block of b
// queries comes as b rows sharing their keys, each with its own `last`): for row r and
// head h, softmax(scale * q[r,h] . K[n,h,j]) over the visible keys j, times V[n,h,j], where
// n = kv_row[r] (the row's own cache for self-attention, its sentence's encoder states for
// encoder attention, shared by all the sentence's rows without a copy). Keys are visible for
// j < L, and j <= last[r] when `last` is given (rows of different lengths), and where
// `key_padding[n, j]` is false when it is given (padded source positions).
//
// Given `row_table` (N, >= L), key j of n is not in buffer row n but in buffer row row_table[n, j]:
// the caches that never move (model/row_arena.py), where a beam reorder copies that table
// and not the keys and values. Both layouts address each key through one pointer, so the arithmetic
// is the same instructions in the same order whichever layout holds the keys.
//
// PyTorch's CPU attention runs this shape (a 1-row query block) at about 6 GB/s of keys and
// values; this kernel streams each (row, head)'s keys, then its values, once, vectorised over
// the head dimension. Every (row, head) is computed alone, by the same instructions whatever
// the batch: a row's result does not depend on the rows beside it (var-stream = var-batch).
// Masked keys are skipped, never given -inf (the build uses -ffast-math, see fused_output.py).
#include "step_common.h"
#include "raw_kernels.h"
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

// Floats in the widest vector the kernel is built for (AVX-512); a multiple of narrower ones.
constexpr int64_t kExpWidth = 16;

// Keys visible to a row: j < L, j <= last (when last >= 0), not padded.
static inline bool hidden(int64_t j, int64_t last, const bool* padding) {
  return (last >= 0 && j > last) || (padding != nullptr && padding[j]);
}

// Keys and values of one (row, head) as one pointer per key (Kp[j], Vp[j]: D floats each).
static void attend_one(const float* q, const float* const* Kp, const float* const* Vp, int64_t L, int64_t D,
                       float scale, const bool* padding, int64_t last, float* out, std::vector<float>& scores) {
  // Only the span from the first to the last visible key is read, counted from its first key:
  // the result depends on the visible keys alone, never on where they sit in the buffer or on
  // its length (the same vector groups and tails). A query at position t then gets the bits of
  // the decoder step at t inside a block (Jacobi, speculative), and a sentence's encoder states
  // the same bits whatever the block it was encoded in and the slot buffer's width.
  int64_t lo = 0, hi = last >= 0 ? std::min(L, last + 1) : L;
  if (padding != nullptr) {
    while (lo < hi && padding[lo]) ++lo;
    while (hi > lo && padding[hi - 1]) --hi;
    padding += lo;
  }
  Kp += lo;
  Vp += lo;
  L = std::max<int64_t>(hi - lo, 0);
  last = -1;  // the span ends at the last visible key
  // A hidden key inside the span (a padded position between visible ones) is rare: without one the
  // loops below test no key (the maximum and the weights are the same numbers either way).
  if (padding != nullptr && std::none_of(padding, padding + L, [](bool p) { return p; })) padding = nullptr;
  // Whole vectors for the exp below (16 floats, the widest SIMD): every weight comes from the
  // vectorised exp, none from the scalar one a loop's tail would call (~20 cycles a key).
  const int64_t padded = (L + kExpWidth - 1) / kExpWidth * kExpWidth;
  scores.resize(padded);
  float* s = scores.data();
  // Scores, four keys at a time: independent sums keep the vector units busy (one key's sum
  // is a chain of dependent adds ending in a horizontal reduction).
  int64_t j = 0;
  for (; j + 4 <= L; j += 4) {
    const float *k0 = Kp[j], *k1 = Kp[j + 1], *k2 = Kp[j + 2], *k3 = Kp[j + 3];
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
    for (int64_t d = 0; d < D; ++d) {
      a0 += q[d] * k0[d];
      a1 += q[d] * k1[d];
      a2 += q[d] * k2[d];
      a3 += q[d] * k3[d];
    }
    s[j] = a0 * scale;
    s[j + 1] = a1 * scale;
    s[j + 2] = a2 * scale;
    s[j + 3] = a3 * scale;
  }
  for (; j < L; ++j) {
    const float* k = Kp[j];
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (int64_t d = 0; d < D; ++d) a += q[d] * k[d];
    s[j] = a * scale;
  }
  const float lowest = std::numeric_limits<float>::lowest();
  float m = lowest;
  int64_t visible = 0;
  if (padding == nullptr) {
    for (j = 0; j < L; ++j) m = s[j] > m ? s[j] : m;
    visible = L;
  } else {
    for (j = 0; j < L; ++j) {
      if (hidden(j, last, padding)) continue;
      m = s[j] > m ? s[j] : m;
      ++visible;
    }
  }
  for (int64_t d = 0; d < D; ++d) out[d] = 0;
  if (visible == 0) return;  // no key to attend to: zeros (never the case in a decoder step)
  // Weights (a vectorised exp; hidden keys weigh 0 and never enter exp), then their sum.
  for (j = L; j < padded; ++j) s[j] = m;  // the tail of the last vector: weighed, never summed
#pragma omp simd
  for (j = 0; j < padded; ++j) s[j] = std::exp(std::min(s[j] - m, 0.0f));  // hidden keys may score above m
  if (padding != nullptr)
    for (j = 0; j < L; ++j)
      if (hidden(j, last, padding)) s[j] = 0;
  float total = 0;
  for (j = 0; j < L; ++j) total += s[j];
  // Values, four keys per pass over the output row.
  for (j = 0; j + 4 <= L; j += 4) {
    const float *v0 = Vp[j], *v1 = Vp[j + 1], *v2 = Vp[j + 2], *v3 = Vp[j + 3];
    const float p0 = s[j], p1 = s[j + 1], p2 = s[j + 2], p3 = s[j + 3];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) out[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
  }
  for (; j < L; ++j) {
    const float* v = Vp[j];
    const float p = s[j];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
  }
  const float inv = 1.0f / total;
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) out[d] *= inv;
}

// One call on raw buffers (raw_kernels.h's AttentionFn): the operator below and the native step's raw layers
// (decoder_step.cpp) call it.
void decode_attention_raw(const fairseq_stream_ops::AttentionArgs& a) {
  const float* pq = a.q;
  const float* pk = a.k;
  const float* pv = a.v;
  const int64_t* prow = a.kv_row;
  const int64_t* pend = a.last;
  const bool* ppad = a.padding;
  const int64_t pad_stride = a.pad_stride;
  const int64_t* ptable = a.table;
  const int64_t table_rows = a.table_rows, table_stride = a.table_stride;
  float* po = a.out;
  const int64_t R = a.R, H = a.H, D = a.D, N = a.N, L = a.L, sn = a.sn, sh = a.sh;
  at::parallel_for(0, R * H, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;  // reused: at one row a call's mallocs cost as much as its arithmetic
    thread_local std::vector<const float*> kp, vp;
    thread_local std::vector<int64_t> offset;  // of each key of the current row's buffer row, head 0
    kp.resize(L);
    vp.resize(L);
    offset.resize(L);
    int64_t offsets_of = -1;  // the row `offset` was computed for: its heads follow one another
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = i / H, h = i % H;
      const int64_t n = prow ? prow[r] : r;
      if (n != offsets_of) {  // checked once per row, not once per head
        if (ptable != nullptr) {
          TORCH_CHECK(n >= 0 && n < table_rows, "kv_row out of the row table");
          const int64_t* held = ptable + n * table_stride;  // the buffer row of each key
          for (int64_t j = 0; j < L; ++j) {
            TORCH_CHECK(held[j] >= 0 && held[j] < N, "row_table out of range");
            offset[j] = held[j] * sn + j * D;
          }
        } else {
          TORCH_CHECK(n >= 0 && n < N, "kv_row out of range");
          for (int64_t j = 0; j < L; ++j) offset[j] = n * sn + j * D;
        }
        offsets_of = n;
      }
      for (int64_t j = 0; j < L; ++j) {
        kp[j] = pk + offset[j] + h * sh;
        vp[j] = pv + offset[j] + h * sh;
      }
      attend_one(pq + r * a.q_row + h * D, kp.data(), vp.data(), L, D, a.scale,
                 ppad ? ppad + n * pad_stride : nullptr, pend ? pend[r] : -1, po + i * D, scores);
    }
  });
}

torch::Tensor decode_attention(const torch::Tensor& query, const torch::Tensor& keys, const torch::Tensor& values,
                               const c10::optional<torch::Tensor>& kv_row, const c10::optional<torch::Tensor>& last,
                               const c10::optional<torch::Tensor>& key_padding, double scale,
                               const c10::optional<torch::Tensor>& row_table) {
  TORCH_CHECK(query.dim() == 3 && keys.dim() == 4 && values.dim() == 4, "query (R, H, D), keys/values (N, H, L, D)");
  TORCH_CHECK(query.scalar_type() == torch::kFloat && keys.scalar_type() == torch::kFloat &&
              values.scalar_type() == torch::kFloat, "float32 only");
  TORCH_CHECK(keys.sizes() == values.sizes() && keys.strides() == values.strides(), "keys and values alike");
  TORCH_CHECK(keys.stride(3) == 1 && keys.stride(2) == keys.size(3), "each head's keys contiguous");
  auto q = query.contiguous();
  const int64_t R = q.size(0), H = q.size(1), D = q.size(2), N = keys.size(0), L = keys.size(2);
  TORCH_CHECK(keys.size(1) == H && keys.size(3) == D, "query and keys differ in heads or head size");
  torch::Tensor rows, ends, pad, table;
  if (kv_row.has_value()) rows = kv_row->to(torch::kLong).contiguous();
  else TORCH_CHECK(N == R || row_table.has_value(), "without kv_row (or a row table) every row has its own keys");
  if (last.has_value()) ends = last->to(torch::kLong).contiguous();
  if (key_padding.has_value()) {
    pad = key_padding->to(torch::kBool).contiguous();
    TORCH_CHECK(pad.dim() == 2 && pad.size(0) == N && pad.size(1) >= L, "key_padding (N, L)");
  }
  if (row_table.has_value()) {
    table = row_table->to(torch::kLong).contiguous();
    TORCH_CHECK(table.dim() == 2 && table.size(1) >= L, "row_table (N, >= L)");
  }
  auto out = torch::empty({R, H, D}, q.options());
  decode_attention_raw({q.data_ptr<float>(), H * D, R, H, D, keys.data_ptr<float>(), values.data_ptr<float>(), N, L,
                        keys.stride(0), keys.stride(1), rows.defined() ? rows.data_ptr<int64_t>() : nullptr,
                        ends.defined() ? ends.data_ptr<int64_t>() : nullptr, pad.defined() ? pad.data_ptr<bool>() : nullptr,
                        pad.defined() ? pad.size(1) : 0, table.defined() ? table.data_ptr<int64_t>() : nullptr,
                        table.defined() ? table.size(0) : 0, table.defined() ? table.size(1) : 0,
                        static_cast<float>(scale), out.data_ptr<float>()});
  return out;
}

// The address of decode_attention_raw (an AttentionFn), for the native step.
int64_t decode_attention_entry() {
  const fairseq_stream_ops::AttentionFn fn = &decode_attention_raw;
  return reinterpret_cast<int64_t>(fn);
}

FAIRSEQ_STREAM_CPU_OPERATOR(decode_attention,
                            "(Tensor query, Tensor keys, Tensor values, Tensor? kv_row, Tensor? last, "
                            "Tensor? key_padding, float scale, Tensor? row_table=None) -> Tensor")
TORCH_LIBRARY_FRAGMENT(fairseq_stream, m) { m.def("decode_attention_entry() -> int", &decode_attention_entry); }
