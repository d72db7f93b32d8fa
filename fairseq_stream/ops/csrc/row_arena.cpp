// A beam reorder of a cache over a row arena (fairseq_stream/model/row_arena.py, `select`), as one
// operator: what the PyTorch path does in ~15 small tensor operations and a host read per step (at
// k = 5 and batch 1 about a tenth of a step on the demo model), with the same results
// (tests/unit/test_row_arena.py). With the new rows `rows` (repetition allowed) of length `lens`:
//   1. each new row takes its parent's table and home;
//   2. the first child of a parent keeps the parent's home (it continues its positions); every further
//      child ("branching", in row order) needs a buffer row nobody reads from position `at` on, `at`
//      the shortest branching row's length: a row is free when no live cache's table (up to its width)
//      reads it at a position >= at, none of the new table's rows does (up to `width`), and it is no
//      live cache's home nor a new row's;
//   3. the branching rows take the free rows in ascending order; where too few are free, the rest take
//      rows `arena_rows`, `arena_rows + 1`, ... (the caller grows the buffers by `missing` rows first).
// Integers only.
#include "step_common.h"
#include <limits>

namespace {

std::tuple<torch::Tensor, torch::Tensor, int64_t> arena_select(
    const torch::Tensor& table, const torch::Tensor& home, const torch::Tensor& lens, const torch::Tensor& rows,
    int64_t width, const std::vector<torch::Tensor>& reader_tables, const std::vector<int64_t>& reader_widths,
    const std::vector<torch::Tensor>& reader_homes, int64_t arena_rows) {
  TORCH_CHECK(table.dim() == 2 && home.dim() == 1 && lens.dim() == 1 && rows.dim() == 1 &&
                  table.scalar_type() == torch::kLong && home.scalar_type() == torch::kLong &&
                  lens.scalar_type() == torch::kLong && rows.scalar_type() == torch::kLong &&
                  lens.size(0) == rows.size(0) && home.size(0) == table.size(0),
              "arena_select: table (R, capacity), home (R,), lens and rows (R',) int64 disagree");
  TORCH_CHECK(reader_tables.size() == reader_widths.size() && reader_tables.size() == reader_homes.size(),
              "arena_select: one width and one home per reader table");
  TORCH_CHECK(width >= 0 && width <= table.size(1), "arena_select: width past the table");
  const auto new_table = table.index_select(0, rows);
  const auto new_home = home.index_select(0, rows);
  const int64_t n = rows.size(0), cap = new_table.size(1);
  if (n == 0) return {new_table, new_home, 0};
  const auto rw = rows.contiguous();
  const auto ln = lens.contiguous();
  const int64_t* R = rw.data_ptr<int64_t>();
  const int64_t* L = ln.data_ptr<int64_t>();
  int64_t* H = new_home.data_ptr<int64_t>();
  const int64_t* T = new_table.data_ptr<int64_t>();

  // 2. the branching rows (not their parent's first child) and the shortest of their lengths
  std::vector<int64_t> branching;
  {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return R[a] < R[b]; });
    for (int64_t i = 1; i < n; ++i)
      if (R[order[i]] == R[order[i - 1]]) branching.push_back(order[i]);
    std::sort(branching.begin(), branching.end());
  }
  if (branching.empty()) return {new_table, new_home, 0};
  int64_t at = std::numeric_limits<int64_t>::max();
  for (int64_t i : branching) at = std::min(at, L[i]);

  // the last position each buffer row is read at (a home: never free)
  constexpr int64_t kHome = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> last(arena_rows, -1);
  auto read = [&](const int64_t* t, int64_t rows_, int64_t stride, int64_t w) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t b = t[r * stride + j];
        TORCH_CHECK(b >= 0 && b < arena_rows, "arena_select: a table names a row past the arena");
        last[b] = std::max(last[b], j);
      }
  };
  auto homes = [&](const int64_t* h, int64_t count) {
    for (int64_t r = 0; r < count; ++r) {
      TORCH_CHECK(h[r] >= 0 && h[r] < arena_rows, "arena_select: a home past the arena");
      last[h[r]] = kHome;
    }
  };
  for (size_t c = 0; c < reader_tables.size(); ++c) {
    const auto t = reader_tables[c].contiguous();
    const auto h = reader_homes[c].contiguous();
    TORCH_CHECK(t.dim() == 2 && t.scalar_type() == torch::kLong && h.scalar_type() == torch::kLong &&
                    reader_widths[c] <= t.size(1),
                "arena_select: a reader's table (R, capacity) int64 and width disagree");
    read(t.data_ptr<int64_t>(), t.size(0), t.size(1), reader_widths[c]);
    homes(h.data_ptr<int64_t>(), h.numel());
  }
  read(T, n, cap, width);
  homes(H, n);

  // 3. the free rows in ascending order to the branching rows in row order; new rows past the arena after them
  size_t taken = 0;
  for (int64_t b = 0; b < arena_rows && taken < branching.size(); ++b)
    if (last[b] < at) H[branching[taken++]] = b;
  const int64_t missing = static_cast<int64_t>(branching.size() - taken);
  for (int64_t i = 0; taken < branching.size(); ++taken, ++i) H[branching[taken]] = arena_rows + i;
  return {new_table, new_home, missing};
}

}  // namespace

FAIRSEQ_STREAM_CPU_OPERATOR(arena_select, "(Tensor table, Tensor home, Tensor lens, Tensor rows, int width, "
                                          "Tensor[] reader_tables, int[] reader_widths, Tensor[] reader_homes, "
                                          "int arena_rows) -> (Tensor, Tensor, int)")
