// --step-mode native (fairseq_stream/model/native_decoder.py): a whole eager decoder step of fairseq's
// transformer decoder in one dispatcher call, on a CPU.
//
// The eager step (fairseq_stream/model/block_decoder.py, BlockDecoder.forward + logits) issues
// ~35 aten operations per layer from Python; on a small model the interpreter between them costs
// about as much as the arithmetic. This operator makes the SAME aten calls, in the same order, with
// the same shapes and arguments (the oneDNN, int8 and attention operators through the dispatcher, as
// Python calls them), so its logits are the eager step's bit for bit; only the Python between them
// is gone. What it covers: causal steps (no custom block mask) of one or more tokens per row, rows of
// one length or of their own lengths; NativeDecoder holds the model's weights, collected once.
//
// Where every product has a raw kernel (packed float32, our int8) and the activation is a ReLU, the layers run on
// raw buffers instead (raw_layers): the same kernels in the same order through their raw entries
// (raw_kernels.h), so the same bits, without the ~30 operator calls a layer (each a dispatch, an output tensor,
// shape checks) that cost a one-row step about a quarter of its time. The native loops search each step on raw
// buffers too (first_of_window: the fused top-k kernel's raw entry, fairseq's edits as loops; the draft's arg-max as a
// loop), taking the aten calls where a window's best ties. set_raw(false) keeps the calls (A/B).
#if defined(__x86_64__)  // as PyTorch's x86 builds define them: the dispatch stubs' call signature (layer norm's)
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif
#include <ATen/native/layer_norm.h>
#include "raw_kernels.h"
#include "step_common.h"
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/custom_class.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using torch::Tensor;

// How a Linear of the model multiplies (the Python module it stands for).
enum LinearKind : int64_t { kTorch = 0, kOneDnn = 1, kInt8 = 2, kPacked = 3 };
// The activation after fc1 (fairseq's activation_fn).
enum Activation : int64_t { kRelu = 0, kGelu = 1 };

struct Linear {
  int64_t kind;
  Tensor weight;  // kTorch: F.linear's weight; kOneDnn, kPacked, kInt8: the packed weight
  c10::optional<Tensor> bias;
  int64_t out_features = 0;  // kPacked, kInt8
  Tensor offset, wscale;     // kInt8: the column offsets and the scales per output channel
  int64_t levels = 0;        // kInt8: L (ops/csrc/int8_rows.cpp)
};

struct Norm {
  c10::optional<Tensor> weight, bias;
  double eps;
  int64_t dim;
};

struct Layer {
  int64_t self_ln, qkv, self_out, enc_ln, enc_q, enc_out, final_ln, fc1, fc2;  // indices; -1: none
  double self_scaling, enc_scaling;
};

// A transformer encoder layer (encoder_layers below): its products q, k, v, out, fc1, fc2 and norms (indices).
struct EncoderLayer {
  int64_t self_ln, q, k, v, out, final_ln, fc1, fc2;
  double scaling;
};

c10::OperatorHandle op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

Tensor call_boxed(const c10::OperatorHandle& handle, torch::jit::Stack stack) {
  handle.callBoxed(&stack);
  return stack[0].toTensor();
}

}  // namespace

// The prepared model: every Linear and LayerNorm of the decoder once, the layers as indices of them.
struct NativeDecoder : torch::CustomClassHolder {
  int64_t heads, head_dim, activation;
  bool normalize_before;
  std::vector<Linear> linears;
  std::vector<Norm> norms;
  std::vector<Layer> layers;
  Tensor embed_tokens;
  int64_t token_padding = -1, project_in = -1, layernorm_embedding = -1;
  double embed_scale = 1.0;
  int64_t positions = 0, position_padding = -1;  // positions: 0 none, 1 sinusoidal (table per call), 2 learned
  Tensor learned_positions;
  int64_t layer_norm = -1, project_out = -1, output = -1;
  std::vector<EncoderLayer> encoder;  // an encoder's layers, where this holds an encoder (encoder_layers)
  int64_t encoder_norm = -1;
  // The raw step (raw_layers below): the kernels' addresses, resolved at the first step; whether it may run.
  bool raw_allowed = true;
  int raw_state = 0;  // 0: not resolved yet, 1: every product and the attention have a raw kernel, -1: not
  fairseq_stream_ops::PackedLinearFn packed_fn = nullptr;
  fairseq_stream_ops::PackedLinearHalfFn packed_half_fn = nullptr;  // half panels (packed_linear.cpp)
  fairseq_stream_ops::Int8LinearFn int8_fn = nullptr;
  fairseq_stream_ops::AttentionFn attend_fn = nullptr;
  fairseq_stream_ops::TopkLseFn topk_fn = nullptr;  // the native loops' search (first_of_window)
  int topk_state = 0;                                // 0: not resolved yet, 1: resolved, -1: not registered
  int64_t raw_count = 0;  // steps the raw path ran (raw_steps(): what the tests check it took)
  int64_t search_count = 0;  // the native loops' searches on raw buffers (raw_searches(): first_of_window told)

  NativeDecoder(int64_t heads_, int64_t head_dim_, bool normalize_before_, int64_t activation_)
      : heads(heads_), head_dim(head_dim_), activation(activation_), normalize_before(normalize_before_) {}

  int64_t add_torch_linear(Tensor weight, c10::optional<Tensor> bias) {
    linears.push_back({kTorch, std::move(weight), std::move(bias)});
    return static_cast<int64_t>(linears.size()) - 1;
  }
  int64_t add_onednn_linear(Tensor packed, c10::optional<Tensor> bias) {
    linears.push_back({kOneDnn, std::move(packed), std::move(bias)});
    return static_cast<int64_t>(linears.size()) - 1;
  }
  int64_t add_packed_linear(Tensor packed, c10::optional<Tensor> bias, int64_t out_features) {
    linears.push_back({kPacked, std::move(packed), std::move(bias), out_features});
    return static_cast<int64_t>(linears.size()) - 1;
  }
  int64_t add_int8_linear(Tensor packed, Tensor offset, Tensor wscale, c10::optional<Tensor> bias,
                          int64_t out_features, int64_t levels) {
    linears.push_back({kInt8, std::move(packed), std::move(bias), out_features, std::move(offset), std::move(wscale),
                       levels});
    return static_cast<int64_t>(linears.size()) - 1;
  }
  int64_t add_norm(c10::optional<Tensor> weight, c10::optional<Tensor> bias, double eps, int64_t dim) {
    norms.push_back({std::move(weight), std::move(bias), eps, dim});
    return static_cast<int64_t>(norms.size()) - 1;
  }
  void set_embedding(Tensor tokens, int64_t padding, double scale, int64_t project_in_, int64_t positions_,
                     int64_t position_padding_, c10::optional<Tensor> learned, int64_t layernorm_embedding_) {
    embed_tokens = std::move(tokens);
    token_padding = padding;
    embed_scale = scale;
    project_in = project_in_;
    positions = positions_;
    position_padding = position_padding_;
    if (learned.has_value()) learned_positions = *learned;
    layernorm_embedding = layernorm_embedding_;
  }
  void add_layer(std::vector<int64_t> ix, double self_scaling, double enc_scaling) {
    TORCH_CHECK(ix.size() == 9, "add_layer: 9 indices");
    layers.push_back({ix[0], ix[1], ix[2], ix[3], ix[4], ix[5], ix[6], ix[7], ix[8], self_scaling, enc_scaling});
  }
  void set_output(int64_t layer_norm_, int64_t project_out_, int64_t output_) {
    layer_norm = layer_norm_;
    project_out = project_out_;
    output = output_;
  }
  void add_encoder_layer(std::vector<int64_t> ix, double scaling) {
    TORCH_CHECK(ix.size() == 8, "add_encoder_layer: 8 indices");
    encoder.push_back({ix[0], ix[1], ix[2], ix[3], ix[4], ix[5], ix[6], ix[7], scaling});
  }
  void set_encoder_norm(int64_t norm) { encoder_norm = norm; }
  // Whether steps may take the raw path (the same bits either way; off: every step the aten calls, for A/B).
  void set_raw(bool allowed) { raw_allowed = allowed; }
  int64_t raw_steps() const { return raw_count; }
  int64_t raw_searches() const { return search_count; }
  bool raw_ready() { return raw(); }
  // Whether the next eligible step takes the raw path: every product packed float32 or our int8, a ReLU, the
  // kernels' raw entries registered (their modules loaded).
  bool raw() {
    if (!raw_allowed) return false;
    if (raw_state == 0) {
      raw_state = activation == kRelu ? 1 : -1;
      for (const Linear& l : linears)  // the raw kernels read weights and biases by pointer, as their operators check
        if ((l.kind != kPacked && l.kind != kInt8) || !l.weight.is_contiguous() ||
            (l.bias.has_value() && (!l.bias->is_contiguous() || l.bias->scalar_type() != torch::kFloat)))
          raw_state = -1;
      if (raw_state == 1) {
        attend_fn = reinterpret_cast<fairseq_stream_ops::AttentionFn>(entry("fairseq_stream::decode_attention_entry"));
        bool packed = false, half = false, int8 = false;
        for (const Linear& l : linears)
          (l.kind == kPacked ? (l.weight.scalar_type() == torch::kHalf ? half : packed) : int8) = true;
        if (packed) packed_fn = reinterpret_cast<fairseq_stream_ops::PackedLinearFn>(entry("fairseq_stream::packed_linear_entry"));
        if (half)
          packed_half_fn =
              reinterpret_cast<fairseq_stream_ops::PackedLinearHalfFn>(entry("fairseq_stream::packed_linear_half_entry"));
        if (int8) int8_fn = reinterpret_cast<fairseq_stream_ops::Int8LinearFn>(entry("fairseq_stream::int8_row_linear_entry"));
        if (!attend_fn || (packed && !packed_fn) || (half && !packed_half_fn) || (int8 && !int8_fn)) raw_state = -1;
      }
    }
    return raw_state == 1;
  }

  // The fused output layer's raw search (fused_topk.cpp, loaded with the output layer), or null: where it is not
  // registered, or under set_raw(false) (the native loops then search with the aten calls).
  fairseq_stream_ops::TopkLseFn topk() {
    if (!raw_allowed) return nullptr;
    if (topk_state == 0) {
      topk_fn = reinterpret_cast<fairseq_stream_ops::TopkLseFn>(entry("fairseq_stream::topk_lse_entry"));
      topk_state = topk_fn ? 1 : -1;
    }
    return topk_fn;
  }

  // A kernel's address its module registered as the operator `name` (raw_kernels.h), or 0 where it is not loaded.
  static int64_t entry(const char* name) {
    const auto handle = c10::Dispatcher::singleton().findSchema({name, ""});
    return handle.has_value() ? handle->typed<int64_t()>().call() : 0;
  }

  // y (M, N) = linear i of x (M, K), relu fused, on raw buffers (the raw path's kernels: the same as linear's)
  void raw_linear(int64_t i, const float* x, int64_t M, int64_t K, float* y, bool relu = false) const {
    const Linear& l = linears[i];
    const float* bias = l.bias.has_value() ? l.bias->data_ptr<float>() : nullptr;
    if (l.kind == kPacked) {
      TORCH_CHECK(l.weight.size(1) == K, "decoder_step: a product's input width");
      if (l.weight.scalar_type() == torch::kHalf)
        packed_half_fn(x, M, K, reinterpret_cast<const uint16_t*>(l.weight.data_ptr<at::Half>()), l.out_features, bias,
                       relu, y);
      else
        packed_fn(x, M, K, l.weight.data_ptr<float>(), l.out_features, bias, relu, y);
    } else {
      TORCH_CHECK(l.weight.size(1) * l.weight.size(3) >= K && (l.weight.size(1) - 1) * l.weight.size(3) < K,
                  "decoder_step: a product's input width");
      int8_fn(x, M, K, l.weight.data_ptr<int8_t>(), l.weight.size(0), l.weight.size(1), l.offset.data_ptr<int32_t>(),
              l.wscale.data_ptr<float>(), bias, l.out_features, relu, l.levels, y);
    }
  }
  int64_t out_features(int64_t i) const { return linears[i].out_features; }

  // norm i of x (M, d) into y (M, d): the kernel at::layer_norm's CPU operator calls (its dispatch stub, so
  // its bits), without the dispatcher, the autograd layer and the operator's three output tensors
  void raw_norm(int64_t i, const Tensor& x, Tensor& y, Tensor& mean, Tensor& rstd) const {
    const Norm& n = norms[i];
    at::native::LayerNormKernel(c10::DeviceType::CPU, x, n.weight.has_value() ? *n.weight : Tensor(),
                                n.bias.has_value() ? *n.bias : Tensor(), x.size(0), n.dim, n.eps, &y, &mean, &rstd);
  }

  // ---- the step's arithmetic, each as decoder_step.py computes it ----------------------------
  // OneDnnLinear / PackedLinear / F.linear / RowInt8Linear.forward (relu: fc1_activation's fused ReLU)
  Tensor linear(int64_t i, const Tensor& x, bool relu = false) const {
    const Linear& l = linears[i];
    if (l.kind == kPacked) {  // ops/packed_linear.py loads it; a typed call, no boxing
      using Packed = Tensor(const Tensor&, const Tensor&, const c10::optional<Tensor>&, int64_t, bool);
      static const auto packed = op("fairseq_stream::packed_linear").typed<Packed>();
      return packed.call(x, l.weight, l.bias, l.out_features, relu);
    }
    if (l.kind == kOneDnn) {
      static const c10::OperatorHandle onednn = op("mkldnn::_linear_pointwise");
      return call_boxed(onednn, {x, l.weight, l.bias, std::string(relu ? "relu" : "none"),
                                 c10::List<c10::optional<c10::Scalar>>(), c10::optional<std::string>(std::string())});
    }
    if (l.kind == kInt8) {  // ops/int8_rows.py loads it
      using Int8 = Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const c10::optional<Tensor>&,
                          int64_t, bool, int64_t);
      static const auto int8 = op("fairseq_stream::int8_row_linear").typed<Int8>();
      return int8.call(x, l.weight, l.offset, l.wscale, l.bias, l.out_features, relu, l.levels);
    }
    TORCH_CHECK(!relu, "a fused ReLU needs oneDNN or int8");
    return at::linear(x, l.weight, l.bias);
  }

  Tensor norm(int64_t i, const Tensor& x) const {
    const Norm& n = norms[i];
    return at::layer_norm(x, {n.dim}, n.weight, n.bias, n.eps);
  }

  // fc1_activation: a ReLU inside oneDNN's or the int8 product, else activation_fn(fc1(x))
  Tensor fc1_activation(int64_t i, const Tensor& x) const {
    if (activation == kRelu && linears[i].kind != kTorch) return linear(i, x, true);
    Tensor h = linear(i, x);
    return activation == kRelu ? at::relu(h) : at::gelu(h);
  }
};

namespace {

using Attend = Tensor(const Tensor&, const Tensor&, const Tensor&, const c10::optional<Tensor>&,
                      const c10::optional<Tensor>&, const c10::optional<Tensor>&, double, const c10::optional<Tensor>&);

Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const c10::optional<Tensor>& kv_row,
              const c10::optional<Tensor>& last, const c10::optional<Tensor>& padding, double scale,
              const c10::optional<Tensor>& row_table = c10::nullopt) {
  static const auto handle = op("fairseq_stream::decode_attention").typed<Attend>();
  return handle.call(q, k, v, kv_row, last, padding, scale, row_table);
}

// What one step reads besides the weights.
struct StepInputs {
  const std::vector<Tensor>& keys;
  const std::vector<Tensor>& values;
  int64_t width;
  c10::optional<Tensor> lens;  // rows of their own lengths (None: every row has `width` tokens)
  Tensor write;                // (R, H, b, hd) each row's slots (with lens, without a row table)
  c10::optional<Tensor> table;  // caches that never move: (R, >= width + b) the buffer row of each slot
  Tensor home;                  // with a table: (R,) the buffer row each row writes its block into
  Tensor home_slots;            // with a table and lens: (R, b) the slots each row writes
  c10::optional<Tensor> self_row, self_last;  // a causal block's queries: their row and last slot
  const std::vector<Tensor>& enc_keys;
  const std::vector<Tensor>& enc_values;
  c10::optional<Tensor> enc_padding;
  c10::optional<Tensor> enc_row;  // each query's encoder row
};

// split_heads: (R, b, d) -> (R, H, b, hd)
Tensor split_heads(const Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// Caches that never move: row r's block (R, H, b, hd) into buffer row home[r] at slots start + j, or
// slots[r, j] (rows of their own lengths: (R, b), lens[r] + j). One copy of hd floats per (row, head, token): index_copy_ and
// index_put_ on the strided slot slice cost several times the bytes they move.
void write_block(const Tensor& buffer, const Tensor& home, int64_t start, const Tensor& slots, const Tensor& block) {
  const Tensor src = block.contiguous();
  const int64_t R = src.size(0), H = src.size(1), b = src.size(2), D = src.size(3);
  TORCH_CHECK(buffer.stride(3) == 1 && buffer.stride(2) == D, "decoder_step: each head's slots contiguous");
  const int64_t sn = buffer.stride(0), sh = buffer.stride(1), P = buffer.size(0), C = buffer.size(2);
  const int64_t* rows = home.data_ptr<int64_t>();
  const int64_t* at = slots.defined() ? slots.data_ptr<int64_t>() : nullptr;
  const float* from = src.data_ptr<float>();
  float* to = buffer.data_ptr<float>();
  for (int64_t r = 0; r < R; ++r) {
    TORCH_CHECK(rows[r] >= 0 && rows[r] < P, "decoder_step: a home outside the buffer");
    for (int64_t j = 0; j < b; ++j) {
      const int64_t slot = at ? at[r * b + j] : start + j;
      TORCH_CHECK(slot >= 0 && slot < C, "decoder_step: a slot outside the buffer");
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(to + rows[r] * sn + h * sh + slot * D, from + ((r * H + h) * b + j) * D, D * sizeof(float));
    }
  }
}

// decoder_step._self_attention with the CPU kernel (b = 1, or a causal block)
Tensor self_attention(const NativeDecoder& m, const Layer& layer, int64_t i, const Tensor& x, const StepInputs& in) {
  const int64_t heads = m.heads, b = x.size(1), r = x.size(0);
  const auto qkv = m.linear(layer.qkv, x).chunk(3, -1);
  const Tensor q = split_heads(qkv[0], heads);
  const int64_t start = in.width;
  if (in.table.has_value()) {  // each row's block into its own buffer row (at its own slots with lens)
    write_block(in.keys[i], in.home, start, in.home_slots, split_heads(qkv[1], heads));
    write_block(in.values[i], in.home, start, in.home_slots, split_heads(qkv[2], heads));
  } else if (!in.lens.has_value()) {
    in.keys[i].slice(2, start, start + b).copy_(split_heads(qkv[1], heads));
    in.values[i].slice(2, start, start + b).copy_(split_heads(qkv[2], heads));
  } else {
    in.keys[i].scatter_(2, in.write, split_heads(qkv[1], heads));
    in.values[i].scatter_(2, in.write, split_heads(qkv[2], heads));
  }
  const Tensor k = in.keys[i].slice(2, 0, start + b), v = in.values[i].slice(2, 0, start + b);
  const int64_t hd = q.size(3);
  Tensor out;
  if (b == 1) {
    out = attend(q.view({r, heads, hd}), k, v, c10::nullopt, in.lens, c10::nullopt, layer.self_scaling, in.table);
  } else {
    out = attend(q.transpose(1, 2).reshape({r * b, heads, hd}), k, v, in.self_row, in.self_last, c10::nullopt,
                 layer.self_scaling, in.table);
  }
  return m.linear(layer.self_out, out.view({r, b, heads * hd}));
}

// decoder_step._encoder_attention with the CPU kernel
Tensor encoder_attention(const NativeDecoder& m, const Layer& layer, int64_t i, const Tensor& x,
                         const StepInputs& in) {
  const Tensor q = m.linear(layer.enc_q, x);
  const int64_t r = q.size(0), b = q.size(1), d = q.size(2);
  const Tensor out = attend(q.reshape({r * b, m.heads, d / m.heads}), in.enc_keys[i], in.enc_values[i], in.enc_row,
                            c10::nullopt, in.enc_padding, layer.enc_scaling);
  return m.linear(layer.enc_out, out.view({r, b, d}));
}

// BlockDecoder.run_layer (eval mode; no NormFormer parts: native_decoder.why_not refuses them)
Tensor layer_step(const NativeDecoder& m, int64_t i, Tensor x, const StepInputs& in) {
  const Layer& layer = m.layers[i];
  const bool pre = m.normalize_before;
  Tensor h = self_attention(m, layer, i, pre ? m.norm(layer.self_ln, x) : x, in);
  x = pre ? x + h : m.norm(layer.self_ln, x + h);
  h = encoder_attention(m, layer, i, pre ? m.norm(layer.enc_ln, x) : x, in);
  x = pre ? x + h : m.norm(layer.enc_ln, x + h);
  h = m.fc1_activation(layer.fc1, pre ? m.norm(layer.final_ln, x) : x);
  h = m.linear(layer.fc2, h);
  return pre ? x + h : m.norm(layer.final_ln, x + h);
}

// BlockDecoder.embed (positions through position_embeddings)
Tensor embed(const NativeDecoder& m, const Tensor& tokens, const Tensor& positions,
             const c10::optional<Tensor>& table) {
  Tensor x = at::embedding(m.embed_tokens, tokens, m.token_padding) * m.embed_scale;
  if (m.project_in >= 0) x = m.linear(m.project_in, x);
  if (m.positions != 0) {
    const Tensor ids = positions + m.position_padding + 1;
    if (m.positions == 1) {
      TORCH_CHECK(table.has_value(), "decoder_step: a sinusoidal model needs its position table");
      x = x + at::embedding(*table, ids);
    } else {
      x = x + at::embedding(m.learned_positions, ids, m.position_padding);
    }
  }
  if (m.layernorm_embedding >= 0) x = m.norm(m.layernorm_embedding, x);
  return x;
}

// BlockDecoder.embed on raw buffers (the raw path): the same IEEE operations — the token's row times the scale as a
// float (aten multiplies a float tensor by a Python scalar in float), project_in, plus the position's row — and
// layernorm_embedding through layer norm's kernel. Token ids (R, b) and positions: contiguous int64.
Tensor raw_embed(const NativeDecoder& m, const Tensor& tokens, const Tensor& positions,
                 const c10::optional<Tensor>& table) {
  const int64_t R = tokens.size(0), b = tokens.size(1), M = R * b, V = m.embed_tokens.size(0);
  const int64_t de = m.embed_tokens.size(1);
  const auto opts = m.embed_tokens.options();
  const int64_t* tok = tokens.data_ptr<int64_t>();
  const float* E = m.embed_tokens.data_ptr<float>();
  const float scale = static_cast<float>(m.embed_scale);
  Tensor x = at::empty({R, b, de}, opts);
  float* X = x.data_ptr<float>();
  for (int64_t i = 0; i < M; ++i) {
    TORCH_CHECK(tok[i] >= 0 && tok[i] < V, "decoder_step: a token outside the embedding");
    const float* row = E + tok[i] * de;
    for (int64_t e = 0; e < de; ++e) X[i * de + e] = row[e] * scale;
  }
  if (m.project_in >= 0) {
    Tensor y = at::empty({R, b, m.out_features(m.project_in)}, opts);
    m.raw_linear(m.project_in, X, M, de, y.data_ptr<float>());
    x = y;
    X = x.data_ptr<float>();
  }
  const int64_t d = x.size(2);
  if (m.positions != 0) {
    TORCH_CHECK(m.positions == 2 || table.has_value(), "decoder_step: a sinusoidal model needs its position table");
    const Tensor& rows = m.positions == 1 ? *table : m.learned_positions;
    TORCH_CHECK(rows.scalar_type() == torch::kFloat && rows.is_contiguous() && rows.size(1) == d,
                "decoder_step: a contiguous float32 position table of the model's width");
    const int64_t* pos = positions.data_ptr<int64_t>();
    const float* P = rows.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
      const int64_t id = pos[i] + m.position_padding + 1;
      TORCH_CHECK(id >= 0 && id < rows.size(0), "decoder_step: a position outside the position table");
      for (int64_t e = 0; e < d; ++e) X[i * d + e] = X[i * d + e] + P[id * d + e];
    }
  }
  if (m.layernorm_embedding >= 0) {
    Tensor y = at::empty_like(x), mean = at::empty({M}, opts), rstd = at::empty({M}, opts);
    m.raw_norm(m.layernorm_embedding, x.view({M, d}), y, mean, rstd);
    x = y;
  }
  return x;
}

// `t` as contiguous int64 (itself when it is: no operator call).
Tensor as_index(const Tensor& t) {
  return t.scalar_type() == torch::kLong && t.is_contiguous() ? t : t.to(torch::kLong).contiguous();
}

// Whether keys and values are laid out alike (the raw path addresses both by the keys' strides).
bool same_layout(const Tensor& k, const Tensor& v) { return k.sizes() == v.sizes() && k.strides() == v.strides(); }

// Whether a cache holds each (row, head)'s slots as consecutive rows of hd floats (what the raw path addresses).
bool slots_contiguous(const std::vector<Tensor>& caches, int64_t hd) {
  for (const Tensor& t : caches)
    if (t.dim() != 4 || t.scalar_type() != torch::kFloat || t.stride(3) != 1 || t.stride(2) != hd || t.size(3) != hd)
      return false;
  return true;
}

// The residual and norm around a sublayer on a call's raw buffers (M rows of d floats): `x` the running states,
// `sub` the sublayer's output, `normed` a norm's. Pre-norm: input = norm(x), then x += sub; post-norm: input = x,
// then x = norm(x + sub). One IEEE add an element, layer norm through aten's kernel.
struct Sublayers {
  NativeDecoder& m;
  Tensor &x, &normed, &sub, &mean, &rstd;
  bool pre;
  void residual(int64_t norm) {
    float *X = x.data_ptr<float>(), *S = sub.data_ptr<float>();
    const int64_t n = x.numel();
    if (pre) {
      for (int64_t e = 0; e < n; ++e) X[e] = X[e] + S[e];
    } else {
      for (int64_t e = 0; e < n; ++e) S[e] = X[e] + S[e];
      m.raw_norm(norm, sub, x, mean, rstd);
    }
  }
  const float* input(int64_t norm) {
    if (!pre) return x.data_ptr<float>();
    m.raw_norm(norm, x, normed, mean, rstd);
    return normed.data_ptr<float>();
  }
};

// The layers and the output projection of layer_step / decoder_step on raw buffers: the same kernels in the same
// order — the packed or int8 products and the decode attention through their raw entries (raw_kernels.h),
// at::layer_norm's kernel through its dispatch stub, the residual sums and the cache writes as loops (one IEEE add, one
// copy each) — so the same bits, without ~30 operator calls a layer (each a dispatch, an output tensor, shape
// checks). `x` (R, b, d) is the embedded block (modified in place); returns the logits (R, b, V).
Tensor raw_layers(NativeDecoder& m, Tensor x, const StepInputs& in, const c10::optional<Tensor>& lens_long,
                  const c10::optional<Tensor>& self_row, const c10::optional<Tensor>& self_last,
                  const Tensor& enc_row) {
  const int64_t R = x.size(0), b = x.size(1), d = x.size(2), M = R * b, H = m.heads, hd = m.head_dim;
  TORCH_CHECK(H * hd == d, "decoder_step: heads times their size is the model's width");
  TORCH_CHECK(b == 1 || (self_row.has_value() && self_last.has_value()), "decoder_step: a block's queries' rows");
  const auto opts = x.options();
  x = x.view({M, d});
  Tensor normed = at::empty({M, d}, opts), sub = at::empty({M, d}, opts);
  Tensor mean = at::empty({M}, opts), rstd = at::empty({M}, opts);
  int64_t widest = 3 * d;
  for (const Layer& l : m.layers) widest = std::max(widest, m.out_features(l.fc1));
  if (m.project_out >= 0) widest = std::max(widest, m.out_features(m.project_out));
  Tensor wide = at::empty({M, widest}, opts), att = at::empty({M, d}, opts);
  float *X = x.data_ptr<float>(), *A = normed.data_ptr<float>(), *S = sub.data_ptr<float>();
  float *W = wide.data_ptr<float>(), *T = att.data_ptr<float>();
  const bool pre = m.normalize_before;
  const int64_t start = in.width;
  const int64_t* lens = lens_long.has_value() ? lens_long->data_ptr<int64_t>() : nullptr;
  const int64_t* homes = in.table.has_value() ? in.home.data_ptr<int64_t>() : nullptr;
  const int64_t* home_slots = in.home_slots.defined() ? in.home_slots.data_ptr<int64_t>() : nullptr;
  const int64_t* table = in.table.has_value() ? in.table->data_ptr<int64_t>() : nullptr;
  Sublayers around{m, x, normed, sub, mean, rstd, pre};
  for (int64_t i = 0; i < static_cast<int64_t>(m.layers.size()); ++i) {
    const Layer& layer = m.layers[i];
    // self-attention: q, k, v of every query in one product; the block's keys and values into the caches
    m.raw_linear(layer.qkv, around.input(layer.self_ln), M, d, W);
    const Tensor& keys = in.keys[i];
    const Tensor& values = in.values[i];
    const int64_t P = keys.size(0), C = keys.size(2), sn = keys.stride(0), sh = keys.stride(1);
    float *K = keys.data_ptr<float>(), *V = values.data_ptr<float>();
    for (int64_t r = 0; r < R; ++r) {
      const int64_t row = homes ? homes[r] : r;
      TORCH_CHECK(row >= 0 && row < P, "decoder_step: a home outside the buffer");
      for (int64_t j = 0; j < b; ++j) {
        const int64_t slot = home_slots ? home_slots[r * b + j] : (lens && !homes ? lens[r] : start) + j;
        TORCH_CHECK(slot >= 0 && slot < C, "decoder_step: a slot outside the buffer");
        const float* from = W + (r * b + j) * 3 * d;
        for (int64_t h = 0; h < H; ++h) {
          std::memcpy(K + row * sn + h * sh + slot * hd, from + d + h * hd, hd * sizeof(float));
          std::memcpy(V + row * sn + h * sh + slot * hd, from + 2 * d + h * hd, hd * sizeof(float));
        }
      }
    }
    m.attend_fn({W, 3 * d, M, H, hd, K, V, P, start + b, sn, sh,
                 b == 1 ? nullptr : self_row->data_ptr<int64_t>(),
                 b == 1 ? lens : self_last->data_ptr<int64_t>(), nullptr, 0, table,
                 table ? in.table->size(0) : 0, table ? in.table->size(1) : 0,
                 static_cast<float>(layer.self_scaling), T, enc_row.data_ptr<int64_t>()});
    m.raw_linear(layer.self_out, T, M, d, S);
    around.residual(layer.self_ln);
    // encoder attention
    m.raw_linear(layer.enc_q, around.input(layer.enc_ln), M, d, W);
    const Tensor& ek = in.enc_keys[i];
    const Tensor& ev = in.enc_values[i];
    const bool* padding = in.enc_padding.has_value() ? in.enc_padding->data_ptr<bool>() : nullptr;
    m.attend_fn({W, d, M, H, hd, ek.data_ptr<float>(), ev.data_ptr<float>(), ek.size(0), ek.size(2), ek.stride(0),
                 ek.stride(1), enc_row.data_ptr<int64_t>(), nullptr, padding,
                 padding ? in.enc_padding->size(1) : 0, nullptr, 0, 0, static_cast<float>(layer.enc_scaling), T,
                 nullptr});
    m.raw_linear(layer.enc_out, T, M, d, S);
    around.residual(layer.enc_ln);
    // feed-forward: fc1 with its ReLU fused, fc2
    const int64_t ffn = m.out_features(layer.fc1);
    m.raw_linear(layer.fc1, around.input(layer.final_ln), M, d, W, true);
    m.raw_linear(layer.fc2, W, M, ffn, S);
    around.residual(layer.final_ln);
  }
  const float* out = X;
  int64_t width = d;
  if (m.layer_norm >= 0) {
    m.raw_norm(m.layer_norm, x, normed, mean, rstd);
    out = A;
  }
  if (m.project_out >= 0) {
    m.raw_linear(m.project_out, out, M, width, W);
    out = W;
    width = m.out_features(m.project_out);
  }
  Tensor logits = at::empty({R, b, m.out_features(m.output)}, opts);
  m.raw_linear(m.output, out, M, width, logits.data_ptr<float>());
  return logits;
}

}  // namespace

// The layers (and the final layer norm) of model/encoder.py's encode on raw buffers: fairseq's TransformerEncoderLayer
// in eval mode, pre- or post-norm, ReLU, as encode's Python runs it — q, k and v by their own products, the keys and
// values scattered into a zeroed (N, H, S, hd) layout, the decode attention over each position's sentence with the
// padding, the output product, the residual (and layer norm), fc1 with its ReLU fused, fc2, the residual — the same
// kernels through their raw entries (raw_kernels.h), layer norm through aten's kernel: the same bits, without ~20
// operator calls and their Python a layer (at batch 1 a sentence's encoding cost as much as a third of its decode).
// `x` (T, d): the embedded source positions, packed sentence by sentence; `keep` (T,): their flat positions n * S + j
// in `padding` (N, S); `kv_row` (T,): their sentence n. Returns the states (T, d).
Tensor encoder_layers(const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& x_in, const Tensor& keep_in,
                      const Tensor& kv_row_in, const Tensor& padding_in) {
  NativeDecoder& m = *self;
  at::NoGradGuard no_grad;
  TORCH_CHECK(!m.encoder.empty() && m.raw(), "encoder_layers: an encoder whose products all have raw kernels");
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == torch::kFloat && padding_in.dim() == 2,
              "encoder_layers: float32 positions (T, d) and a padding (N, S)");
  const int64_t T = x_in.size(0), d = x_in.size(1), H = m.heads, hd = m.head_dim;
  const int64_t N = padding_in.size(0), S = padding_in.size(1);
  TORCH_CHECK(H * hd == d && keep_in.numel() == T && kv_row_in.numel() == T, "encoder_layers: shapes");
  const Tensor keep = as_index(keep_in), kv_row = as_index(kv_row_in);
  const Tensor padding = padding_in.to(torch::kBool).contiguous();
  const auto opts = x_in.options();
  Tensor x = x_in.contiguous().clone();
  Tensor normed = at::empty({T, d}, opts), sub = at::empty({T, d}, opts), mean = at::empty({T}, opts),
         rstd = at::empty({T}, opts), q = at::empty({T, d}, opts), k = at::empty({T, d}, opts),
         v = at::empty({T, d}, opts), att = at::empty({T, d}, opts);
  int64_t widest = d;
  for (const EncoderLayer& l : m.encoder) widest = std::max(widest, m.out_features(l.fc1));
  Tensor wide = at::empty({T, widest}, opts);
  // zeros at the padded positions, as encode's `padded` leaves them (a hidden key inside a span weighs 0 times it)
  Tensor keys = at::zeros({N, H, S, hd}, opts), values = at::zeros({N, H, S, hd}, opts);
  float* Sb = sub.data_ptr<float>();
  float *Q = q.data_ptr<float>(), *Kr = k.data_ptr<float>(), *Vr = v.data_ptr<float>(), *At = att.data_ptr<float>();
  float *Wd = wide.data_ptr<float>(), *K = keys.data_ptr<float>(), *V = values.data_ptr<float>();
  const int64_t* at_pos = keep.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t) TORCH_CHECK(at_pos[t] >= 0 && at_pos[t] < N * S, "encoder_layers: a position outside the padding");
  Sublayers around{m, x, normed, sub, mean, rstd, m.normalize_before};
  for (const EncoderLayer& layer : m.encoder) {
    const float* in = around.input(layer.self_ln);
    m.raw_linear(layer.q, in, T, d, Q);
    m.raw_linear(layer.k, in, T, d, Kr);
    m.raw_linear(layer.v, in, T, d, Vr);
    for (int64_t t = 0; t < T; ++t) {  // encode's `padded`: position n * S + j to (n, h, j)
      const int64_t n = at_pos[t] / S, j = at_pos[t] % S;
      for (int64_t h = 0; h < H; ++h) {
        std::memcpy(K + ((n * H + h) * S + j) * hd, Kr + t * d + h * hd, hd * sizeof(float));
        std::memcpy(V + ((n * H + h) * S + j) * hd, Vr + t * d + h * hd, hd * sizeof(float));
      }
    }
    m.attend_fn({Q, d, T, H, hd, K, V, N, S, H * S * hd, S * hd, kv_row.data_ptr<int64_t>(), nullptr,
                 padding.data_ptr<bool>(), S, nullptr, 0, 0, static_cast<float>(layer.scaling), At, nullptr});
    m.raw_linear(layer.out, At, T, d, Sb);
    around.residual(layer.self_ln);
    m.raw_linear(layer.fc1, around.input(layer.final_ln), T, d, Wd, true);
    m.raw_linear(layer.fc2, Wd, T, m.out_features(layer.fc1), Sb);
    around.residual(layer.final_ln);
  }
  if (m.encoder_norm >= 0) {
    m.raw_norm(m.encoder_norm, x, normed, mean, rstd);
    return normed;
  }
  return x;
}

// Logits (R, b, V) of a causal step of `tokens` (R, b) at `positions` (R, b); the block's keys and
// values are written into the caches (keys[l], values[l]: (R, H, capacity, hd)) at [width, width + b)
// or, given `lens` (R,), at each row's lens[r] + j. Given `table` (R, >= width + b) and `home` (R,),
// the caches that never move: the buffers have rows of their own (P, H, capacity, hd), row r writes
// its block into buffer row home[r] and reads slot j from buffer row table[r, j] (the caller has
// written home[r] at the block's slots of the table). The encoder's keys/values (N, H, S, hd) are
// read by `kv_row` (R,), each row's sentence.
Tensor decoder_step(const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& tokens, const Tensor& positions,
                    const c10::optional<Tensor>& position_table, std::vector<Tensor> keys, std::vector<Tensor> values,
                    int64_t width, const c10::optional<Tensor>& lens, std::vector<Tensor> enc_keys,
                    std::vector<Tensor> enc_values, const c10::optional<Tensor>& enc_padding, const Tensor& kv_row,
                    const c10::optional<Tensor>& table, const c10::optional<Tensor>& home) {
  NativeDecoder& m = *self;
  at::NoGradGuard no_grad;
  TORCH_CHECK(keys.size() == m.layers.size() && enc_keys.size() == m.layers.size(), "decoder_step: one cache a layer");
  const int64_t r = tokens.size(0), b = tokens.size(1);
  // the raw path where the model's products have raw kernels (it reads the index tensors by pointer)
  const bool raw = m.raw() && positions.sizes() == tokens.sizes() && m.embed_tokens.scalar_type() == torch::kFloat &&
                   m.embed_tokens.is_contiguous();
  Tensor x = raw ? raw_embed(m, as_index(tokens), as_index(positions), position_table)
                 : embed(m, tokens, positions, position_table);
  TORCH_CHECK(table.has_value() == home.has_value(), "decoder_step: a row table comes with the rows' homes");
  TORCH_CHECK(!home.has_value() || (home->scalar_type() == torch::kLong && home->is_contiguous()),
              "decoder_step: homes are contiguous int64");
  StepInputs in{keys, values, width, lens, Tensor(), table, home.has_value() ? *home : Tensor(), Tensor(),
                c10::nullopt, c10::nullopt, enc_keys, enc_values, enc_padding, kv_row};
  if (lens.has_value()) {  // BlockDecoder._attention_mask: each row writes at its own lens[r] + j
    const Tensor ends = lens->unsqueeze(1) + at::arange(b, tokens.options());
    if (table.has_value()) in.home_slots = ends.to(torch::kLong).contiguous();
    else in.write = ends.view({r, 1, b, 1}).expand({r, m.heads, b, m.head_dim});
  }
  if (b > 1) {  // a causal block: b queries of one row each, query j sees the slots up to its own
    const Tensor base = lens.has_value() ? *lens : at::full({r}, width, tokens.options());
    in.self_last = (base.unsqueeze(1) + at::arange(b, tokens.options())).reshape({r * b});
    in.self_row = at::arange(r, tokens.options()).repeat_interleave(b);
    in.enc_row = kv_row.repeat_interleave(b);
  }
  if (raw && x.scalar_type() == torch::kFloat && x.is_contiguous() && slots_contiguous(keys, m.head_dim) &&
      slots_contiguous(values, m.head_dim) && slots_contiguous(enc_keys, m.head_dim) &&
      slots_contiguous(enc_values, m.head_dim) &&
      (table.has_value() || keys[0].size(0) == r || (b > 1 && lens.has_value() && keys[0].size(0) > r)) &&
      std::equal(keys.begin(), keys.end(), values.begin(), same_layout) &&
      std::equal(enc_keys.begin(), enc_keys.end(), enc_values.begin(), same_layout)) {
    // the raw path reads the index tensors by pointer: int64 (bool for the padding), contiguous
    const auto as_long = [](const c10::optional<Tensor>& t) {
      return t.has_value() ? c10::optional<Tensor>(as_index(*t)) : c10::nullopt;
    };
    if (table.has_value()) in.table = as_index(*table);
    if (enc_padding.has_value() && (enc_padding->scalar_type() != torch::kBool || !enc_padding->is_contiguous()))
      in.enc_padding = enc_padding->to(torch::kBool).contiguous();
    m.raw_count += 1;
    return raw_layers(m, x, in, as_long(lens), as_long(in.self_row), as_long(in.self_last), as_index(*in.enc_row));
  }
  for (int64_t i = 0; i < static_cast<int64_t>(m.layers.size()); ++i) x = layer_step(m, i, x, in);
  if (m.layer_norm >= 0) x = m.norm(m.layer_norm, x);
  if (m.project_out >= 0) x = m.linear(m.project_out, x);
  return m.linear(m.output, x);
}

// rows (R, V).argmax(-1): as a loop over contiguous float32 rows (aten's rule: the first maximum, or the first NaN),
// else aten's.
static Tensor arg_max(const Tensor& rows) {
  if (rows.scalar_type() != torch::kFloat || !rows.is_contiguous() || rows.size(1) == 0) return rows.argmax(-1);
  const int64_t R = rows.size(0), V = rows.size(1);
  Tensor out = at::empty({R}, rows.options().dtype(torch::kLong));
  const float* x = rows.data_ptr<float>();
  int64_t* best = out.data_ptr<int64_t>();
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * V;
    int64_t at = 0;
    for (int64_t i = 0; i < V; ++i) {
      if (std::isnan(row[i])) {
        at = i;
        break;
      }
      if (row[i] > row[at]) at = i;
    }
    best[r] = at;
  }
  return out;
}

// The greedy continuation of `first` (R, f): `steps` steps, the first fed the block `first` at
// `positions` (R, f), each next one the previous step's arg-max of its last logits (one token a row),
// as many decoder_step calls with the arguments the caller would pass them (positions, width and lens
// further by what the last call fed). The caller has reserved the caches' f + steps - 1 slots and, with
// a table, written each row's home at them. Returns the arg-maxes (R, steps) — what a Python loop of
// decoder_step and argmax(-1) gives, without the interpreter between the steps (speculative decoding's
// draft: search/speculative.py).
Tensor decoder_greedy(const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& first, int64_t steps,
                      const Tensor& positions, const c10::optional<Tensor>& position_table, std::vector<Tensor> keys,
                      std::vector<Tensor> values, int64_t width, const c10::optional<Tensor>& lens,
                      std::vector<Tensor> enc_keys, std::vector<Tensor> enc_values,
                      const c10::optional<Tensor>& enc_padding, const Tensor& kv_row,
                      const c10::optional<Tensor>& table, const c10::optional<Tensor>& home) {
  TORCH_CHECK(first.dim() == 2 && first.size(1) >= 1 && positions.sizes() == first.sizes(),
              "decoder_greedy: a block of tokens a row, and their positions");
  TORCH_CHECK(steps >= 1, "decoder_greedy: at least one step");
  Tensor fed = first, at_position = positions;
  c10::optional<Tensor> row_lens = lens;
  std::vector<Tensor> out;
  out.reserve(steps);
  for (int64_t j = 0; j < steps; ++j) {
    const Tensor logits = decoder_step(self, fed, at_position, position_table, keys, values, width, row_lens,
                                       enc_keys, enc_values, enc_padding, kv_row, table, home);
    const int64_t b = fed.size(1);
    width += b;
    if (row_lens.has_value()) row_lens = *row_lens + b;
    at_position = at_position.slice(1, b - 1, b) + 1;
    fed = arg_max(logits.select(1, -1)).unsqueeze(1);  // speculative.py: logits[:, -1].argmax(-1)
    out.push_back(fed);
  }
  return at::cat(out, 1);
}

namespace {

// Whether any row is at its maximum length (at::ge(row_steps, max_len).any(), without the operator calls where both
// are contiguous int64).
bool at_max_len(const Tensor& row_steps, const Tensor& max_len) {
  if (max_len.scalar_type() != torch::kLong || !max_len.is_contiguous()) return at::ge(row_steps, max_len).any().item<bool>();
  const int64_t* s = row_steps.data_ptr<int64_t>();
  const int64_t* m = max_len.data_ptr<int64_t>();
  for (int64_t r = 0; r < row_steps.numel(); ++r)
    if (s[r] >= m[r]) return true;
  return false;
}

// OutputScorer.top (search/output.py) on the fused path for `rows` (n, V), k = c: the fused top-`window` and
// normaliser (the fairseq_stream::topk_lse operator, ops/fused_output.py), fairseq's score edits on that window
// (search/score_edits.py: NeverPad; UnkPenalty where `unk` >= 0; MinLength where `below_min` (n,) says a row is
// short of --min-len), the best `c` by at::topk — the same aten calls as Python's, so the same bits. Returns
// their log-probabilities and tokens (n, c), best first.
std::tuple<Tensor, Tensor> best_of_window(const Tensor& rows, int64_t c, int64_t window, int64_t eos, int64_t pad,
                                          int64_t unk, double unk_penalty, const c10::optional<Tensor>& below_min) {
  using TopkLse = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, int64_t);
  static const auto topk_lse = op("fairseq_stream::topk_lse").typed<TopkLse>();  // ops/fused_output.py loads it
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t V = rows.size(1);  // OutputScorer.top: k = min(k, V), its window min(k + extra, V)
  const auto top = topk_lse.call(rows, std::min(window, V));
  const Tensor& window_tokens = std::get<1>(top);
  Tensor cand = std::get<0>(top) - std::get<2>(top).unsqueeze(1);
  cand.masked_fill_(window_tokens == pad, neg_inf);  // NeverPad
  if (unk >= 0)  // UnkPenalty (filled, then subtracted)
    cand.sub_(at::zeros_like(cand).masked_fill_(window_tokens == unk, unk_penalty));
  if (below_min.has_value())  // MinLength
    cand.masked_fill_(at::logical_and(window_tokens == eos, below_min->unsqueeze(1)), neg_inf);
  const auto best = cand.topk(std::min(c, V), -1);
  return {std::get<0>(best), window_tokens.gather(1, std::get<1>(best))};
}

// best_of_window's first candidate — what the native loops take — of each of n rows of V float32 scores (contiguous),
// on raw buffers: the fused top-`window` and normaliser by the output layer's kernel (topk_lse_raw: the operator's
// arithmetic), the edits as loops (one IEEE subtraction, or -inf, each: the aten calls' values), the first the
// window's maximum. Only where that maximum is a number and unique: then at::topk's first is it whatever its order
// among ties; else (and without the kernel) false, and the caller runs best_of_window. `short_of` says which rows are
// short of --min-len.
struct MinLength {
  int64_t min_len;       // <= 0: none
  const int64_t* steps;  // row r's step, or null: row r is at step first + r (a block's positions)
  int64_t first;
  bool below(int64_t r) const { return min_len > 0 && (steps != nullptr ? steps[r] : first + r) < min_len; }
};

bool first_of_window(NativeDecoder& m, const float* rows, int64_t n, int64_t V, int64_t window, int64_t eos,
                     int64_t pad, int64_t unk, double unk_penalty, const MinLength& short_of, float* lp,
                     int64_t* token) {
  const fairseq_stream_ops::TopkLseFn topk = m.topk();
  if (topk == nullptr) return false;
  const int64_t w = std::min(window, V);
  thread_local std::vector<float> values, lse;
  thread_local std::vector<int64_t> ids;
  values.resize(n * w);
  ids.resize(n * w);
  lse.resize(n);
  topk(rows, n, V, w, values.data(), ids.data(), lse.data());
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const float penalty = static_cast<float>(unk_penalty);  // masked_fill of a float tensor casts it
  for (int64_t r = 0; r < n; ++r) {
    const bool below_min = short_of.below(r);
    float best = 0;
    int64_t at = -1;
    bool tie = false;
    for (int64_t i = 0; i < w; ++i) {
      const int64_t id = ids[r * w + i];
      float v = values[r * w + i] - lse[r];
      if (id == pad) v = neg_inf;                             // NeverPad
      if (unk >= 0) v = v - (id == unk ? penalty : 0.0f);     // UnkPenalty (filled, then subtracted)
      if (below_min && id == eos) v = neg_inf;                          // MinLength
      if (std::isnan(v)) return false;
      if (at < 0 || v > best) {
        best = v;
        at = i;
        tie = false;
      } else if (v == best) {
        tie = true;
      }
    }
    if (tie) return false;
    lp[r] = best;
    token[r] = ids[r * w + at];
  }
  m.search_count += 1;
  return true;
}

}  // namespace

// The greedy beam (k = 1) run ahead natively (search/beam.py, BeamSearch.native_search): up to `steps`
// decoder_step calls, the first fed `first` (R, 1); after each call but the last, every row's best
// candidate is found as the Python step finds it — fused top-`window` and normaliser (the
// fairseq_stream::topk_lse operator, ops/fused_output.py), fairseq's score edits on that window
// (search/score_edits.py: NeverPad, UnkPenalty where `unk` >= 0, MinLength where `min_len` > 0; no row
// may be at its maximum length), the best `c` by at::topk, the first of them — with the same aten
// calls, so the same bits. While no row's best is EOS or a non-finite score (a step where a sentence
// may end), the rows take it in place as the beam operator would (ops/csrc/beam_step.cpp at k = 1:
// scores += lp, the token and its score at column steps[r], steps += 1) and it is fed next. The call
// whose rows may end — or the `steps`-th — returns its logits (R, 1, V) unsearched, for the Python step.
// Returns (those logits, the calls made); the caller has reserved `steps` slots as for decoder_greedy.
std::tuple<Tensor, int64_t> decoder_greedy_search(
    const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& first, int64_t steps, const Tensor& positions,
    const c10::optional<Tensor>& position_table, std::vector<Tensor> keys, std::vector<Tensor> values, int64_t width,
    const c10::optional<Tensor>& lens, std::vector<Tensor> enc_keys, std::vector<Tensor> enc_values,
    const c10::optional<Tensor>& enc_padding, const Tensor& kv_row, const c10::optional<Tensor>& table,
    const c10::optional<Tensor>& home, Tensor scores, Tensor tokens, Tensor token_scores, Tensor row_steps,
    const Tensor& max_len, int64_t c, int64_t window, int64_t eos, int64_t pad, int64_t unk, double unk_penalty,
    int64_t min_len) {
  TORCH_CHECK(first.dim() == 2 && first.size(1) == 1 && positions.sizes() == first.sizes(),
              "decoder_greedy_search: one token a row, and its position");
  TORCH_CHECK(steps >= 1 && c >= 1 && window >= c, "decoder_greedy_search: at least one step and one candidate");
  const int64_t R = first.size(0);
  TORCH_CHECK(scores.dim() == 2 && scores.size(0) == R && scores.size(1) == 1 && scores.is_contiguous() &&
                  tokens.dim() == 3 && tokens.size(0) == R && tokens.size(1) == 1 && tokens.is_contiguous() &&
                  tokens.scalar_type() == torch::kLong && token_scores.sizes() == tokens.sizes() &&
                  token_scores.is_contiguous() && token_scores.scalar_type() == scores.scalar_type() &&
                  row_steps.dim() == 1 && row_steps.size(0) == R && row_steps.is_contiguous() &&
                  row_steps.scalar_type() == torch::kLong && max_len.sizes() == row_steps.sizes(),
              "decoder_greedy_search: one beam slot a row, contiguous state");
  const int64_t L = tokens.size(2);
  int64_t* step_of = row_steps.data_ptr<int64_t>();
  int64_t* token_at = tokens.data_ptr<int64_t>();
  Tensor fed = first, at_position = positions;
  c10::optional<Tensor> row_lens = lens;
  thread_local std::vector<float> first_lp;
  thread_local std::vector<int64_t> first_token;
  for (int64_t j = 0;; ++j) {
    const Tensor logits = decoder_step(self, fed, at_position, position_table, keys, values, width, row_lens,
                                       enc_keys, enc_values, enc_padding, kv_row, table, home);
    width += 1;
    if (row_lens.has_value()) row_lens = *row_lens + 1;
    at_position = at_position + 1;
    if (j + 1 == steps || at_max_len(row_steps, max_len)) return {logits, j + 1};
    // each row's best: on raw buffers (first_of_window) where it can tell it, else by the aten calls
    const Tensor last = logits.select(1, -1);
    const float* lp = nullptr;
    const int64_t* tok = nullptr;
    int64_t stride = c;  // a row's best is column 0 of its c candidates
    if (last.scalar_type() == torch::kFloat && last.is_contiguous()) {
      first_lp.resize(R);
      first_token.resize(R);
      if (first_of_window(*self, last.data_ptr<float>(), R, last.size(1), window, eos, pad, unk, unk_penalty,
                          {min_len, step_of, 0}, first_lp.data(), first_token.data())) {
        lp = first_lp.data();
        tok = first_token.data();
        stride = 1;
      }
    }
    Tensor values, best_tokens;
    if (lp == nullptr) {
      const auto best = best_of_window(last, c, window, eos, pad, unk, unk_penalty,
                                       min_len > 0 ? c10::optional<Tensor>(at::lt(row_steps, min_len)) : c10::nullopt);
      values = std::get<0>(best).contiguous();
      best_tokens = std::get<1>(best).contiguous();
      TORCH_CHECK(values.scalar_type() == torch::kFloat, "decoder_greedy_search: float32 logits");
      lp = values.data_ptr<float>();
      tok = best_tokens.data_ptr<int64_t>();
    }
    // its log-probability cast as BeamSearch._step_after casts it, added to the row's score in that type
    // (beam_step.cpp: scores[s] + top_lp[r, 0]); a sentence may end where it is EOS or the total is not finite: the
    // Python step's. Read by pointer (column 0 of c > 1 candidates is strided in the tensors).
    bool ends = false;
    AT_DISPATCH_FLOATING_TYPES(scores.scalar_type(), "decoder_greedy_search", [&] {
      scalar_t* total = scores.data_ptr<scalar_t>();  // (R, 1) contiguous: row r's score at r
      for (int64_t r = 0; r < R; ++r)
        ends = ends || tok[r * stride] == eos || !std::isfinite(total[r] + static_cast<scalar_t>(lp[r * stride]));
      if (ends) return;
      scalar_t* to = token_scores.data_ptr<scalar_t>();
      for (int64_t r = 0; r < R; ++r) {
        TORCH_CHECK(step_of[r] >= 0 && step_of[r] < L, "decoder_greedy_search: a row past its token columns");
        const scalar_t p = static_cast<scalar_t>(lp[r * stride]);
        total[r] = total[r] + p;
        token_at[r * L + step_of[r]] = tok[r * stride];
        to[r * L + step_of[r]] = p;
        step_of[r] += 1;
      }
    });
    if (ends) return {logits, j + 1};
    fed = at::empty({R, 1}, first.options().dtype(torch::kLong));
    int64_t* next = fed.data_ptr<int64_t>();
    for (int64_t r = 0; r < R; ++r) next[r] = tok[r * stride];
  }
}

namespace {

using Clock = std::chrono::steady_clock;

// A Jacobi verification's windows (jacobi_step.cpp's configuration): the block b (> 0), a block sliding with the
// verified prefix (`tail`) or aligned ones (PAD guesses at a fresh one under `init_pad`), sequential from
// `max_parallel` on (< 0: never).
struct Windows {
  int64_t block;
  bool tail, init_pad;
  int64_t max_parallel;
};

// What the verifications done natively leave for the Python step.
struct Verified {
  Tensor logits;                  // (1, b, V) the last call's, unsearched
  std::vector<int64_t> accepted;  // tokens accepted by each iteration done here
  Tensor feed;                    // (1, b) the last call's block
  std::vector<int64_t> draft;     // the Jacobi draft after the last iteration done here (b' − 1 tokens)
  int64_t verified, width;        // verified tokens; the model's cache width before the last call
};

// The Jacobi verifications of ONE sentence (Santilli2023 Proposition 1; JacobiDecoding in search/jacobi.py) run
// ahead natively: each call feeds the block `feed` (1, b) = [the last verified token, b − 1 guesses] to the model
// (decoder_step at positions width + j) and, while that call's iteration cannot end the sentence, does the
// iteration as the Python step does: each position's prediction by best_of_window with k = 1 (the window 1 + the
// edits' extra) at its own step verified + j; the accepted prefix — the first prediction, then each whose input
// matched — into `tokens`/`token_scores` (1, T) at column `verified` (the model's cache keeps those tokens; the
// rejected slots are overwritten by the next block); the next window (jacobi_window) and Jacobi's own next feed
// (the last verified token, then the unverified predictions shifted, PAD at a fresh aligned block), which
// `guess(pred, a, verified, own, b)` may replace by a proposer's guesses (the next block). The call whose iteration may end
// the sentence — an EOS among its accepted predictions, a position at the maximum length (where ForceEosAtMaxLen
// edits), or the `calls`-th — is returned unsearched, for the Python step. The caches are the one row's (no lens);
// the caller has reserved their slots and written the row's home at them.
template <class Guess>
Verified verify_loop(const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& feed,
                     const c10::optional<Tensor>& position_table, const std::vector<Tensor>& keys,
                     const std::vector<Tensor>& values, int64_t width, const std::vector<Tensor>& enc_keys,
                     const std::vector<Tensor>& enc_values, const c10::optional<Tensor>& enc_padding,
                     const Tensor& kv_row, const c10::optional<Tensor>& table, const c10::optional<Tensor>& home,
                     Tensor tokens, Tensor token_scores, int64_t verified, int64_t max_len, int64_t calls,
                     const Windows& windows, int64_t window, int64_t eos, int64_t pad, int64_t unk, double unk_penalty,
                     int64_t min_len, Guess guess) {
  TORCH_CHECK(feed.dim() == 2 && feed.size(0) == 1 && feed.size(1) >= 1 && windows.block >= 1,
              "decoder_verify: one row's block, aligned or sliding blocks");
  TORCH_CHECK(calls >= 1, "decoder_verify: at least one call");
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(0) == 1 && tokens.is_contiguous() &&
                  tokens.scalar_type() == torch::kLong && token_scores.sizes() == tokens.sizes() &&
                  token_scores.is_contiguous() && tokens.size(1) > max_len,
              "decoder_verify: one row's verified tokens, a column for each up to the maximum length");
  const auto opts = feed.options();
  Verified out;
  out.feed = feed.contiguous();
  thread_local std::vector<float> first_lp;
  thread_local std::vector<int64_t> first_token;
  for (int64_t j = 0;; ++j) {
    const int64_t b = out.feed.size(1);
    out.logits = decoder_step(self, out.feed, at::arange(width, width + b, opts).unsqueeze(0), position_table, keys,
                              values, width, c10::nullopt, enc_keys, enc_values, enc_padding, kv_row, table, home);
    out.verified = verified;
    out.width = width;
    if (j + 1 == calls || verified + b - 1 >= max_len) return out;
    // JacobiDecoding.predictions: each position's best at its own step verified + i (on raw buffers where
    // first_of_window can tell it, else by the aten calls)
    const Tensor rows = out.logits.select(0, 0);
    Tensor pred, score;
    if (rows.scalar_type() == torch::kFloat && rows.is_contiguous()) {
      first_lp.resize(b);
      first_token.resize(b);
      if (first_of_window(*self, rows.data_ptr<float>(), b, rows.size(1), window, eos, pad, unk, unk_penalty,
                          {min_len, nullptr, verified}, first_lp.data(), first_token.data())) {
        pred = at::from_blob(first_token.data(), {b}, opts.dtype(torch::kLong)).clone();  // guess() may keep it
        score = at::empty({b}, token_scores.options());
        AT_DISPATCH_FLOATING_TYPES(score.scalar_type(), "decoder_verify", [&] {
          scalar_t* into = score.data_ptr<scalar_t>();
          for (int64_t i = 0; i < b; ++i) into[i] = static_cast<scalar_t>(first_lp[i]);  // .to(token_scores' type)
        });
      }
    }
    if (!pred.defined()) {
      const auto best = best_of_window(
          rows, 1, window, eos, pad, unk, unk_penalty,
          min_len > 0 ? c10::optional<Tensor>(at::lt(at::arange(verified, verified + b, opts), min_len)) : c10::nullopt);
      pred = std::get<1>(best).select(1, 0).contiguous();
      score = std::get<0>(best).select(1, 0).to(token_scores.scalar_type()).contiguous();
    }
    const int64_t* p = pred.data_ptr<int64_t>();
    const int64_t* f = out.feed.data_ptr<int64_t>();
    int64_t a = 1;  // jacobi_step.cpp: the first prediction, then each whose input matched (the window is b)
    while (a < b && f[a] == p[a - 1]) ++a;
    for (int64_t i = 0; i < a; ++i)
      if (p[i] == eos) return out;  // the sentence ends in this iteration: the Python step verifies it
    int64_t* to = tokens.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(token_scores.scalar_type(), "decoder_verify", [&] {
      const scalar_t* from = score.data_ptr<scalar_t>();
      scalar_t* into = token_scores.data_ptr<scalar_t>();
      for (int64_t i = 0; i < a; ++i) {
        to[verified + i] = p[i];
        into[verified + i] = from[i];
      }
    });
    verified += a;
    width += a;  // RowCache.accept: the rejected slots are overwritten by the next block
    out.accepted.push_back(a);
    // jacobi_step.cpp: the next draft, window and feed
    const bool fresh = windows.init_pad && verified % windows.block == 0;
    std::vector<int64_t>& draft = out.draft;  // a tensor only once, for the Python step (results)
    draft.resize(b - 1);
    for (int64_t i = 0; i < b - 1; ++i) draft[i] = (i + a >= b || fresh) ? pad : p[std::min(i + a, b - 1)];
    const int64_t next = fairseq_stream_ops::jacobi_window(verified, max_len, windows.block, windows.tail, windows.max_parallel);
    std::vector<int64_t> own(next, pad);
    own[0] = p[a - 1];
    for (int64_t i = 1; i < next; ++i) own[i] = i - 1 >= b - 1 ? pad : draft[i - 1];
    out.feed = guess(pred, a, verified, at::tensor(own, opts).view({1, next}), b).contiguous();
  }
}

// The results of a native verification loop as its operators return them.
using LoopResult = std::tuple<Tensor, Tensor, Tensor, Tensor, int64_t, int64_t, int64_t>;
LoopResult results(const Verified& v) {
  const auto opts = v.feed.options();
  return {v.logits, at::tensor(v.accepted, opts), v.feed,
          at::tensor(v.draft, opts).view({1, static_cast<int64_t>(v.draft.size())}),
          static_cast<int64_t>(v.accepted.size()) + 1, v.verified, v.width};
}

}  // namespace

// Jacobi decoding's (gs-jacobi, hybrid-jacobi) and lookahead decoding's verifications of one sentence run ahead
// natively (JacobiDecoding / LookaheadDecoding.native_search): verify_loop with Jacobi's own guesses, or, given
// `pool` (lookahead, Fu et al. 2024 §3), the n-gram pool's after each iteration — the fairseq_stream::ngram_pool_propose
// operator (ops/ngram_pool.py loads it) on the verified tokens, collecting the b keys before the newest complete
// n-gram, as NgramPoolProposer.propose calls it. Returns (the last call's logits, the tokens each iteration done
// here accepted (n,), the last call's feed, the Jacobi draft after the last iteration done here, calls made
// (n + 1), verified, the model's cache width before the last call).
LoopResult decoder_jacobi(const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& feed,
                          const c10::optional<Tensor>& position_table, std::vector<Tensor> keys,
                          std::vector<Tensor> values, int64_t width, std::vector<Tensor> enc_keys,
                          std::vector<Tensor> enc_values, const c10::optional<Tensor>& enc_padding,
                          const Tensor& kv_row, const c10::optional<Tensor>& table, const c10::optional<Tensor>& home,
                          Tensor tokens, Tensor token_scores, int64_t verified, int64_t max_len, int64_t calls,
                          int64_t block, bool tail, bool init_pad, int64_t max_parallel,
                          const c10::optional<Tensor>& pool, const Tensor& bigram_keys, const Tensor& bigram,
                          int64_t vocab, int64_t bos, int64_t window, int64_t eos, int64_t pad, int64_t unk,
                          double unk_penalty, int64_t min_len) {
  using Propose = Tensor(Tensor, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, int64_t, int64_t, int64_t, int64_t);
  const auto guess = [&](const Tensor&, int64_t, int64_t v, const Tensor& own, int64_t b) -> Tensor {
    if (!pool.has_value()) return own;
    static const auto propose = op("fairseq_stream::ngram_pool_propose").typed<Propose>();
    const auto opts = own.options();
    const Tensor out = propose.call(*pool, tokens, at::full({1}, v, opts), own, at::full({1}, own.size(1), opts),
                                    bigram_keys, bigram, b, bos, pad, vocab);
    return own.size(1) >= 2 ? out : own;  // ngram_pool.propose: no room for a guess, the iteration's own
  };
  return results(verify_loop(self, feed, position_table, keys, values, width, enc_keys, enc_values, enc_padding,
                             kv_row, table, home, tokens, token_scores, verified, max_len, calls,
                             Windows{block, tail, init_pad, max_parallel}, window, eos, pad, unk, unk_penalty,
                             min_len, guess));
}

// Speculative decoding's verifications of one sentence run ahead natively (SpeculativeDecoding.native_search;
// Leviathan et al. 2023 Algorithm 1 with greedy acceptance): verify_loop over blocks of γ + 1 sliding with the
// verified prefix, whose guesses are the draft's — after each iteration it catches up as DraftProposer does (its
// cache rolled back to the verified prefix and the min(a − 1, γ − 1) proposals that stayed on it, fed the one or
// two verified tokens it has not seen) and proposes the next `gamma` (decoder_greedy). Returns decoder_jacobi's
// results, then the draft's cache width, the seconds of the whole call and of the draft's calls in it.
std::tuple<Tensor, Tensor, Tensor, Tensor, int64_t, int64_t, int64_t, int64_t, double, double> decoder_speculate(
    const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& feed, const c10::optional<Tensor>& position_table,
    std::vector<Tensor> keys, std::vector<Tensor> values, int64_t width, std::vector<Tensor> enc_keys,
    std::vector<Tensor> enc_values, const c10::optional<Tensor>& enc_padding, const Tensor& kv_row,
    const c10::optional<Tensor>& table, const c10::optional<Tensor>& home,
    const c10::intrusive_ptr<NativeDecoder>& draft, const c10::optional<Tensor>& draft_position_table,
    std::vector<Tensor> draft_keys, std::vector<Tensor> draft_values, int64_t draft_width,
    std::vector<Tensor> draft_enc_keys, std::vector<Tensor> draft_enc_values,
    const c10::optional<Tensor>& draft_enc_padding, const Tensor& draft_kv_row,
    const c10::optional<Tensor>& draft_table, const c10::optional<Tensor>& draft_home, Tensor tokens,
    Tensor token_scores, int64_t verified, int64_t max_len, int64_t calls, int64_t gamma, int64_t window,
    int64_t eos, int64_t pad, int64_t unk, double unk_penalty, int64_t min_len) {
  TORCH_CHECK(gamma >= 1 && feed.size(-1) <= gamma + 1, "decoder_speculate: a block of at most γ + 1 tokens");
  const auto entered = Clock::now();
  Clock::duration drafting{0};
  const auto guess = [&](const Tensor& pred, int64_t a, int64_t, const Tensor& own, int64_t) -> Tensor {
    // DraftProposer._catch_up (one row): keep min(a − 1, γ − 1) proposals, feed the verified tokens after them
    const int64_t keep = std::min(a - 1, gamma - 1);
    draft_width += keep - (gamma - 1);
    const Tensor catch_up = a - keep == 1 ? pred.slice(0, a - 1, a) : pred.slice(0, a - 2, a);
    const int64_t k = catch_up.size(0);
    const auto started = Clock::now();
    const Tensor proposals = decoder_greedy(draft, catch_up.unsqueeze(0), gamma,
                                            at::arange(draft_width, draft_width + k, feed.options()).unsqueeze(0),
                                            draft_position_table, draft_keys, draft_values, draft_width, c10::nullopt,
                                            draft_enc_keys, draft_enc_values, draft_enc_padding, draft_kv_row,
                                            draft_table, draft_home);  // (1, γ)
    drafting += Clock::now() - started;
    draft_width += k + gamma - 1;
    // JacobiDecoding.with_guesses: the last verified token, then the proposals, in the next window
    return at::cat({own.slice(1, 0, 1), proposals.slice(1, 0, own.size(1) - 1)}, 1);
  };
  const Verified v = verify_loop(self, feed, position_table, keys, values, width, enc_keys, enc_values, enc_padding,
                                 kv_row, table, home, tokens, token_scores, verified, max_len, calls,
                                 Windows{gamma + 1, true, false, -1}, window, eos, pad, unk, unk_penalty, min_len,
                                 guess);
  const auto [logits, accepted, last, jacobi_draft, made, ver, w] = results(v);
  return {logits, accepted, last, jacobi_draft, made, ver, w, draft_width,
          std::chrono::duration<double>(Clock::now() - entered).count(), std::chrono::duration<double>(drafting).count()};
}

// One beam step's search after the decoder call, as one operator (search/beam.py, BeamSearch._step_after where its
// output layer is the fused one on the C++ top-k): each row's best `c` candidates of `last` (R, V) by best_of_window
// (OutputScorer.top's aten calls, so the same bits; no row at its maximum length), cast to the beam's score type,
// then the beam operator (ops/csrc/beam_step.cpp, the fairseq_stream::beam_step its Python caller would call with
// the same arguments). Returns that operator's (packet, rows): the Python path's step without the interpreter
// between the two (at k = 5 and batch 1 it was a fifth of a step).
std::tuple<Tensor, Tensor> searched_beam_step(const Tensor& last, int64_t c, int64_t window, int64_t eos, int64_t pad,
                                              int64_t unk, double unk_penalty, const c10::optional<Tensor>& below_min,
                                              const Tensor& row_slot, std::vector<Tensor> state, const Tensor& len_pow,
                                              std::vector<int64_t> config, std::vector<double> params,
                                              std::vector<int64_t> packet_at) {
  static const auto beam_step = op("fairseq_stream::beam_step");  // ops/beam_step.py loads it
  TORCH_CHECK(last.dim() == 2 && state.size() > 1, "searched_beam_step: (R, V) scores and the beam's state");
  const auto best = best_of_window(last, c, window, eos, pad, unk, unk_penalty, below_min);
  // BeamSearch._step_after: top_lp.to(state.scores.dtype); cpp_step: contiguous operands
  const Tensor top_lp = std::get<0>(best).to(state[1].scalar_type()).contiguous();
  torch::jit::Stack stack{top_lp, std::get<1>(best).contiguous(), row_slot.contiguous(), state, len_pow, config,
                          params, packet_at};  // boxed: the state tensors travel as themselves (updated in place)
  beam_step.callBoxed(&stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

// The beam's steps (k > 1) of a group's sentences run ahead natively (search/beam.py, BeamSearch.native_search), its
// cache over a row arena (model/row_arena.py), rows of one length: up to `steps` decoder_step calls, the first fed
// `first` (R, 1); after each call but the last, the step is searched as the Python step searches it
// (searched_beam_step: the fused output layer's candidates with fairseq's edits — --min-len's from the rows' steps,
// state tensor 6 — then the beam operator, updating `state` in place), and while the packet says that no sentence
// finished, the rows are reordered over the arena as RowCache.select does (the fairseq_stream::arena_select operator
// with the arena's other readers; where it would need rows past the arena the loop stops there instead, the reorder
// left to Python, which grows the arena) and the step's tokens fed next, each row's home named at the slot it writes
// (RowCache.write_slots). The rows may change in number from step to step (a pruned beam's width; the first step's
// one row a sentence to k): they share their position, and a row's encoder row is its ancestor's. No row may reach
// its maximum length within `steps` calls (the caller's bound). Returns (the last call's logits (R, 1, V)
// unsearched, or the packet of its searched step; that step's rows (5, ·) or an empty tensor; the table and homes
// after the calls, before that step's reorder; the row slots the last call's rows had; each of them's ancestor
// among the first call's rows; the rows of each call (their number is the calls made); each reordered step's
// packet; whether the last call was searched).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, std::vector<int64_t>, std::vector<Tensor>, bool>
decoder_beam_search(
    const c10::intrusive_ptr<NativeDecoder>& self, const Tensor& first, int64_t steps, const Tensor& positions,
    const c10::optional<Tensor>& position_table, std::vector<Tensor> keys, std::vector<Tensor> values, int64_t width,
    std::vector<Tensor> enc_keys, std::vector<Tensor> enc_values, const c10::optional<Tensor>& enc_padding,
    const Tensor& kv_row, Tensor table, Tensor home, int64_t c, int64_t window, int64_t eos, int64_t pad, int64_t unk,
    double unk_penalty, int64_t min_len, int64_t t_min, int64_t k, Tensor row_slot, std::vector<Tensor> state,
    const Tensor& len_pow, std::vector<int64_t> config, std::vector<double> params, std::vector<int64_t> packet_at,
    std::vector<Tensor> reader_tables, std::vector<int64_t> reader_widths, std::vector<Tensor> reader_homes,
    int64_t arena_rows) {
  static const auto arena_select = op("fairseq_stream::arena_select");  // model/row_arena.py loads it
  constexpr int64_t kStepsField = 6;  // ops/backends.py BEAM_STEP.fields: "steps"
  TORCH_CHECK(first.dim() == 2 && first.size(1) == 1 && positions.sizes() == first.sizes() && steps >= 1 &&
                  table.dim() == 2 && table.size(0) == first.size(0) && home.size(0) == first.size(0) &&
                  packet_at.size() > 2 && state.size() > kStepsField,
              "decoder_beam_search: one token a row, its position, a table and a home a row, the beam's state");
  TORCH_CHECK(width + steps <= table.size(1), "decoder_beam_search: the table has no room for the calls");
  int64_t R = first.size(0);
  // rows of one length: one position for all of them, whatever their number; a row's sentence (its encoder row) is its
  // first call's ancestor's (`lineage`: that row's index, returned so that the caller can follow the rows too)
  Tensor fed = first, at_position = positions, memory_row = kv_row;
  Tensor lineage = at::arange(R, table.options());
  std::vector<int64_t> rows_of_calls;  // each call's rows (a pruned beam's change from step to step)
  std::vector<Tensor> step_packets;  // each reordered step's packet (the caller meters pruned widths from them)
  for (int64_t j = 0;; ++j) {
    rows_of_calls.push_back(R);
    table.select(1, width).copy_(home);  // RowCache.write_slots(1): rows of one length
    const Tensor logits = decoder_step(self, fed, at_position, position_table, keys, values, width, c10::nullopt,
                                       enc_keys, enc_values, enc_padding, memory_row, table, home);
    width += 1;
    at_position = at_position + 1;
    if (j + 1 == steps) return {logits, Tensor(), table, home, row_slot, lineage, rows_of_calls, step_packets, false};
    c10::optional<Tensor> below_min;  // MinLength's rows (BeamSearch._search_natively's)
    if (min_len > 0 && t_min + j < min_len)
      below_min = at::lt(state[kStepsField].index_select(0, at::div(row_slot, k, "floor")), min_len);
    const auto step = searched_beam_step(logits.select(1, -1), c, window, eos, pad, unk, unk_penalty, below_min,
                                         row_slot, state, len_pow, config, params, packet_at);
    const Tensor& packet = std::get<0>(step);
    const Tensor& rows = std::get<1>(step);
    TORCH_CHECK(packet.scalar_type() == torch::kDouble && packet.is_contiguous(), "decoder_beam_search: a float64 packet");
    const double* read = packet.data_ptr<double>();
    const int64_t next = static_cast<int64_t>(read[packet_at[0]]);  // the next step's rows
    if (read[packet_at[1]] > 0 || next == 0)  // a sentence finished
      return {packet, rows, table, home, row_slot, lineage, rows_of_calls, step_packets, true};
    const Tensor parents = rows.select(0, 0).slice(0, 0, next);
    torch::jit::Stack stack{table, home, at::full({next}, width, table.options()), parents, width, reader_tables,
                            reader_widths, reader_homes, arena_rows};
    arena_select.callBoxed(&stack);
    if (stack[2].toInt() > 0)  // the arena must grow
      return {packet, rows, table, home, row_slot, lineage, rows_of_calls, step_packets, true};
    table = stack[0].toTensor();
    home = stack[1].toTensor();
    fed = rows.select(0, 1).slice(0, 0, next).unsqueeze(1).contiguous();
    row_slot = rows.select(0, 4).slice(0, 0, next).contiguous();
    step_packets.push_back(packet);
    lineage = lineage.index_select(0, parents);
    memory_row = kv_row.index_select(0, lineage);
    if (next != R) {  // a variable-width beam, or the first step's one row to k
      at_position = at_position.narrow(0, 0, 1).expand({next, 1}).contiguous();
      R = next;
    }
  }
}

TORCH_LIBRARY_FRAGMENT(fairseq_stream, m) {
  m.class_<NativeDecoder>("NativeDecoder")
      .def(torch::init<int64_t, int64_t, bool, int64_t>())
      .def("add_torch_linear", &NativeDecoder::add_torch_linear)
      .def("add_onednn_linear", &NativeDecoder::add_onednn_linear)
      .def("add_int8_linear", &NativeDecoder::add_int8_linear)
      .def("add_packed_linear", &NativeDecoder::add_packed_linear)
      .def("add_norm", &NativeDecoder::add_norm)
      .def("set_embedding", &NativeDecoder::set_embedding)
      .def("add_layer", &NativeDecoder::add_layer)
      .def("set_output", &NativeDecoder::set_output)
      .def("set_raw", &NativeDecoder::set_raw)
      .def("raw_steps", &NativeDecoder::raw_steps)
      .def("raw_searches", &NativeDecoder::raw_searches)
      .def("raw_ready", &NativeDecoder::raw_ready)
      .def("add_encoder_layer", &NativeDecoder::add_encoder_layer)
      .def("set_encoder_norm", &NativeDecoder::set_encoder_norm);
  m.def("encoder_layers(__torch__.torch.classes.fairseq_stream.NativeDecoder encoder, Tensor x, Tensor keep, "
        "Tensor kv_row, Tensor padding) -> Tensor");
  m.def("decoder_step(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor tokens, "
        "Tensor positions, Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor? lens, "
        "Tensor[] enc_keys, Tensor[] enc_values, Tensor? enc_padding, Tensor kv_row, Tensor? table=None, "
        "Tensor? home=None) -> Tensor");
  m.def("decoder_greedy(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor first, int steps, "
        "Tensor positions, Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor? lens, "
        "Tensor[] enc_keys, Tensor[] enc_values, Tensor? enc_padding, Tensor kv_row, Tensor? table=None, "
        "Tensor? home=None) -> Tensor");
  m.def("decoder_greedy_search(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor first, int steps, "
        "Tensor positions, Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor? lens, "
        "Tensor[] enc_keys, Tensor[] enc_values, Tensor? enc_padding, Tensor kv_row, Tensor? table, Tensor? home, "
        "Tensor(a!) scores, Tensor(b!) tokens, Tensor(c!) token_scores, Tensor(d!) row_steps, Tensor max_len, int c, "
        "int window, int eos, int pad, int unk, float unk_penalty, int min_len) -> (Tensor, int)");
  m.def("decoder_jacobi(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor feed, "
        "Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor[] enc_keys, Tensor[] enc_values, "
        "Tensor? enc_padding, Tensor kv_row, Tensor? table, Tensor? home, Tensor(a!) tokens, Tensor(b!) token_scores, "
        "int verified, int max_len, int calls, int block, bool tail, bool init_pad, int max_parallel, "
        "Tensor(c!)? pool, Tensor bigram_keys, Tensor bigram, int vocab, int bos, int window, int eos, int pad, "
        "int unk, float unk_penalty, int min_len) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)");
  m.def("decoder_speculate(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor feed, "
        "Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor[] enc_keys, Tensor[] enc_values, "
        "Tensor? enc_padding, Tensor kv_row, Tensor? table, Tensor? home, "
        "__torch__.torch.classes.fairseq_stream.NativeDecoder draft, Tensor? draft_position_table, "
        "Tensor[] draft_keys, Tensor[] draft_values, int draft_width, Tensor[] draft_enc_keys, "
        "Tensor[] draft_enc_values, Tensor? draft_enc_padding, Tensor draft_kv_row, Tensor? draft_table, "
        "Tensor? draft_home, Tensor(a!) tokens, Tensor(b!) token_scores, int verified, int max_len, int calls, "
        "int gamma, int window, int eos, int pad, int unk, float unk_penalty, int min_len) "
        "-> (Tensor, Tensor, Tensor, Tensor, int, int, int, int, float, float)");
  m.def("decoder_beam_search(__torch__.torch.classes.fairseq_stream.NativeDecoder decoder, Tensor first, int steps, "
        "Tensor positions, Tensor? position_table, Tensor[] keys, Tensor[] values, int width, Tensor[] enc_keys, "
        "Tensor[] enc_values, Tensor? enc_padding, Tensor kv_row, Tensor table, Tensor home, int c, int window, int eos, "
        "int pad, int unk, float unk_penalty, int min_len, int t_min, int k, Tensor row_slot, Tensor(a!)[] state, "
        "Tensor len_pow, int[] config, float[] params, int[] packet_at, Tensor[] reader_tables, int[] reader_widths, "
        "Tensor[] reader_homes, int arena_rows) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, int[], Tensor[], "
        "bool)");
  m.def("searched_beam_step(Tensor last, int c, int window, int eos, int pad, int unk, float unk_penalty, "
        "Tensor? below_min, Tensor row_slot, Tensor(a!)[] state, Tensor len_pow, int[] config, float[] params, "
        "int[] packet_at) -> (Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(fairseq_stream, CPU, m) {
  m.impl("decoder_step", &decoder_step);
  m.impl("decoder_greedy", &decoder_greedy);
  m.impl("decoder_greedy_search", &decoder_greedy_search);
  m.impl("decoder_jacobi", &decoder_jacobi);
  m.impl("decoder_speculate", &decoder_speculate);
  m.impl("encoder_layers", &encoder_layers);
  m.impl("searched_beam_step", &searched_beam_step);
  m.impl("decoder_beam_search", &decoder_beam_search);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
