// Fused output layer on the CPU (paper 002 §3.1, Algorithms 2-3): for every row of raw scores,
// the top-k scores with their ids and the log-normaliser, in two streaming passes over the row
// (the second one runs from cache): pass 1 finds the running maximum and keeps the k best in a
// small sorted buffer; pass 2 sums exp(x - max). Nothing of size V is written.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <limits>
#include <vector>

template <typename scalar_t>
static void row_topk_lse(const scalar_t* row, int64_t V, int64_t k, scalar_t* out_v, int64_t* out_i, scalar_t* out_lse) {
  const scalar_t neg_inf = -std::numeric_limits<scalar_t>::infinity();
  int64_t filled = 0;
  scalar_t m = neg_inf;
  for (int64_t i = 0; i < V; ++i) {
    const scalar_t v = row[i];
    m = v > m ? v : m;
    if (filled < k || v > out_v[filled - 1]) {
      int64_t j = filled < k ? filled++ : k - 1;
      while (j > 0 && out_v[j - 1] < v) {  // stable: equal values keep the lower id first
        out_v[j] = out_v[j - 1];
        out_i[j] = out_i[j - 1];
        --j;
      }
      out_v[j] = v;
      out_i[j] = i;
    }
  }
  for (int64_t j = filled; j < k; ++j) {
    out_v[j] = neg_inf;
    out_i[j] = 0;
  }
  scalar_t s = 0;
  if (std::isfinite(m)) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < V; ++i) s += std::exp(row[i] - m);
  }
  *out_lse = m + std::log(s);
}

std::vector<torch::Tensor> topk_lse(torch::Tensor scores, int64_t k) {
  TORCH_CHECK(scores.dim() == 2, "scores must be (rows, vocab)");
  auto x = scores.contiguous();
  const int64_t R = x.size(0), V = x.size(1);
  k = std::min(k, V);
  auto values = torch::empty({R, k}, x.options());
  auto ids = torch::empty({R, k}, x.options().dtype(torch::kLong));
  auto lse = torch::empty({R}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "topk_lse", [&] {
    const scalar_t* p = x.data_ptr<scalar_t>();
    scalar_t* pv = values.data_ptr<scalar_t>();
    int64_t* pi = ids.data_ptr<int64_t>();
    scalar_t* pl = lse.data_ptr<scalar_t>();
    at::parallel_for(0, R, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) row_topk_lse<scalar_t>(p + r * V, V, k, pv + r * k, pi + r * k, pl + r);
    });
  });
  return {values, ids, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("topk_lse", &topk_lse, "per-row top-k and log-normaliser"); }
