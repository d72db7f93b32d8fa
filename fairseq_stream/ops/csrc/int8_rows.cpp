// --quantize int8 with one activation scale per row (fairseq_stream/ops/int8_rows.py, fairseq_stream/model/quantize.py): a row's
// product never depends on the other rows of its call.
//
// fbgemm's dynamic int8 Linear takes one activation scale for the whole input (its min and max),
// so a row's result changes with the rows beside it. Here every row is first divided by its own
// largest magnitude m_r (so every row spans [-1, 1]), the product runs with one fixed activation
// scale (fbgemm's u8s8 kernel through the weights' packed parameters, integer accumulation:
// exact), and the row is multiplied back by m_r before the bias (and a ReLU) is added. Every step
// is per element or per row, so a row computes the same numbers in any batch.
#include "step_common.h"
#include <ATen/native/quantized/PackedParams.h>
#include <algorithm>
#include <cmath>

namespace {

using torch::Tensor;

// out[r, :] = relu?(y[r, :] * m[r] + bias) for the rows of y (out may be y: in place).
void rescale_rows(const Tensor& y, float* out, const float* scale, const float* b, bool relu) {
  const int64_t rows = y.size(0), cols = y.size(1);
  const float* in = y.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = in + r * cols;
    float* row = out + r * cols;
    const float s = scale[r];
    if (b != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] = src[c] * s + b[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] = src[c] * s;
    }
    if (relu) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] = row[c] > 0.f ? row[c] : 0.f;
    }
  }
}

// fbgemm's product keeps a 32-bit sum per output element besides the output: large calls (a
// k = 50 step's output layer: thousands of rows by the vocabulary) run in chunks of rows, so
// that buffer stays small. Rows are independent, so chunking changes no bit.
constexpr int64_t kChunkRows = 256;

// x (..., K) float32 → (..., N): see the file's comment. `scale`/`zero_point` quantise [-1, 1].
Tensor int8_row_linear(const Tensor& x, const c10::intrusive_ptr<LinearPackedParamsBase>& weight,
                       const c10::optional<Tensor>& bias, bool relu, double scale, int64_t zero_point) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.device().is_cpu(), "int8_row_linear: float32 CPU input");
  const int64_t K = x.size(-1);
  const Tensor flat = x.reshape({-1, K}).contiguous();
  const int64_t rows = flat.size(0);
  Tensor normed = at::empty_like(flat);
  Tensor m = at::empty({rows}, flat.options());
  const float* in = flat.data_ptr<float>();
  float* xn = normed.data_ptr<float>();
  float* ms = m.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * K;
    float a = 0.f;
#pragma omp simd reduction(max : a)
    for (int64_t k = 0; k < K; ++k) a = std::max(a, std::fabs(row[k]));
    // an all-zero row stays zero; a NaN row stays NaN (as the float product)
    const float mr = a > 0.f ? a : 1.f;
    ms[r] = mr;
    float* dst = xn + r * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) dst[k] = row[k] / mr;
  }
  if (bias.has_value()) TORCH_CHECK(bias->is_contiguous() && bias->scalar_type() == at::kFloat, "int8_row_linear: bias");
  const float* b = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  Tensor y;
  if (rows <= kChunkRows) {
    y = weight->apply_with_input_q_dq_qweight_dq_output_fp32(normed, scale, zero_point).contiguous();
    rescale_rows(y, y.data_ptr<float>(), ms, b, relu);
  } else {
    for (int64_t r0 = 0; r0 < rows; r0 += kChunkRows) {
      const int64_t n = std::min(kChunkRows, rows - r0);
      Tensor part = weight->apply_with_input_q_dq_qweight_dq_output_fp32(normed.narrow(0, r0, n), scale, zero_point)
                        .contiguous();
      if (!y.defined()) y = at::empty({rows, part.size(1)}, part.options());
      rescale_rows(part, y.data_ptr<float>() + r0 * y.size(1), ms + r0, b, relu);
    }
  }
  auto shape = x.sizes().vec();
  shape.back() = y.size(1);
  return y.view(shape);
}

}  // namespace

// A dispatcher operator: one aten-level call (counted by fairseq_stream.engine.profiling like any other).
FAIRSEQ_STREAM_CPU_OPERATOR(int8_row_linear,
                            "(Tensor x, __torch__.torch.classes.quantized.LinearPackedParamsBase weight, Tensor? bias, "
                            "bool relu, float scale, int zero_point) -> Tensor")
