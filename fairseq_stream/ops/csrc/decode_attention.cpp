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
// values; this kernel streams each (row, head)'s keys, then its values, vectorised over the head
// dimension. At a few dozen keys a row the step's attention is bound by reading the cache (a beam's
// slots lie scattered over its ancestors' buffer rows), so the rows of one sentence go together,
// 16 keys at a time: what the first row reads from memory, the next find in the L1 cache (the
// sentence's encoder states, the beam's common prefix, a block's own row), and the next chunk's
// keys are prefetched. Every (row, head) is still computed alone, by the same instructions in the
// same order whatever the batch and whatever rows share its group: a row's result does not depend
// on the rows beside it (var-stream = var-batch). Masked keys are skipped, never given -inf (the
// build uses -ffast-math, see fused_output.py).
#include "step_common.h"
#include "raw_kernels.h"
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

// Floats in the widest vector the kernel is built for (AVX-512); a multiple of narrower ones.
constexpr int64_t kExpWidth = 16;

// The visible span of one (row, head): keys j in [lo, hi) of the L slots, and whether a hidden key lies inside it.
struct Span {
  int64_t lo, hi;
  const bool* padding;  // from key lo, or null when no key inside the span is hidden
};

static inline Span visible_span(int64_t L, int64_t last, const bool* padding) {
  // Only the span from the first to the last visible key is read, counted from its first key:
  // the result depends on the visible keys alone, never on where they sit in the buffer or on
  // its length. A query at position t then gets the bits of the decoder step at t inside a block
  // (Jacobi, speculative), and a sentence's encoder states the same bits whatever the block it
  // was encoded in and the slot buffer's width.
  int64_t lo = 0, hi = last >= 0 ? std::min(L, last + 1) : L;
  if (padding != nullptr) {
    while (lo < hi && padding[lo]) ++lo;
    while (hi > lo && padding[hi - 1]) --hi;
    padding += lo;
    // A hidden key inside the span (a padded position between visible ones) is rare: without one the
    // loops test no key (the maximum and the weights are the same numbers either way).
    if (std::none_of(padding, padding + (hi - lo), [](bool p) { return p; })) padding = nullptr;
  }
  return {lo, std::max(hi, lo), padding};
}

// softmax in place over the span's n scores (padded to whole vectors of kExpWidth): hidden keys weigh 0 and never
// enter the maximum; returns the weights' sum (0 when no key is visible).
static float softmax_weights(float* s, int64_t n, const bool* padding) {
  const float lowest = std::numeric_limits<float>::lowest();
  float m = lowest;
  int64_t visible = 0;
  if (padding == nullptr) {
    for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
    visible = n;
  } else {
    for (int64_t j = 0; j < n; ++j) {
      if (padding[j]) continue;
      m = s[j] > m ? s[j] : m;
      ++visible;
    }
  }
  if (visible == 0) return 0;  // no key to attend to (never the case in a decoder step)
  // Whole vectors for the exp (16 floats, the widest SIMD): every weight comes from the vectorised
  // exp, none from the scalar one a loop's tail would call (~20 cycles a key).
  const int64_t padded = (n + kExpWidth - 1) / kExpWidth * kExpWidth;
  for (int64_t j = n; j < padded; ++j) s[j] = m;  // the tail of the last vector: weighed, never summed
#pragma omp simd
  for (int64_t j = 0; j < padded; ++j) s[j] = std::exp(std::min(s[j] - m, 0.0f));  // hidden keys may score above m
  if (padding != nullptr)
    for (int64_t j = 0; j < n; ++j)
      if (padding[j]) s[j] = 0;
  float total = 0;
  for (int64_t j = 0; j < n; ++j) total += s[j];
  return total;
}

// One query of a group: its row's keys and values at K / V + at[j] for the span's n keys, its padding (null when no
// key inside the span is hidden), its scores (whole groups of 16 floats) and its output row.
struct Query {
  const float* q;
  const int64_t* at;
  int64_t n;
  const bool* padding;
  float* s;
  float* out;
};

// Rows of a group (one sentence's), and the keys a pass over the group reads while they are in the L1 cache: the
// queries after the first find there the keys and values they share with it (a sentence's encoder states, a beam's
// common prefix, a block's own row).
constexpr int64_t kMaxRows = 8;
constexpr int64_t kChunk = 16;

// Any head size: keys and values of one (row, head) at K / V + at[j] (the span's keys only).
static void attend_any(const float* q, const float* K, const float* V, const int64_t* at, int64_t n, int64_t D,
                       float scale, const bool* padding, float* out, float* s) {
  // Scores, four keys at a time: independent sums keep the vector units busy (one key's sum
  // is a chain of dependent adds ending in a horizontal reduction).
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *k0 = K + at[j], *k1 = K + at[j + 1], *k2 = K + at[j + 2], *k3 = K + at[j + 3];
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
  for (; j < n; ++j) {
    const float* k = K + at[j];
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (int64_t d = 0; d < D; ++d) a += q[d] * k[d];
    s[j] = a * scale;
  }
  for (int64_t d = 0; d < D; ++d) out[d] = 0;
  const float total = softmax_weights(s, n, padding);
  if (total == 0) return;
  // Values, four keys per pass over the output row.
  for (j = 0; j + 4 <= n; j += 4) {
    const float *v0 = V + at[j], *v1 = V + at[j + 1], *v2 = V + at[j + 2], *v3 = V + at[j + 3];
    const float p0 = s[j], p1 = s[j + 1], p2 = s[j + 2], p3 = s[j + 3];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) out[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
  }
  for (; j < n; ++j) {
    const float* v = V + at[j];
    const float p = s[j];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
  }
  const float inv = 1.0f / total;
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) out[d] *= inv;
}

#if defined(__GNUC__) && !defined(__clang__)
// Head sizes of C vectors of W floats (W = 16 with AVX-512, else 8; C <= 128 / W) in GCC's vector types: each key's
// dot product is C vector FMAs, and the lane sums of W keys are one fixed tree of two-vector shuffles and adds
// (lane_sums) instead of a horizontal reduction a key. A key's score is the same adds in the same order wherever it
// sits in its group of W, so a score depends on its query and key alone (the span rule above holds as before).
#define FS_VECTOR_ATTENTION 1
#ifdef __AVX512F__
constexpr int kWidth = 16;
#else
constexpr int kWidth = 8;
#endif
typedef float vec __attribute__((vector_size(4 * kWidth)));
typedef float vec_u __attribute__((vector_size(4 * kWidth), aligned(4)));
typedef int32_t ivec __attribute__((vector_size(4 * kWidth)));

static inline vec load(const float* p) { return *reinterpret_cast<const vec_u*>(p); }
static inline void store(float* p, vec x) { *reinterpret_cast<vec_u*>(p) = x; }

#ifdef __AVX512F__
// Lane j of the result: the 16 lanes of a[j] added, by halves (8 + 8, then 4 + 4, 2 + 2, 1 + 1).
static inline vec lane_sums(const vec* a) {
  const ivec h0 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const ivec h1 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
  const ivec q0 = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  const ivec q1 = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
  const ivec p0 = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
  const ivec p1 = {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31};
  const ivec e0 = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  const ivec e1 = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  vec b[8], c[4], e[2];
  for (int i = 0; i < 8; ++i)  // b[i]: key 2i's 8 partial sums, then key 2i + 1's
    b[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], h0) + __builtin_shuffle(a[2 * i], a[2 * i + 1], h1);
  for (int i = 0; i < 4; ++i)  // c[i]: keys 4i .. 4i + 3, 4 partial sums each
    c[i] = __builtin_shuffle(b[2 * i], b[2 * i + 1], q0) + __builtin_shuffle(b[2 * i], b[2 * i + 1], q1);
  for (int i = 0; i < 2; ++i)  // e[i]: keys 8i .. 8i + 7, 2 partial sums each
    e[i] = __builtin_shuffle(c[2 * i], c[2 * i + 1], p0) + __builtin_shuffle(c[2 * i], c[2 * i + 1], p1);
  return __builtin_shuffle(e[0], e[1], e0) + __builtin_shuffle(e[0], e[1], e1);
}
#else
// Lane j of the result: the 8 lanes of a[j] added: pairs within each 128-bit half (twice, as AVX's horizontal add
// does), then the two halves.
static inline vec lane_sums(const vec* a) {
  const ivec even = {0, 2, 8, 10, 4, 6, 12, 14}, odd = {1, 3, 9, 11, 5, 7, 13, 15};
  const ivec lo = {0, 1, 2, 3, 8, 9, 10, 11}, hi = {4, 5, 6, 7, 12, 13, 14, 15};
  vec t[4], u[2];
  for (int i = 0; i < 4; ++i)  // t[i]: keys 2i, 2i + 1, pairs of partial sums in each half
    t[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], even) + __builtin_shuffle(a[2 * i], a[2 * i + 1], odd);
  for (int i = 0; i < 2; ++i)  // u[i]: keys 4i .. 4i + 3, one partial sum in each half
    u[i] = __builtin_shuffle(t[2 * i], t[2 * i + 1], even) + __builtin_shuffle(t[2 * i], t[2 * i + 1], odd);
  return __builtin_shuffle(u[0], u[1], lo) + __builtin_shuffle(u[0], u[1], hi);
}
#endif

// G queries of one head over their keys, chunk by chunk: each query's arithmetic is the same instructions in the
// same order as alone (G = 1), so a row's result never depends on the rows grouped with it.
template <int C>
static void attend_vec(const Query* qs, int64_t G, const float* K, const float* V, float scale) {
  static_assert(kChunk % kWidth == 0 && kExpWidth % kWidth == 0, "chunks and the scores' padding are whole groups");
  int64_t longest = 0;
  for (int64_t g = 0; g < G; ++g) longest = std::max(longest, qs[g].n);
  // Scores, W keys a group: the missing keys of the last group sum to zero (their lanes land in the scores' padding,
  // which the softmax overwrites).
  for (int64_t j0 = 0; j0 < longest; j0 += kChunk) {
    for (int64_t g = 0; g < G; ++g) {
      const Query& x = qs[g];
      if (j0 >= x.n) continue;
      const int64_t end = std::min(x.n, j0 + kChunk);
      // The keys are scattered (a beam's slots lie in the buffer rows of its ancestors): ask for the next chunk's
      // keys and this chunk's values now, so their cache misses overlap this chunk's arithmetic.
      for (int64_t j = end; j < std::min(x.n, end + kChunk); ++j)
        for (int c = 0; c < C; ++c) __builtin_prefetch(K + x.at[j] + kWidth * c, 0, 3);
      for (int64_t j = j0; j < end; ++j)
        for (int c = 0; c < C; ++c) __builtin_prefetch(V + x.at[j] + kWidth * c, 0, 3);
#ifdef __AVX512F__
      vec qv[C];
      for (int c = 0; c < C; ++c) qv[c] = load(x.q + kWidth * c);
#endif
      for (int64_t j1 = j0; j1 < end; j1 += kWidth) {
        const int64_t m = std::min<int64_t>(kWidth, end - j1);
        const float* k[kWidth];
        for (int64_t i = 0; i < kWidth; ++i) k[i] = i < m ? K + x.at[j1 + i] : nullptr;
        vec acc[kWidth];
#ifdef __AVX512F__
        // 32 registers: the query's C vectors stay in them, a key's C products are summed in one go
#pragma GCC unroll 16
        for (int i = 0; i < kWidth; ++i) {
          if (i < m) {
            vec a = qv[0] * load(k[i]);
            for (int c = 1; c < C; ++c) a += qv[c] * load(k[i] + kWidth * c);
            acc[i] = a;
          } else {
            acc[i] = vec{};
          }
        }
#else
        // 16 registers: the W sums stay in them, the query is read a vector at a time (the same adds per key)
        for (int i = 0; i < kWidth; ++i) acc[i] = vec{};
        for (int c = 0; c < C; ++c) {
          const vec qc = load(x.q + kWidth * c);
#pragma GCC unroll 8
          for (int i = 0; i < kWidth; ++i)
            if (i < m) acc[i] += qc * load(k[i] + kWidth * c);
        }
#endif
        store(x.s + j1, lane_sums(acc) * scale);
      }
    }
  }
  // Values: per query, even keys into one sum, odd keys into another (two chains of FMAs), added at the end; the
  // sums wait in `held` between chunks.
  vec held[kMaxRows][2][C];
  float total[kMaxRows];
  for (int64_t g = 0; g < G; ++g) {
    total[g] = softmax_weights(qs[g].s, qs[g].n, qs[g].padding);
    for (int c = 0; c < C; ++c) held[g][0][c] = held[g][1][c] = vec{};
  }
  for (int64_t j0 = 0; j0 < longest; j0 += kChunk) {
    for (int64_t g = 0; g < G; ++g) {
      const Query& x = qs[g];
      if (j0 >= x.n || total[g] == 0) continue;
      vec even[C], odd[C];
      for (int c = 0; c < C; ++c) even[c] = held[g][0][c], odd[c] = held[g][1][c];
      const int64_t end = std::min(x.n, j0 + kChunk);
      int64_t j = j0;
      for (; j + 2 <= end; j += 2) {
        const float *v0 = V + x.at[j], *v1 = V + x.at[j + 1];
        const float p0 = x.s[j], p1 = x.s[j + 1];
        for (int c = 0; c < C; ++c) {
          even[c] += p0 * load(v0 + kWidth * c);
          odd[c] += p1 * load(v1 + kWidth * c);
        }
      }
      if (j < end) {  // the last key of an odd span (chunks are even)
        const float* v0 = V + x.at[j];
        const float p0 = x.s[j];
        for (int c = 0; c < C; ++c) even[c] += p0 * load(v0 + kWidth * c);
      }
      for (int c = 0; c < C; ++c) held[g][0][c] = even[c], held[g][1][c] = odd[c];
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    float* out = qs[g].out;
    if (total[g] == 0) {
      for (int64_t d = 0; d < kWidth * C; ++d) out[d] = 0;
      continue;
    }
    const float inv = 1.0f / total[g];
    for (int c = 0; c < C; ++c) store(out + kWidth * c, (held[g][0][c] + held[g][1][c]) * inv);
  }
}
#endif

// A group of at most kMaxRows queries of one head over keys and values at K / V (see Query).
static void attend_rows(const Query* qs, int64_t G, const float* K, const float* V, int64_t D, float scale) {
#ifdef FS_VECTOR_ATTENTION
  if (D % kWidth == 0) {
    switch (D / kWidth) {
      case 1: return attend_vec<1>(qs, G, K, V, scale);
      case 2: return attend_vec<2>(qs, G, K, V, scale);
      case 3: return attend_vec<3>(qs, G, K, V, scale);
      case 4: return attend_vec<4>(qs, G, K, V, scale);
      case 5: return attend_vec<5>(qs, G, K, V, scale);
      case 6: return attend_vec<6>(qs, G, K, V, scale);
      case 7: return attend_vec<7>(qs, G, K, V, scale);
      case 8: return attend_vec<8>(qs, G, K, V, scale);
      case 12: return attend_vec<12>(qs, G, K, V, scale);
      case 16: return attend_vec<16>(qs, G, K, V, scale);
      default: break;
    }
  }
#endif
  for (int64_t g = 0; g < G; ++g)
    attend_any(qs[g].q, K, V, qs[g].at, qs[g].n, D, scale, qs[g].padding, qs[g].out, qs[g].s);
}

// One call on raw buffers (raw_kernels.h's AttentionFn): the operator below and the native step's raw layers
// (decoder_step.cpp) call it.
void decode_attention_raw(const fairseq_stream_ops::AttentionArgs& a) {
  const int64_t* prow = a.kv_row;
  const int64_t* pend = a.last;
  const bool* ppad = a.padding;
  const int64_t* ptable = a.table;
  const int64_t R = a.R, H = a.H, D = a.D, N = a.N, L = a.L, sn = a.sn, sh = a.sh;
  // Groups: consecutive rows of one sentence (a.group, else kv_row; with neither, rows alone), at most kMaxRows.
  const int64_t* sentence = a.group != nullptr ? a.group : prow;
  thread_local std::vector<int64_t> starts;  // reused: at one row a call's mallocs cost as much as its arithmetic
  starts.clear();
  for (int64_t r = 0; r < R; ++r)
    if (r == 0 || sentence == nullptr || sentence[r] != sentence[r - 1] || r - starts.back() == kMaxRows)
      starts.push_back(r);
  starts.push_back(R);
  const int64_t* first = starts.data();
  const int64_t padded = (L + kExpWidth - 1) / kExpWidth * kExpWidth;
  at::parallel_for(0, static_cast<int64_t>(starts.size()) - 1, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<int64_t> offset;  // of each key of the group's rows (their buffer rows, head 0)
    thread_local std::vector<float> scores;
    offset.resize(kMaxRows * L);
    scores.resize(kMaxRows * padded);
    Query qs[kMaxRows];
    for (int64_t gi = begin; gi < end; ++gi) {
      const int64_t r0 = first[gi], G = first[gi + 1] - r0;
      for (int64_t g = 0; g < G; ++g) {  // once per row, not once per head
        const int64_t r = r0 + g, n = prow ? prow[r] : r;
        int64_t* at = offset.data() + g * L;
        if (ptable != nullptr) {
          TORCH_CHECK(n >= 0 && n < a.table_rows, "kv_row out of the row table");
          const int64_t* held = ptable + n * a.table_stride;  // the buffer row of each key
          for (int64_t j = 0; j < L; ++j) {
            TORCH_CHECK(held[j] >= 0 && held[j] < N, "row_table out of range");
            at[j] = held[j] * sn + j * D;
          }
        } else {
          TORCH_CHECK(n >= 0 && n < N, "kv_row out of range");
          for (int64_t j = 0; j < L; ++j) at[j] = n * sn + j * D;
        }
        const Span span = visible_span(L, pend ? pend[r] : -1, ppad ? ppad + n * a.pad_stride : nullptr);
        qs[g] = {nullptr, at + span.lo, span.hi - span.lo, span.padding, scores.data() + g * padded, nullptr};
      }
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t g = 0; g < G; ++g) {
          qs[g].q = a.q + (r0 + g) * a.q_row + h * D;
          qs[g].out = a.out + ((r0 + g) * H + h) * D;
        }
        attend_rows(qs, G, a.k + h * sh, a.v + h * sh, D, a.scale);
      }
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
                        static_cast<float>(scale), out.data_ptr<float>(), nullptr});
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
