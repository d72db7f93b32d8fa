// What the step operators of fairseq_stream/ops/backends.py share: in-place row permutation (the
// compaction that puts the sentences that go on first), typed data pointers, the packet's field
// starts (given by fairseq_stream/ops/packets.py: no operator holds offsets of its own), and the
// registration of one CPU operator with the dispatcher.
#pragma once
#include <torch/extension.h>
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace fairseq_stream_ops {

// Rows of `t` (dim 0) reordered as `perm` (new row i = old row perm[i]), in place.
inline void permute_rows(const torch::Tensor& t, const std::vector<int64_t>& perm) {
  const int64_t n = t.size(0);
  if (n == 0 || t.numel() == 0) return;
  const int64_t row = t.numel() / n * t.element_size();
  char* base = static_cast<char*>(t.data_ptr());
  std::vector<char> old(base, base + n * row);
  for (int64_t i = 0; i < n; ++i) std::memcpy(base + i * row, old.data() + perm[i] * row, row);
}

// Whether `perm` leaves every row where it is.
inline bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Indices of the `width` largest of v[0..n), best first, ties by the lower index (as the PyTorch
// references' stable descending sorts).
template <typename T>
void sorted_top(const T* v, int64_t n, int64_t width, std::vector<int64_t>& out) {
  out.resize(n);
  std::iota(out.begin(), out.end(), 0);
  const int64_t w = std::min(width, n);
  std::partial_sort(out.begin(), out.begin() + w, out.end(),
                    [v](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  out.resize(w);
}

// A Jacobi iteration's window from the first unverified position `a` (fairseq_stream/search/jacobi.py,
// JacobiDecoding._widths): PJ (block < 0) the rest; PGJ to the end of the aligned block; `tail` a block
// sliding with the verified prefix; HGJ 1 from `max_parallel` on; never past the maximum length, at least 1.
inline int64_t jacobi_window(int64_t a, int64_t max_len, int64_t block, bool tail, int64_t max_parallel) {
  const int64_t remaining = max_len + 1 - a;  // positions left, EOS included
  int64_t w = block < 0 ? remaining : (tail ? block : block - a % block);
  if (max_parallel >= 0 && a >= max_parallel) w = 1;
  return std::max<int64_t>(std::min(w, remaining), 1);
}

template <typename T>
T* ptr(const torch::Tensor& t) {
  return t.data_ptr<T>();
}

// The packet of a step: float64, laid out by the field starts `at` (one per field of the
// operator's PacketField enum, then the size), as fairseq_stream/ops/packets.py computes them.
struct Packet {
  torch::Tensor tensor;
  double* data;
  std::vector<int64_t> at;
  explicit Packet(at::IntArrayRef starts)
      : tensor(torch::empty({starts.back()}, torch::TensorOptions().dtype(torch::kFloat64))),
        data(tensor.data_ptr<double>()),
        at(starts.begin(), starts.end()) {}
  template <typename Field>
  double& operator()(Field field, int64_t i = 0) {
    return data[at[static_cast<int>(field)] + i];
  }
};

}  // namespace fairseq_stream_ops

// One CPU operator registered with the dispatcher (torch.ops.fairseq_stream.NAME), SCHEMA its
// arguments and results.
#define FAIRSEQ_STREAM_CPU_OPERATOR(NAME, SCHEMA)                                          \
  TORCH_LIBRARY_FRAGMENT(fairseq_stream, m) { m.def(#NAME SCHEMA); }                       \
  TORCH_LIBRARY_IMPL(fairseq_stream, CPU, m) { m.impl(#NAME, &NAME); }                     \
  PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
