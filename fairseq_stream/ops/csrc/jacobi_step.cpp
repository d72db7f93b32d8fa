// One Jacobi iteration of a group of sentences on the CPU, as one operator (Santilli2023,
// Algorithms 1-3): what fairseq_stream/search/jacobi.py's PyTorch reference does in ~70
// small tensor operations, with the same arithmetic (the summed scores accumulate in double, as
// PyTorch's CPU cumsum does), so the outputs are bit-identical (tests/unit/test_step_backends.py).
// Per sentence, from the predictions of the block just fed:
//   1. verified = the first prediction, then each one whose inputs all matched (capped by the
//      window); stop at the first verified EOS;
//   2. the verified predictions join the tokens; the unverified ones, shifted, are the next
//      draft (a new (S, b - 1) tensor; PAD at a fresh aligned block under --jacobi-init pad);
//   3. the next window (PJ: the rest; PGJ: to the end of the aligned block; tail: b; HGJ: 1
//      beyond L), done = EOS verified or past the maximum length;
//   4. the next feed: the last verified token, then the draft, PAD past the window.
// Then the sentences are compacted in place (those that go on first, the finished ones after)
// and the host's one read is prepared: [finished, next block width, longest row, accepted
// tokens, shortest row] + per compacted sentence: done, id, verified length, iterations,
// summed score, position before compaction.
#include "step_common.h"
#include <algorithm>
#include <limits>

namespace {

using namespace fairseq_stream_ops;

enum Field { kSentences, kTokens, kTokenScores, kVerified, kMaxLen, kIterations, kWidth, kFields };
// The packet's fields, in fairseq_stream/ops/packets.py's order (JACOBI_STEP; a test checks it).
// (scoped: "verified" and "iterations" name state fields too)
enum class PacketField { kFinished, kNextWidth, kLongest, kAccepted, kShortest, kDone, kSentence, kVerified, kIterations,
                         kTotal, kPosition, kPacketFields };
using P = PacketField;

template <typename T>
void run(const torch::Tensor& pred_t, const torch::Tensor& score_t, const torch::Tensor& feed_t, at::TensorList state,
         at::IntArrayRef config, std::vector<char>& done, std::vector<int64_t>& accept, std::vector<double>& total,
         torch::Tensor& next_draft, torch::Tensor& next_feed) {
  const int64_t eos = config[0], pad = config[1], bos = config[2], block = config[3], max_parallel = config[6];
  const bool init_pad = config[4] != 0, tail = config[5] != 0;
  const int64_t S = pred_t.size(0), b = pred_t.size(1), L = state[kTokens].size(1), D = b - 1;
  const int64_t B = next_feed.size(1);
  const int64_t* pred = pred_t.data_ptr<int64_t>();
  const T* score = score_t.data_ptr<T>();
  const int64_t* feed = feed_t.data_ptr<int64_t>();
  int64_t* tokens = state[kTokens].data_ptr<int64_t>();
  T* token_scores = state[kTokenScores].data_ptr<T>();
  int64_t* verified = state[kVerified].data_ptr<int64_t>();
  int64_t* draft = next_draft.data_ptr<int64_t>();
  const int64_t* max_len = state[kMaxLen].data_ptr<int64_t>();
  int64_t* iterations = state[kIterations].data_ptr<int64_t>();
  int64_t* width = state[kWidth].data_ptr<int64_t>();
  int64_t* out = next_feed.data_ptr<int64_t>();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t* p = pred + s * b;
    int64_t n = 1;  // 1. verified: the first prediction, then each whose inputs matched
    while (n < b && feed[s * b + n] == p[n - 1]) ++n;
    int64_t acc = std::min(n, width[s]);
    bool has_eos = false;
    for (int64_t j = 0; j < acc; ++j)
      if (p[j] == eos) {
        has_eos = true;
        acc = j + 1;
        break;
      }
    const int64_t a = verified[s];
    for (int64_t j = 0; j < acc; ++j) {  // 2. tokens and the next draft
      tokens[s * L + a + j] = p[j];
      token_scores[s * L + a + j] = score[s * b + j];
    }
    const int64_t v = a + acc;
    const bool fresh_block = init_pad && block > 0 && v % block == 0;
    for (int64_t j = 0; j < D; ++j) {
      const int64_t shift = j + acc;
      draft[s * D + j] = (shift >= width[s] || fresh_block) ? pad : p[std::min(shift, b - 1)];
    }
    verified[s] = v;
    iterations[s] += 1;
    width[s] = jacobi_window(v, max_len[s], block, tail, max_parallel);  // 3. the next window
    done[s] = has_eos || v > max_len[s];
    accept[s] = acc;
    double sum = 0;  // PyTorch's CPU cumsum accumulates in double and rounds each output
    T rounded = 0;
    for (int64_t j = 0; j < std::max<int64_t>(v, 1); ++j) {
      sum += static_cast<double>(token_scores[s * L + j]);
      rounded = static_cast<T>(sum);
    }
    total[s] = static_cast<double>(rounded);
    int64_t* f = out + s * B;  // 4. the next feed
    f[0] = v == 0 ? bos : tokens[s * L + v - 1];
    for (int64_t j = 1; j < B; ++j) f[j] = (j >= width[s] || j - 1 >= D) ? pad : draft[s * D + j - 1];
  }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> jacobi_step(const torch::Tensor& pred, const torch::Tensor& score,
                                                                    const torch::Tensor& feed, at::TensorList state,
                                                                    at::IntArrayRef config, at::IntArrayRef packet_at) {
  TORCH_CHECK(packet_at.size() == static_cast<size_t>(P::kPacketFields) + 1, "jacobi_step: expected the starts of ", static_cast<int>(P::kPacketFields),
              " packet fields and the size");
  TORCH_CHECK(state.size() == kFields, "jacobi_step: expected ", int(kFields), " state tensors");
  for (const auto& t : state) TORCH_CHECK(t.is_contiguous() && t.device().is_cpu(), "jacobi_step: state must be contiguous CPU tensors");
  TORCH_CHECK(pred.is_contiguous() && score.is_contiguous() && feed.is_contiguous(), "jacobi_step: inputs must be contiguous");
  const int64_t S = pred.size(0), B = config[7];
  std::vector<char> done(S);
  std::vector<int64_t> accept(S);
  std::vector<double> total(S);
  auto next_feed = torch::empty({S, B}, pred.options());
  auto next_draft = torch::empty({S, pred.size(1) - 1}, pred.options());
  AT_DISPATCH_FLOATING_TYPES(score.scalar_type(), "jacobi_step", [&] {
    run<scalar_t>(pred, score, feed, state, config, done, accept, total, next_draft, next_feed);
  });
  std::vector<int64_t> perm;  // the sentences that go on first, the finished ones after
  for (int64_t s = 0; s < S; ++s)
    if (!done[s]) perm.push_back(s);
  const int64_t going_on = perm.size();
  for (int64_t s = 0; s < S; ++s)
    if (done[s]) perm.push_back(s);
  const int64_t* sent = state[kSentences].data_ptr<int64_t>();
  const int64_t* verified = state[kVerified].data_ptr<int64_t>();
  const int64_t* iterations = state[kIterations].data_ptr<int64_t>();
  const int64_t* width = state[kWidth].data_ptr<int64_t>();
  Packet pk(packet_at);
  int64_t next_b = 1, longest = std::numeric_limits<int64_t>::min(), accepted = 0, low = int64_t(1) << 30;
  for (int64_t s = 0; s < S; ++s) {
    next_b = std::max(next_b, done[s] ? int64_t(1) : width[s]);
    longest = std::max(longest, verified[s]);
    accepted += accept[s];
    if (!done[s]) low = std::min(low, verified[s]);
  }
  pk(P::kFinished) = S - going_on;
  pk(P::kNextWidth) = next_b;
  pk(P::kLongest) = longest;
  pk(P::kAccepted) = accepted;
  pk(P::kShortest) = low;
  for (int64_t i = 0; i < S; ++i) {
    const int64_t s = perm[i];
    pk(P::kDone, i) = done[s];
    pk(P::kSentence, i) = sent[s];
    pk(P::kVerified, i) = verified[s];
    pk(P::kIterations, i) = iterations[s];
    pk(P::kTotal, i) = total[s];
    pk(P::kPosition, i) = s;
  }
  auto aux = torch::empty({2, S}, pred.options());  // accept (the rows' order before compaction), then the order
  int64_t* ax = aux.data_ptr<int64_t>();
  for (int64_t s = 0; s < S; ++s) {
    ax[s] = accept[s];
    ax[S + s] = perm[s];
  }
  if (!is_identity(perm)) {
    for (const auto& t : state) permute_rows(t, perm);
    permute_rows(next_draft, perm);
    permute_rows(next_feed, perm);
  }
  return {pk.tensor, next_draft, next_feed, aux};
}

}  // namespace

FAIRSEQ_STREAM_CPU_OPERATOR(jacobi_step, "(Tensor pred, Tensor score, Tensor feed, Tensor(a!)[] state, int[] config, "
                            "int[] packet_at) -> (Tensor, Tensor, Tensor, Tensor)")
