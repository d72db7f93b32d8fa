// One step of the IBDecoder family's multi-word beam search (Zhang2020 Algorithm 1, lines 8-27)
// for a group of sentences on the CPU, as one operator. It does, per row and per sentence, what
// fairseq_stream/search/ib_beam.py's PyTorch reference does in ~130 small tensor operations,
// with the same arithmetic in the same dtype (no -ffast-math, no FMA contraction), so the outputs
// are bit-identical (tests/unit/test_step_backends.py):
//   1. each row's best Bc continuations of z words: the outer sum of the slots' top-Bc
//      log-probabilities, re-pruned to Bc after each slot (slots of ended IMDecoder segments are
//      PAD for free);
//   2. per sentence, the B·Bc continuations of its hypotheses; those that end every segment;
//   3. final hypotheses ("top": only ended continuations among the sentence's B best) written to
//      the fin_* buffers, in place, after the sentence's earlier ones;
//   4. the B best open continuations become the new beam (new tensors of the history's fixed width:
//      a slot's `steps` words, the z new ones, PAD after); a sentence is done with B finals or no
//      open continuation;
//   5. the next rows, S*B of them (parent row, the z words to feed, place among the sentence's rows,
//      flat slot in the order without the finished sentences, -1 past the live rows) and the host's
//      packet [rows, done, widest].
// A row whose slot is -1 (a static step's padding row) is no row of any sentence.
// Every selection is a stable descending sort: ties go to the lower index, as the reference's
// torch.sort(stable=True).
#include "step_common.h"
#include <cmath>
#include <limits>

namespace {

using namespace fairseq_stream_ops;

enum Field { kScores, kTokens, kTokenScores, kSegDone, kNFinal, kFinTokens, kFinScores, kFinLen, kFinTotal, kSteps,
             kFields };
// The packet's fields, in fairseq_stream/ops/packets.py's order (IB_STEP; a test checks it).
enum PacketField { kRows, kFinished, kWidest, kPacketFields };

template <typename T>
struct IBStep {
  static constexpr T inf = std::numeric_limits<T>::infinity();
  int64_t R, z, bc, S, B, L, G, Z1, cols, eos, pad;  // L: the history's width
  bool top;
  const int64_t* row_slot;
  const int64_t* steps;  // per sentence: the words of its slots' histories
  const bool* seg_done;
  const int64_t* slot_segment;
  // per row r and continuation q: z words and their log-probabilities, the sum, segments ended
  std::vector<int64_t> words;
  std::vector<T> lps, acc;
  std::vector<char> seg;
  // per sentence: its B·Bc continuations (-inf where a slot has no row), which end; row of a slot
  std::vector<T> full;
  std::vector<char> full_end;
  std::vector<int64_t> row_of;

  // 1. Each row's best Bc continuations (reference: _continuations, _segments_done).
  void continuations(const T* vals_in, const int64_t* toks_in) {
    std::vector<T> vals(vals_in, vals_in + R * z * bc);
    std::vector<int64_t> toks(toks_in, toks_in + R * z * bc);
    if (G > 1)  // the slots of a segment that ended are padding, for free
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < z && row_slot[r] >= 0; ++j)
          if (seg_done[row_slot[r] * G + slot_segment[j]]) {
            for (int64_t q = 0; q < bc; ++q) vals[(r * z + j) * bc + q] = q == 0 ? T(0) : -inf;
            toks[(r * z + j) * bc] = pad;
          }
    words.assign(R * bc * z, 0);
    lps.assign(R * bc * z, T(0));
    acc.assign(R * bc, T(0));
    for (int64_t r = 0; r < R; ++r)
      if (row_slot[r] >= 0) combine(r, &vals[r * z * bc], &toks[r * z * bc]);
    seg.assign(R * bc * G, 0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t q = 0; q < bc && row_slot[r] >= 0; ++q)
        for (int64_t g = 0; g < G; ++g) {
          bool hit = seg_done[row_slot[r] * G + g];
          for (int64_t j = 0; j < z && !hit; ++j)
            hit = words[(r * bc + q) * z + j] == eos && (G == 1 || slot_segment[j] == g);
          seg[(r * bc + q) * G + g] = hit;
        }
  }

  // Row r's slots by outer addition, re-pruned to Bc after each slot (exact: the sum is monotone).
  void combine(int64_t r, const T* vals, const int64_t* toks) {
    T* a = &acc[r * bc];
    int64_t* w = &words[r * bc * z];
    T* l = &lps[r * bc * z];
    for (int64_t q = 0; q < bc; ++q) {
      a[q] = vals[q];
      w[q * z] = toks[q];
      l[q * z] = vals[q];
    }
    std::vector<T> grid(bc * bc), next_acc(bc), next_lps(bc * z);
    std::vector<int64_t> idx, next_words(bc * z);
    for (int64_t j = 1; j < z; ++j) {
      const T* v = &vals[j * bc];
      for (int64_t p = 0; p < bc; ++p)
        for (int64_t q = 0; q < bc; ++q) grid[p * bc + q] = a[p] + v[q];
      sorted_top(grid.data(), bc * bc, bc, idx);
      for (int64_t m = 0; m < bc; ++m) {
        const int64_t p = idx[m] / bc, q = idx[m] % bc;
        next_acc[m] = grid[idx[m]];
        std::copy(w + p * z, w + p * z + j, &next_words[m * z]);
        std::copy(l + p * z, l + p * z + j, &next_lps[m * z]);
        next_words[m * z + j] = toks[j * bc + q];
        next_lps[m * z + j] = v[q];
      }
      std::copy(next_acc.begin(), next_acc.end(), a);
      std::copy(next_words.begin(), next_words.end(), w);
      std::copy(next_lps.begin(), next_lps.end(), l);
    }
  }

  // 2. Per sentence, the continuations of its B slots (reference: step).
  void pool(const T* scores) {
    full.assign(S * B * bc, -inf);
    full_end.assign(S * B * bc, 0);
    row_of.assign(S * B, -1);
    for (int64_t r = 0; r < R; ++r) {
      if (row_slot[r] < 0) continue;  // a padding row
      row_of[row_slot[r]] = r;
      for (int64_t q = 0; q < bc; ++q) {
        const T total = scores[row_slot[r]] + acc[r * bc + q];
        bool all = true;
        for (int64_t g = 0; g < G; ++g) all = all && seg[(r * bc + q) * G + g];
        full[row_slot[r] * bc + q] = total;
        full_end[row_slot[r] * bc + q] = all && std::isfinite(total);
      }
    }
  }

  // Sentence s's history of slot `slot` followed by continuation q of its row, PAD (score 0) after, into a row
  // of `width` columns.
  void extend(int64_t s, int64_t slot, int64_t q, const int64_t* tokens, const T* token_scores, int64_t* out_tok,
              T* out_lp, int64_t width) const {
    const int64_t r = std::max<int64_t>(row_of[s * B + slot], 0), t = steps[s];
    std::copy(tokens + (s * B + slot) * L, tokens + (s * B + slot) * L + t, out_tok);
    std::copy(token_scores + (s * B + slot) * L, token_scores + (s * B + slot) * L + t, out_lp);
    std::copy(&words[(r * bc + q) * z], &words[(r * bc + q + 1) * z], out_tok + t);
    std::copy(&lps[(r * bc + q) * z], &lps[(r * bc + q + 1) * z], out_lp + t);
    std::fill(out_tok + t + z, out_tok + width, pad);
    std::fill(out_lp + t + z, out_lp + width, T(0));
  }
};

// The state tensors' data, typed.
template <typename T>
struct StateData {
  const T* scores;
  const int64_t* tokens;
  const T* token_scores;
  const int64_t* n_final;
  int64_t* fin_tokens;
  T* fin_scores;
  int64_t* fin_len;
  T* fin_total;
  explicit StateData(const std::vector<torch::Tensor>& st)
      : scores(st[kScores].data_ptr<T>()), tokens(st[kTokens].data_ptr<int64_t>()),
        token_scores(st[kTokenScores].data_ptr<T>()), n_final(st[kNFinal].data_ptr<int64_t>()),
        fin_tokens(st[kFinTokens].data_ptr<int64_t>()), fin_scores(st[kFinScores].data_ptr<T>()),
        fin_len(st[kFinLen].data_ptr<int64_t>()), fin_total(st[kFinTotal].data_ptr<T>()) {}
};

// 3. Sentence s's final hypotheses into the fin_* buffers, in place (reference: _record); returns
// how many.
template <typename T>
int64_t record(const IBStep<T>& c, const StateData<T>& d, int64_t s) {
  const int64_t n = c.B * c.bc, width = std::min(c.B, n);
  const T* f = &c.full[s * n];
  const char* fe = &c.full_end[s * n];
  std::vector<T> cand(n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) cand[i] = fe[i] ? f[i] : -IBStep<T>::inf;
  if (c.top) {  // only ended continuations among the sentence's B best count
    sorted_top(f, n, width, idx);
    const T kth = f[idx.back()];
    for (int64_t i = 0; i < n; ++i) cand[i] = f[i] >= kth ? cand[i] : -IBStep<T>::inf;
  }
  sorted_top(cand.data(), n, width, idx);
  int64_t count = 0;
  for (int64_t m = 0; m < width; ++m) {
    const T best = cand[idx[m]];
    if (!std::isfinite(best)) continue;  // the reference's scratch slot: never read
    const int64_t dest = d.n_final[s] + count++;
    TORCH_CHECK(dest < c.Z1 - 1, "ib_step: more final hypotheses than the fin_* buffers hold");
    int64_t* ft = &d.fin_tokens[(s * c.Z1 + dest) * c.cols];
    T* fs = &d.fin_scores[(s * c.Z1 + dest) * c.cols];
    c.extend(s, idx[m] / c.bc, idx[m] % c.bc, d.tokens, d.token_scores, ft, fs, c.cols);
    d.fin_len[s * c.Z1 + dest] = c.steps[s] + c.z;
    d.fin_total[s * c.Z1 + dest] = best;
  }
  return count;
}

// The new state and the next rows (new tensors); the finished hypotheses are in the fin_* buffers.
struct NewState {
  torch::Tensor scores, tokens, token_scores, seg_done, n_final, done;
  std::vector<int64_t> parent_row, n_live;
  std::vector<char> live;
};

// 4. Sentence s's new beam: the B best open continuations (reference: _advance).
template <typename T>
void advance(const IBStep<T>& c, const StateData<T>& d, int64_t s, NewState& o) {
  const int64_t n = c.B * c.bc, width = std::min(c.B, n), B = c.B, L = c.L;
  const T* f = &c.full[s * n];
  const char* fe = &c.full_end[s * n];
  std::vector<T> cand(n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) cand[i] = fe[i] ? -IBStep<T>::inf : f[i];
  sorted_top(cand.data(), n, width, idx);
  idx.resize(B, 0);  // fewer candidates than B: the rest is empty (-inf) and copies candidate 0
  bool any = false;
  for (int64_t m = 0; m < width; ++m) any = any || std::isfinite(cand[idx[m]]);
  bool* done = o.done.data_ptr<bool>();
  done[s] = o.n_final.data_ptr<int64_t>()[s] >= B || !any;
  for (int64_t m = 0; m < B; ++m) {
    const T val = m < width ? cand[idx[m]] : -IBStep<T>::inf;
    const bool ok = std::isfinite(val);
    const int64_t slot = idx[m] / c.bc, q = idx[m] % c.bc, r = std::max<int64_t>(c.row_of[s * B + slot], 0);
    o.scores.data_ptr<T>()[s * B + m] = ok ? val : -IBStep<T>::inf;
    c.extend(s, slot, q, d.tokens, d.token_scores, o.tokens.data_ptr<int64_t>() + (s * B + m) * L,
             o.token_scores.data_ptr<T>() + (s * B + m) * L, L);
    for (int64_t g = 0; g < c.G; ++g) o.seg_done.data_ptr<bool>()[(s * B + m) * c.G + g] = c.seg[(r * c.bc + q) * c.G + g];
    o.parent_row[s * B + m] = r;
    o.live[s * B + m] = ok && !done[s];
    o.n_live[s] += o.live[s * B + m];
  }
}

// 5. The next rows in flat order, slots numbered without the finished sentences (S*B of them: zeros and slot -1
// past the live rows); the packet.
std::vector<torch::Tensor> next_rows(const NewState& o, int64_t S, int64_t B, int64_t L, const int64_t* steps,
                                     int64_t z, const torch::TensorOptions& i64, at::IntArrayRef packet_at) {
  const bool* done = o.done.data_ptr<bool>();
  const int64_t* tokens = o.tokens.data_ptr<int64_t>();
  int64_t n_rows = 0, n_done = 0, widest = 0;
  for (int64_t s = 0; s < S; ++s) {
    n_rows += o.n_live[s];
    n_done += done[s];
    widest = std::max(widest, o.n_live[s]);
  }
  auto parents = torch::zeros({S * B}, i64), feed = torch::zeros({S * B, z}, i64);
  auto slot = torch::zeros({S * B}, i64), live_flat = torch::full({S * B}, -1, i64);
  int64_t *pp = parents.data_ptr<int64_t>(), *fd = feed.data_ptr<int64_t>();
  int64_t *sl = slot.data_ptr<int64_t>(), *lf = live_flat.data_ptr<int64_t>();
  int64_t row = 0, kept = 0;
  for (int64_t s = 0; s < S; ++s) {
    int64_t rank = 0;
    for (int64_t m = 0; m < B; ++m) {
      if (!o.live[s * B + m]) continue;
      pp[row] = o.parent_row[s * B + m];
      const int64_t* words = tokens + (s * B + m) * L + steps[s];
      std::copy(words, words + z, fd + row * z);
      sl[row] = rank++;
      lf[row] = kept * B + m;
      ++row;
    }
    kept += !done[s];
  }
  Packet pk(packet_at);
  pk(kRows) = n_rows;
  pk(kFinished) = n_done;
  pk(kWidest) = widest;
  return {pk.tensor, parents, feed, slot, live_flat};
}

template <typename T>
std::vector<torch::Tensor> run(const torch::Tensor& vals, const torch::Tensor& toks, const torch::Tensor& row_slot,
                               const std::vector<torch::Tensor>& st, const torch::Tensor& slot_segment, int64_t B,
                               int64_t eos, int64_t pad, bool top, at::IntArrayRef packet_at) {
  IBStep<T> c;
  c.R = vals.size(0), c.z = vals.size(1), c.bc = vals.size(2);
  c.S = st[kScores].size(0), c.B = B, c.L = st[kTokens].size(2), c.G = st[kSegDone].size(2);
  c.Z1 = st[kFinTokens].size(1), c.cols = st[kFinTokens].size(2), c.eos = eos, c.pad = pad, c.top = top;
  c.row_slot = row_slot.data_ptr<int64_t>();
  c.steps = st[kSteps].data_ptr<int64_t>();
  c.seg_done = st[kSegDone].data_ptr<bool>();
  c.slot_segment = slot_segment.data_ptr<int64_t>();
  const StateData<T> d(st);
  c.continuations(vals.data_ptr<T>(), toks.data_ptr<int64_t>());
  c.pool(d.scores);
  const int64_t S = c.S;
  for (int64_t s = 0; s < S; ++s)
    TORCH_CHECK(c.steps[s] >= 0 && c.steps[s] + c.z <= std::min(c.L, c.cols), "ib_step: a history past its buffer");
  NewState o;
  o.scores = torch::empty({S, B}, st[kScores].options());
  o.tokens = torch::empty({S, B, c.L}, st[kTokens].options());
  o.token_scores = torch::empty({S, B, c.L}, st[kScores].options());
  o.seg_done = torch::empty({S, B, c.G}, st[kSegDone].options());
  o.n_final = torch::empty({S}, st[kNFinal].options());
  o.done = torch::empty({S}, st[kSegDone].options());
  o.parent_row.assign(S * B, 0);
  o.n_live.assign(S, 0);
  o.live.assign(S * B, 0);
  for (int64_t s = 0; s < S; ++s) {
    o.n_final.data_ptr<int64_t>()[s] = d.n_final[s] + record(c, d, s);
    advance(c, d, s, o);
  }
  auto rows = next_rows(o, S, B, c.L, c.steps, c.z, st[kTokens].options(), packet_at);
  return {rows[0], o.scores, o.tokens, o.token_scores, o.seg_done, o.n_final, o.done, rows[1], rows[2], rows[3], rows[4]};
}

std::vector<torch::Tensor> ib_step(const torch::Tensor& vals, const torch::Tensor& toks, const torch::Tensor& row_slot,
                                   const std::vector<torch::Tensor>& state, const torch::Tensor& slot_segment,
                                   const std::vector<int64_t>& config, const std::vector<int64_t>& packet_at) {
  TORCH_CHECK(packet_at.size() == kPacketFields + 1, "ib_step: expected the starts of ", int64_t(kPacketFields),
              " packet fields and the size");
  TORCH_CHECK(state.size() == kFields, "ib_step: expected ", int64_t(kFields), " state tensors");
  TORCH_CHECK(config.size() == 4, "ib_step: config is [beam, eos, pad, finalize_top]");
  for (const auto& x : state) TORCH_CHECK(x.is_contiguous(), "ib_step: state tensors must be contiguous");
  TORCH_CHECK(vals.is_contiguous() && toks.is_contiguous() && row_slot.is_contiguous(), "ib_step: inputs must be contiguous");
  TORCH_CHECK(vals.scalar_type() == state[kScores].scalar_type(), "ib_step: scores and candidates differ in dtype");
  std::vector<torch::Tensor> out;
  AT_DISPATCH_FLOATING_TYPES(vals.scalar_type(), "ib_step", [&] {
    out = run<scalar_t>(vals, toks, row_slot, state, slot_segment, config[0], config[1], config[2], config[3] != 0, packet_at);
  });
  return out;
}

}  // namespace

FAIRSEQ_STREAM_CPU_OPERATOR(ib_step, "(Tensor vals, Tensor toks, Tensor row_slot, Tensor(a!)[] state, "
                            "Tensor slot_segment, int[] config, int[] packet_at) -> Tensor[]")
