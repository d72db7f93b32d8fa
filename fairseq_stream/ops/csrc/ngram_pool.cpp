// Lookahead decoding's n-gram pool on the CPU, as one operator (Fu et al. 2024 §3): what
// fairseq_stream/ops/ngram_pool.py's PyTorch reference does in ~25 small tensor operations per
// verification (at batch 1 each costs more than its arithmetic), with the same results
// (tests/unit/test_ngram_pool.py). Per sentence s, with seq = BOS, y_1 .. y_v (v = verified[s]):
//   1. collect: for j = 0 .. collect - 1 the key seq[c], c = v - g - j, gets the continuation
//      seq[c + 1 .. c + g] (g = N - 1); a key before BOS writes the scratch row (the last one);
//      rows in order, the last write of a key wins (as index_put_ on a CPU);
//   2. guess: the pool's continuation of the last verified token feed[s, 0]; before it, the
//      prior's continuation of the last two tokens (seq[v - 1], feed[s, 0]) where the prior has
//      one (binary search in its sorted keys prev * vocab + last); where neither has one (PAD
//      first), the iteration's own guess feed[s, 1 ..], PAD past its width;
//   3. the next feed: the last verified token, then the guesses, PAD from the row's window
//      width[s] on (what JacobiDecoding.with_guesses makes of them).
// Integers only: nothing here depends on the compiler's arithmetic.
#include "step_common.h"
#include <algorithm>

namespace {

torch::Tensor ngram_pool_propose(torch::Tensor pool, const torch::Tensor& tokens, const torch::Tensor& verified,
                                 const torch::Tensor& feed, const torch::Tensor& width,
                                 const torch::Tensor& bigram_keys,
                                 const torch::Tensor& bigram, int64_t collect, int64_t bos, int64_t pad,
                                 int64_t vocab) {
  TORCH_CHECK(pool.dim() == 2 && pool.is_contiguous() && pool.scalar_type() == torch::kLong,
              "ngram_pool_propose: the pool must be a contiguous (V + 1, N - 1) int64 tensor");
  TORCH_CHECK(tokens.dim() == 2 && verified.dim() == 1 && feed.dim() == 2 && width.dim() == 1 &&
                  tokens.size(0) == verified.size(0) && feed.size(0) == verified.size(0) &&
                  width.size(0) == verified.size(0) && feed.size(1) >= 1 && feed.size(1) <= pool.size(1) + 1,
              "ngram_pool_propose: tokens (S, T), verified (S,), width (S,) and feed (S, 1 .. N) disagree");
  TORCH_CHECK(bigram_keys.numel() == 0 || (bigram_keys.is_contiguous() && bigram.is_contiguous() &&
                                           bigram.size(0) == bigram_keys.numel() && bigram.size(1) == pool.size(1)),
              "ngram_pool_propose: the prior's keys and continuations disagree");
  const int64_t g = pool.size(1), rows = pool.size(0), scratch = rows - 1;
  const int64_t S = tokens.size(0), T = tokens.size(1), f = feed.size(1);
  const auto tok = tokens.accessor<int64_t, 2>();
  const auto ver = verified.accessor<int64_t, 1>();
  const auto fd = feed.accessor<int64_t, 2>();
  const auto wd = width.accessor<int64_t, 1>();
  int64_t* P = pool.data_ptr<int64_t>();
  auto seq = [&](int64_t s, int64_t c) { return c == 0 ? bos : tok[s][c - 1]; };  // c in [0, T]
  auto row_of = [&](int64_t key) {
    TORCH_CHECK(key >= 0 && key < rows, "ngram_pool_propose: token ", key, " outside the pool");
    return P + key * g;
  };
  for (int64_t s = 0; s < S; ++s) {  // 1. collect
    for (int64_t j = 0; j < collect; ++j) {
      const int64_t c = ver[s] - g - j;
      const int64_t at = std::max<int64_t>(c, 0);
      int64_t* dst = c >= 0 ? row_of(seq(s, at)) : P + scratch * g;
      for (int64_t i = 1; i <= g; ++i) dst[i - 1] = seq(s, std::min(at + i, T));
    }
  }
  auto out = torch::empty({S, f}, tokens.options());
  int64_t* O = out.data_ptr<int64_t>();
  const int64_t K = bigram_keys.numel();
  const int64_t* keys = K ? bigram_keys.data_ptr<int64_t>() : nullptr;
  const int64_t* conts = K ? bigram.data_ptr<int64_t>() : nullptr;
  for (int64_t s = 0; s < S; ++s) {  // 2. guess
    const int64_t last = fd[s][0];
    const int64_t* choice = row_of(last);
    const int64_t v = ver[s];
    if (K && v >= 1) {
      const int64_t query = seq(s, std::min(v - 1, T)) * vocab + last;
      const int64_t* at = std::lower_bound(keys, keys + K, query);
      if (at != keys + K && *at == query && conts[(at - keys) * g] != pad) choice = conts + (at - keys) * g;
    }
    const bool pooled = choice[0] != pad;  // else the iteration's own: the feed as it is
    int64_t* dst = O + s * f;
    dst[0] = last;
    for (int64_t i = 1; i < f; ++i) dst[i] = i < wd[s] ? (pooled ? choice[i - 1] : fd[s][i]) : pad;  // 3.
  }
  return out;
}

}  // namespace

FAIRSEQ_STREAM_CPU_OPERATOR(ngram_pool_propose, "(Tensor(a!) pool, Tensor tokens, Tensor verified, Tensor feed, Tensor width, "
                                                "Tensor bigram_keys, Tensor bigram, int collect, int bos, int pad, "
                                                "int vocab) -> Tensor")
