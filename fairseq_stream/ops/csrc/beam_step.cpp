// One beam-search step of a group of sentences on the CPU, as one operator (Yang2020 Algorithm 1,
// lines 14-17, with App. A.1's finalisation and Freitag2017's pruning heuristics). It does, in one
// pass per sentence, what fairseq_stream/search/beam.py's PyTorch reference does in ~150
// small tensor operations, with the same arithmetic in the same dtype (no -ffast-math, no FMA
// contraction: the outputs are bit-identical; tests/unit/test_step_backends.py):
//   1. the pool: every live slot's c expansions (slot score + token log-probability), then the
//      ended candidates carried on the beam;
//   2. the best W of the pool (ties: lower pool index first);
//   3. finalisation ("ours": the ended run at the top; "fairseq": every ended one in the top k;
//      "shrink": every ended one in the top k - finals so far);
//   4. final hypotheses written to the fin_* buffers (the first Z of a sentence);
//   5. the beam shrinks by the final count, then the pruning rules (thresholds ap/rp measured
//      from the "final", "active" or "normalized" reference, computed at first use; rpl);
//   6. the k best kept candidates become the new beam; the token history is permuted in place.
// Then the sentences are compacted in place (those that go on first, in order; the finished
// ones after them), and the host's one read is prepared: a packet (counts, the finished
// sentences' final hypotheses' lengths and totals) and the next rows (parent row, token to feed,
// place among the sentence's rows, sentence, flat slot), all in the compacted order.
// A NaN score counts as -inf (it would break the ordering); a sentence that has no final
// hypothesis keeps its best candidate when the rules would prune them all (never zero outputs).
// Padding (a step of shapes fixed per bucket): a row whose slot is -1 is no row; a sentence with no
// candidate (all scores -inf, none ended) ends with no hypothesis and no row; the next rows' slots past
// the live ones are -1.
// Per-sentence rungs (--prune-auto's probes share a step with the run's sentences): an optional
// last state tensor `rung` (S,) indexes a table of (delta, M) pairs; a sentence's expansions past
// its M per row are no candidates (as if the output layer had given it M), and a kind-3 rule
// prunes it by its own delta (none where delta is inf).
#include "step_common.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace {

using namespace fairseq_stream_ops;

enum Field {
  kSentences, kScores, kEnded, kEndedLen, kTokens, kTokenScores, kSteps, kMaxLen, kNFinal, kBestFinal,
  kBestFinalNorm, kSrcLengths, kFinTokens, kFinScores, kFinLen, kFinTotal, kFields
};
enum Reference { kFinal = 0, kActive = 1, kNormalized = 2 };
// The packet's fields, in fairseq_stream/ops/packets.py's order (BEAM_STEP; a test checks it).
enum PacketField { kRows, kFinished, kWidest, kRowCount, kSentence, kFinalCount, kFinalLen, kFinalTotal, kPosition,
                   kPacketFields };

struct Rule {
  int64_t kind;  // 0: threshold (ap, rp) with margin = param; 1: rpl with log(rpl) = param;
                 // 2: threshold with margin max(param2, param * the best kept candidate's -score / length)
                 // 3: threshold with margin = the sentence's rung's delta (skipped where it is inf)
                 // 4: threshold with margin = param against the beam's best, max(param, param2 * |c|)
                 //    against the best final's normalised score (ops/pruning._within's final_per_token)
  int64_t ref;
  bool keep_ended;
  double param;
  double param2;  // kind 2's floor, kind 4's margin a token
};

template <typename T>
struct Step {
  // inputs
  const T* top_lp;
  const int64_t* top_tok;
  int64_t c, k, W, z, eos, pad, L, Z1;
  int64_t mode;  // the finalisation rule: 0 ours, 1 fairseq, 2 shrink (beam_rules.FINALIZATION_CODES)
  bool track_best;
  const std::vector<Rule>* rules;
  const T* len_pow;
  const int64_t* rung;  // (S,) each sentence's rung, or nullptr (no per-sentence rungs)
  const double* table;  // (delta, M) per rung; inf = none
  // state
  T* scores;
  bool* ended;
  int64_t* ended_len;
  int64_t* tokens;
  T* token_scores;
  int64_t* steps;
  int64_t* n_final;
  T* best_final;
  T* best_final_norm;
  int64_t* fin_tokens;
  T* fin_scores;
  int64_t* fin_len;
  T* fin_total;
  const std::vector<int64_t>* row_of;

  // per-sentence results
  struct Out {
    bool done;
    std::vector<char> live;
    std::vector<int64_t> parent, tok;
  };

  void sentence(int64_t s, Out& out) const {
    const T neg_inf = -std::numeric_limits<T>::infinity();
    bool inert = true;  // no candidate (the padding of a bucket state): it ends with nothing, at once
    for (int64_t j = 0; j < k && inert; ++j) inert = !(scores[s * k + j] > neg_inf);
    if (inert) {
      out.done = true;
      out.live.assign(k, 0);
      out.parent.assign(k, 0);
      out.tok.assign(k, 0);
      for (int64_t j = 0; j < k; ++j) ended[s * k + j] = false;
      steps[s] += 1;
      return;
    }
    const int64_t kc = k * c, P = kc + k, Wn = std::min(W, P);
    const double delta = rung ? table[2 * rung[s]] : std::numeric_limits<double>::infinity();
    const double cap = rung ? table[2 * rung[s] + 1] : std::numeric_limits<double>::infinity();
    // 1. the pool
    std::vector<T> pv(P);
    std::vector<int64_t> ptok(kc);
    std::vector<T> plp(kc);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = (*row_of)[s * k + j];
      for (int64_t q = 0; q < c; ++q) {
        const int64_t i = j * c + q;
        if (r >= 0 && q < cap) {
          pv[i] = scores[s * k + j] + top_lp[r * c + q];
          ptok[i] = top_tok[r * c + q];
          plp[i] = top_lp[r * c + q];
        } else {
          pv[i] = neg_inf;
          ptok[i] = pad;
          plp[i] = 0;
        }
      }
      pv[kc + j] = ended[s * k + j] ? scores[s * k + j] : neg_inf;
    }
    for (T& v : pv)
      if (std::isnan(v)) v = neg_inf;  // NaN (fp16 overflow) is no candidate
    // 2. the best W, ties by the lower pool index
    std::vector<int64_t> idx;
    sorted_top(pv.data(), P, Wn, idx);
    std::vector<T> val(Wn), tlp(Wn);
    std::vector<int64_t> par(Wn), tk(Wn), len(Wn);
    std::vector<char> carry(Wn), fin(Wn), keep(Wn);
    const int64_t st = steps[s];
    for (int64_t w = 0; w < Wn; ++w) {
      const int64_t id = idx[w];
      carry[w] = id >= kc;
      const int64_t flat = std::min(id, kc - 1);
      par[w] = carry[w] ? id - kc : flat / c;
      tk[w] = carry[w] ? eos : ptok[flat];
      tlp[w] = carry[w] ? T(0) : plp[flat];
      val[w] = pv[id];
      len[w] = carry[w] ? ended_len[s * k + par[w]] : st + 1;
    }
    // 3. finalisation
    const int64_t nf = n_final[s];
    const int64_t limit = mode == 2 ? k - nf : k;
    bool run = true;
    for (int64_t w = 0; w < Wn; ++w) {
      const bool valid = std::isfinite(val[w]);
      if (mode == 0) {
        fin[w] = run && valid && tk[w] == eos;
        run = fin[w];
        keep[w] = valid && !fin[w];
      } else {
        const bool is_eos = valid && tk[w] == eos;
        fin[w] = is_eos && w < limit;
        keep[w] = valid && !is_eos;
      }
    }
    // 4. final hypotheses
    int64_t seen = 0, ok_count = 0;
    T bf = best_final[s], bfn = best_final_norm[s];
    for (int64_t w = 0; w < Wn; ++w) {
      if (!fin[w]) continue;
      const int64_t rank = nf + seen++;
      if (rank >= z) continue;
      ++ok_count;
      int64_t* ft = fin_tokens + (s * Z1 + rank) * L;
      T* fs = fin_scores + (s * Z1 + rank) * L;
      std::memcpy(ft, tokens + (s * k + par[w]) * L, L * sizeof(int64_t));
      std::memcpy(fs, token_scores + (s * k + par[w]) * L, L * sizeof(T));
      ft[st] = eos;
      fs[st] = tlp[w];
      fin_len[s * Z1 + rank] = len[w];
      fin_total[s * Z1 + rank] = val[w];
      if (track_best) {
        bf = std::max(bf, val[w]);
        bfn = std::max(bfn, T(val[w] / len_pow[len[w]]));
      }
    }
    const int64_t nf_new = nf + ok_count;
    n_final[s] = nf_new;
    if (track_best) {
      best_final[s] = bf;
      best_final_norm[s] = bfn;
    }
    // 5. the beam shrinks by the final count, then the pruning rules
    const int64_t width = mode != 1 ? std::max<int64_t>(k - nf_new, 0) : k;
    int64_t kept = 0;
    for (int64_t w = 0; w < Wn; ++w)
      if (keep[w] && ++kept > width) keep[w] = false;
    const std::vector<char> before_rules = keep;
    bool have[3] = {false, false, false};
    T ref_scalar[3] = {neg_inf, neg_inf, neg_inf};
    std::vector<T> ref_norm;
    for (const Rule& rule : *rules) {
      if (rule.kind == 3 && std::isinf(delta)) continue;  // this sentence's rung has no threshold
      if (rule.kind == 4 && rule.ref == kNormalized) {  // the same operations in the same order as _within
        if (!have[kActive]) {  // the "active" reference, computed at its first use (StepView.reference caches it)
          have[kActive] = true;
          T first = neg_inf;
          for (int64_t w = 0; w < Wn; ++w)
            if (keep[w]) first = std::max(first, val[w]);
          ref_scalar[kActive] = first;
        }
        const T best = ref_scalar[kActive];
        const T margin = static_cast<T>(rule.param);
        std::vector<char> next = keep;
        for (int64_t w = 0; w < Wn; ++w) {
          if (!keep[w]) continue;
          const T scale = static_cast<T>(len_pow[len[w]]);
          const T final_margin = std::max(T(static_cast<T>(rule.param2) * static_cast<T>(len[w])), margin);
          const bool ok = val[w] > T(best - margin) && val[w] > T(T(best_final_norm[s] * scale) - final_margin);
          next[w] = ok || (rule.keep_ended && tk[w] == eos);
        }
        keep.swap(next);
        continue;
      }
      if (rule.kind == 0 || rule.kind == 2 || rule.kind == 3 || rule.kind == 4) {
        if (!have[rule.ref]) {
          have[rule.ref] = true;
          T best = neg_inf;
          for (int64_t w = 0; w < Wn; ++w)
            if (keep[w]) best = std::max(best, val[w]);
          if (rule.ref == kFinal) best = std::max(best, best_final[s]);
          if (rule.ref == kNormalized) {
            ref_norm.resize(Wn);
            for (int64_t w = 0; w < Wn; ++w) ref_norm[w] = std::max(best, T(best_final_norm[s] * len_pow[len[w]]));
          }
          ref_scalar[rule.ref] = best;
        }
        T margin = static_cast<T>(rule.kind == 3 ? delta : rule.param);
        if (rule.kind == 2) {  // beam_rules.SurprisalScaledThreshold, the same operations in the same order
          T best = neg_inf;
          int64_t at = -1;
          for (int64_t w = 0; w < Wn; ++w)
            if (keep[w] && (at < 0 || val[w] > best)) {  // the first of equal bests, as torch.max
              best = val[w];
              at = w;
            }
          T surprisal = T(0);
          if (at >= 0 && std::isfinite(best)) surprisal = T(-best) / T(std::max<int64_t>(len[at], 1));
          margin = std::max(T(static_cast<T>(rule.param) * surprisal), static_cast<T>(rule.param2));
        }
        for (int64_t w = 0; w < Wn; ++w) {
          if (!keep[w]) continue;
          const T ref = rule.ref == kNormalized ? ref_norm[w] : ref_scalar[rule.ref];
          const bool ok = val[w] > T(ref - margin);
          keep[w] = ok || (rule.keep_ended && tk[w] == eos);
        }
      } else {
        T local = neg_inf;
        for (int64_t w = 0; w < Wn; ++w)
          if (keep[w] && !carry[w]) local = std::max(local, tlp[w]);
        const T threshold = T(local + static_cast<T>(rule.param));
        for (int64_t w = 0; w < Wn; ++w)
          if (keep[w] && !carry[w]) keep[w] = tlp[w] > threshold;
      }
    }
    // 6. the new beam: kept candidates first (in rank order), then the others, k slots
    bool any = false;
    for (int64_t w = 0; w < Wn; ++w) any = any || keep[w];
    if (!any && nf_new == 0)  // the rules never leave a sentence without any hypothesis
      for (int64_t w = 0; w < Wn; ++w)
        if (before_rules[w]) {
          keep[w] = any = true;
          break;
        }
    out.done = nf_new >= z || !any;
    std::vector<int64_t> order;
    order.reserve(Wn);
    for (int64_t w = 0; w < Wn; ++w)
      if (keep[w]) order.push_back(w);
    for (int64_t w = 0; w < Wn; ++w)
      if (!keep[w]) order.push_back(w);
    std::vector<int64_t> old_tokens(tokens + s * k * L, tokens + (s + 1) * k * L);
    std::vector<T> old_scores(token_scores + s * k * L, token_scores + (s + 1) * k * L);
    std::vector<int64_t> old_ended_len(ended_len + s * k, ended_len + (s + 1) * k);
    out.live.assign(k, 0);
    out.parent.assign(k, 0);
    out.tok.assign(k, 0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t o = order[j];
      const bool ok = keep[o];
      const bool was_ended = carry[o];
      const int64_t np = par[o], nt = tk[o];
      const bool en = ok && (was_ended || nt == eos);
      scores[s * k + j] = ok ? val[o] : neg_inf;
      ended[s * k + j] = en;
      ended_len[s * k + j] = was_ended ? old_ended_len[np] : (en ? st + 1 : 0);
      std::memcpy(tokens + (s * k + j) * L, old_tokens.data() + np * L, L * sizeof(int64_t));
      std::memcpy(token_scores + (s * k + j) * L, old_scores.data() + np * L, L * sizeof(T));
      tokens[(s * k + j) * L + st] = was_ended ? pad : nt;
      token_scores[(s * k + j) * L + st] = was_ended ? T(0) : tlp[o];
      out.live[j] = ok && !en && !out.done;
      out.parent[j] = np;
      out.tok[j] = nt;
    }
    steps[s] = st + 1;
  }
};

std::tuple<torch::Tensor, torch::Tensor> beam_step(const torch::Tensor& top_lp, const torch::Tensor& top_tok,
                                                   const torch::Tensor& row_slot, at::TensorList state,
                                                   const torch::Tensor& len_pow, at::IntArrayRef config,
                                                   at::ArrayRef<double> params, at::IntArrayRef packet_at) {
  TORCH_CHECK(packet_at.size() == kPacketFields + 1, "beam_step: expected the starts of ", int(kPacketFields),
              " packet fields and the size");
  TORCH_CHECK(state.size() == kFields || state.size() == kFields + 1, "beam_step: expected ", int(kFields),
              " state tensors (and the rungs)");
  for (const auto& t : state) TORCH_CHECK(t.is_contiguous() && t.device().is_cpu(), "beam_step: state must be contiguous CPU tensors");
  TORCH_CHECK(top_lp.is_contiguous() && top_tok.is_contiguous() && row_slot.is_contiguous() && len_pow.is_contiguous(),
              "beam_step: inputs must be contiguous");
  const int64_t k = config[0], z = config[2], n_rules = config[7];
  std::vector<Rule> rules;
  int64_t p = 0;
  for (int64_t i = 0; i < n_rules; ++i) {  // one param a rule, two for kinds 2 and 4
    const int64_t kind = config[8 + 3 * i];
    const bool two = kind == 2 || kind == 4;
    rules.push_back({kind, config[9 + 3 * i], config[10 + 3 * i] != 0, params[p], two ? params[p + 1] : 0.0});
    p += two ? 2 : 1;
  }
  // the rungs' table: its size after the rules in config, its (delta, M) pairs after their params
  const int64_t n_table = static_cast<int64_t>(config.size()) > 8 + 3 * n_rules ? config[8 + 3 * n_rules] : 0;
  const bool rungs = state.size() == kFields + 1;
  TORCH_CHECK(rungs == (n_table > 0) && static_cast<int64_t>(params.size()) == p + 2 * n_table,
              "beam_step: the rungs tensor and the rungs' table come together");
  const int64_t* rung = rungs ? ptr<int64_t>(state[kFields]) : nullptr;
  if (rungs)
    for (int64_t s = 0; s < state[kSentences].size(0); ++s)
      TORCH_CHECK(rung[s] >= 0 && rung[s] < n_table, "beam_step: a rung outside the table");
  const int64_t S = state[kSentences].size(0), R = top_lp.size(0);
  std::vector<int64_t> row_of(S * k, -1);
  const int64_t* rs = row_slot.data_ptr<int64_t>();
  for (int64_t r = 0; r < R; ++r)
    if (rs[r] >= 0) row_of[rs[r]] = r;  // -1: a padding row of a fixed-shape step

  std::vector<int64_t> done(S), per_sentence(S);
  std::vector<std::vector<char>> live(S);
  std::vector<std::vector<int64_t>> parent(S), tok(S);
  AT_DISPATCH_FLOATING_TYPES(top_lp.scalar_type(), "beam_step", [&] {
    using T = scalar_t;
    Step<T> step{ptr<T>(top_lp), top_tok.data_ptr<int64_t>(), top_lp.size(1), k, config[1], z, config[3], config[4],
                 state[kTokens].size(2), state[kFinTokens].size(1), config[5], config[6] != 0, &rules, ptr<T>(len_pow),
                 rung, params.data() + p,
                 ptr<T>(state[kScores]), state[kEnded].data_ptr<bool>(), ptr<int64_t>(state[kEndedLen]),
                 ptr<int64_t>(state[kTokens]), ptr<T>(state[kTokenScores]), ptr<int64_t>(state[kSteps]),
                 ptr<int64_t>(state[kNFinal]), ptr<T>(state[kBestFinal]), ptr<T>(state[kBestFinalNorm]),
                 ptr<int64_t>(state[kFinTokens]), ptr<T>(state[kFinScores]), ptr<int64_t>(state[kFinLen]),
                 ptr<T>(state[kFinTotal]), &row_of};
    for (int64_t s = 0; s < S; ++s) {
      typename Step<T>::Out out;
      step.sentence(s, out);
      done[s] = out.done;
      live[s] = std::move(out.live);
      parent[s] = std::move(out.parent);
      tok[s] = std::move(out.tok);
      per_sentence[s] = std::count(live[s].begin(), live[s].end(), 1);
    }
  });

  // Compaction: the sentences that go on first, in order; the finished ones after them.
  std::vector<int64_t> perm;
  perm.reserve(S);
  for (int64_t s = 0; s < S; ++s)
    if (!done[s]) perm.push_back(s);
  const int64_t going_on = perm.size();
  for (int64_t s = 0; s < S; ++s)
    if (done[s]) perm.push_back(s);
  auto rows = torch::zeros({5, S * k}, row_slot.options());
  int64_t* parents = rows[0].data_ptr<int64_t>();
  int64_t* feed = rows[1].data_ptr<int64_t>();
  int64_t* slot = rows[2].data_ptr<int64_t>();
  int64_t* local = rows[3].data_ptr<int64_t>();
  int64_t* new_slot = rows[4].data_ptr<int64_t>();
  int64_t n_rows = 0, widest = 0;
  for (int64_t ci = 0; ci < going_on; ++ci) {
    const int64_t s = perm[ci];
    int64_t rank = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (!live[s][j]) continue;
      parents[n_rows] = row_of[s * k + parent[s][j]];
      feed[n_rows] = tok[s][j];
      slot[n_rows] = rank++;
      local[n_rows] = ci;
      new_slot[n_rows] = ci * k + j;
      ++n_rows;
    }
    widest = std::max(widest, rank);
  }
  for (int64_t i = n_rows; i < S * k; ++i) new_slot[i] = -1;  // past the live rows: padding rows
  // The packet the host reads: [rows, finished, widest] + per compacted sentence: rows, id,
  // final count, the first Z final lengths and totals, original position.
  const int64_t Z1 = state[kFinTokens].size(1);
  Packet pk(packet_at);
  pk(kRows) = n_rows;
  pk(kFinished) = S - going_on;
  pk(kWidest) = widest;
  const int64_t* sent = ptr<int64_t>(state[kSentences]);
  const int64_t* nfin = ptr<int64_t>(state[kNFinal]);
  const int64_t* flen = ptr<int64_t>(state[kFinLen]);
  AT_DISPATCH_FLOATING_TYPES(top_lp.scalar_type(), "beam_step_packet", [&] {
    const scalar_t* ftot = ptr<scalar_t>(state[kFinTotal]);
    for (int64_t i = 0; i < S; ++i) {
      const int64_t s = perm[i];
      pk(kRowCount, i) = per_sentence[s];
      pk(kSentence, i) = sent[s];
      pk(kFinalCount, i) = nfin[s];
      for (int64_t j = 0; j < z; ++j) {
        pk(kFinalLen, i * z + j) = flen[s * Z1 + j];
        pk(kFinalTotal, i * z + j) = ftot[s * Z1 + j];
      }
      pk(kPosition, i) = s;
    }
  });
  if (!is_identity(perm))
    for (const auto& t : state) permute_rows(t, perm);
  return {pk.tensor, rows};
}

}  // namespace

FAIRSEQ_STREAM_CPU_OPERATOR(beam_step, "(Tensor top_lp, Tensor top_tok, Tensor row_slot, Tensor(a!)[] state, "
                            "Tensor len_pow, int[] config, float[] params, int[] packet_at) -> (Tensor, Tensor)")
