// How c_allgather moves a sparse gradient (a SelectedRows tensor, FleetTensor.rows) between the
// ranks of a ring. Either way every rank ends with the same Out, whose rows are every rank's in
// rank order (rows[k * entries + i] = rank k's rows[i]) and whose sum is the sum of the ranks'
// gradients; the two ways differ in how that sum is spread over a row's entries.
//
//   gather  Paddle's exchange of SelectedRows: every rank's rows and slices, concatenated. A rank
//           receives (nranks - 1) * entries * (8 + row bytes).
//   dense   the rows are gathered as above; the slices are added into a table-sized sum on each
//           rank and that sum is all-reduced. Out's first entry of each row then holds the row's
//           sum and its repeats hold zeros. A rank receives (nranks - 1) * entries * 8 for the
//           rows and, in a ring all-reduce, 2 * (nranks - 1) / nranks * height * row bytes.
//
// The rows, and so the rows an update touches (lazy Adam, the decay of a sparse gradient), are
// the same both ways; a row's sum may differ in its last bits, its terms being added in another
// order. Dense pays off when the ranks' entries together exceed about twice the table's height:
// small tables, large batches, many ranks.
//
// Entries whose row is -1 (empty, fleet_abi.h) are gathered as they are and add nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collective/communicator.h"
#include "fleet/fleet_abi.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// The way chosen for one c_allgather of a sparse gradient, and what each way moves.
struct SparseExchangePlan {
  bool dense = false;
  double gather_bytes = 0;  // received by a rank per exchange, gathering rows and slices
  double dense_bytes = 0;   // received by a rank per exchange, the dense way
  std::string mode;         // the op's sparse_exchange: "auto", "gather" or "dense"

  // "gathered (rows and slices): 2 ranks x 1704 entries of a 10000-row table, 0.08 MB received
  // per rank, where the dense way would take 0.41 MB (sparse_exchange "auto")".
  std::string Describe(int64_t nranks, int64_t entries, int64_t height) const;
};

// Chooses for `mode` ("auto": the way that moves fewer bytes, gather on a tie). The dense way
// needs the tensors in host memory (`host_memory`) and float32 or float64 slices, and a sum that
// fits in memory's address space: "auto" gathers without them, "dense" is INVALID_ARGUMENT
// saying which is missing.
StatusOr<SparseExchangePlan> PlanSparseExchange(std::string_view mode, int64_t nranks,
                                                int64_t entries, int64_t height,
                                                int64_t row_elems, ir::DataType dtype,
                                                bool host_memory);

// The gather way: X's slices and then its rows into Out's, each as a plain tensor, so
// communicators never see a SelectedRows descriptor (host or device memory alike).
Status GatherEntries(Communicator& ring, const FleetTensor& x, const FleetTensor& out,
                     FleetStream* stream, const CallSite& slices_site, const CallSite& rows_site);

// The dense way's table-sized sum, owned by one prepared op. It holds zeros between exchanges,
// so an exchange clears only the rows it touched.
// Threading: one exchange at a time (an op is never launched concurrently with itself).
class DenseSparseExchange {
 public:
  // RESOURCE_EXHAUSTED naming `what` and the size when the sum cannot be allocated.
  static StatusOr<std::unique_ptr<DenseSparseExchange>> Create(int64_t height, int64_t row_elems,
                                                               ir::DataType dtype,
                                                               const std::string& what);

  // Out = every rank's entries of X (see above), X and Out in host memory; `rows_site` and
  // `sum_site` are the call sites of the rows' gather and the sum's all-reduce. A row outside
  // [0, height) and not -1, from any rank, is INVALID_ARGUMENT on every rank naming the rank,
  // its entry and the row, before the all-reduce.
  Status Run(Communicator& ring, const FleetTensor& x, const FleetTensor& out,
             const CallSite& rows_site, const CallSite& sum_site);

 private:
  DenseSparseExchange(int64_t height, int64_t row_elems, ir::DataType dtype);

  int64_t height_;
  int64_t row_elems_;
  ir::DataType dtype_;
  std::vector<double> sum_;  // height * row_elems elements of dtype_ (double: aligned for both)
  bool dirty_ = false;       // an exchange failed part way; sum_ may hold non-zeros
};

}  // namespace fleet
