// Parameter-server ops (Paddle's paddle/fluid/operators/distributed_ops/): what the pserver
// transpile pass (passes/pserver_pass.h) inserts. send, recv, send_barrier, fetch_barrier,
// distributed_lookup_table, geo_sgd and listen_and_serv are marked `rpc`: the executor runs
// them on the host's kernels over the job's transport, never on a device. split_byref and
// split_selected_rows are ordinary ops with device kernels (a row split of a dense and of a
// sparse gradient). None is differentiable; they are inserted after the backward pass.
//
// Control vars ("__control_var@<k>") only order the RPC ops; they carry no data and are
// float32 [0]. recv and fetch_barrier leave their outputs' shapes open: those are the declared
// shapes of the vars they fill.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ops/op_registry.h"

namespace fleet::ops {
namespace {

using Strings = std::vector<std::string>;

// A string-list attribute; an empty list of another element type (which the verifier accepts
// for any list) reads as empty.
Strings StringsAttr(const ShapeContext& c, std::string_view name) {
  const auto* v = std::get_if<Strings>(&c.Attr(name));
  return v != nullptr ? *v : Strings{};
}

// Every schema here except split_byref is an RPC op.
void RegisterRpc(OpRegistry& registry, OpSchema schema) {
  schema.rpc = true;
  RegisterBuiltin(registry, std::move(schema));
}

// The vars of output slot `slot` become control vars.
void SetControlOutputs(ShapeContext& c, std::string_view slot) {
  if (!c.HasOutput(slot)) return;
  for (size_t i = 0; i < c.OutputCount(slot); ++i) {
    c.Output(slot, i) = TensorInfo{ir::DataType::kFloat32, {0}};
  }
}

// `attr` (a string list) holds one entry per var of `slot`, none of them empty.
Status CheckOnePerVar(const ShapeContext& c, std::string_view attr, std::string_view slot,
                      bool input) {
  const Strings names = StringsAttr(c, attr);
  const size_t n = input ? c.InputCount(slot) : c.OutputCount(slot);
  if (names.size() != n) {
    return c.Error(std::string(attr) + " holds " + std::to_string(names.size()) +
                   " endpoints but " + std::string(slot) + " holds " + std::to_string(n) +
                   " vars; it needs one per var");
  }
  for (const std::string& ep : names) {
    if (ep.empty()) return c.Error(std::string(attr) + " holds an empty endpoint");
  }
  return OkStatus();
}

Status CheckTrainerId(const ShapeContext& c) {
  if (c.IntAttr("trainer_id") < 0) {
    return c.Error("trainer_id must be >= 0, not " + std::to_string(c.IntAttr("trainer_id")));
  }
  return OkStatus();
}

void RegisterSend(OpRegistry& registry) {
  OpSchema s;
  s.type = "send";
  s.summary = "sends X[i] to the pserver epmap[i] (Out: control vars that order the later "
              "barrier and recv)";
  s.inputs = {{"X", false, true}};
  s.outputs = {{"Out", true, true}};
  s.selected_rows_inputs = {"X"};  // a block of a sparse gradient goes out with its rows
  s.attrs = {{"epmap", Strings{}},
             {"sections", std::vector<int64_t>{}},
             {"send_varnames", Strings{}},
             {"trainer_id", int32_t{0}},
             {"merge_add", false},
             {"use_send_handler", true}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckTrainerId(c));
    // With send_varnames (Paddle's runtime split) one X goes out as several named blocks.
    if (StringsAttr(c, "send_varnames").empty()) {
      FLEET_RETURN_IF_ERROR(CheckOnePerVar(c, "epmap", "X", /*input=*/true));
    }
    SetControlOutputs(c, "Out");
    return OkStatus();
  };
  RegisterRpc(registry, std::move(s));
}

void RegisterRecv(OpRegistry& registry) {
  OpSchema s;
  s.type = "recv";
  s.summary = "fills Out[i] with the pserver epmap[i]'s value of the var of the same name (X: "
              "control vars it waits for)";
  s.inputs = {{"X", true, true}};
  s.outputs = {{"Out", false, true}};
  s.attrs = {{"epmap", Strings{}},
             {"trainer_id", int32_t{0}},
             {"recv_varnames", Strings{}},
             {"do_not_run", false}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckTrainerId(c));
    if (StringsAttr(c, "recv_varnames").empty()) {
      FLEET_RETURN_IF_ERROR(CheckOnePerVar(c, "epmap", "Out", /*input=*/false));
    }
    return OkStatus();  // Out keeps the declared shapes
  };
  RegisterRpc(registry, std::move(s));
}

// send_barrier and fetch_barrier: one message to every endpoint, then a wait for every reply.
void RegisterBarrier(OpRegistry& registry, bool send) {
  OpSchema s;
  s.type = send ? "send_barrier" : "fetch_barrier";
  s.summary = send ? "tells every pserver this trainer has sent its gradients for the step and "
                     "waits for the acknowledgements"
                   : "tells every pserver this trainer has received its parameters (Out: the "
                     "vars the recv ops filled, so later readers depend on the barrier)";
  s.inputs = {{"X", true, true}};
  s.outputs = {{"Out", true, true}};
  s.attrs = {{"endpoints", Strings{}}, {"trainer_id", int32_t{0}}};
  if (send) s.attrs.push_back({"half_async", false});
  s.infer_shape = [send](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckTrainerId(c));
    const Strings eps = StringsAttr(c, "endpoints");
    if (eps.empty()) return c.Error("endpoints is empty; it must list every pserver");
    for (const std::string& ep : eps) {
      if (ep.empty()) return c.Error("endpoints holds an empty endpoint");
    }
    if (send) SetControlOutputs(c, "Out");
    return OkStatus();
  };
  RegisterRpc(registry, std::move(s));
}

void RegisterListenAndServ(OpRegistry& registry) {
  OpSchema s;
  s.type = "listen_and_serv";
  s.summary = "the pserver loop: receives X from Fanin trainers on `endpoint` and runs the "
              "optimize block of each received gradient (grad_to_block_id) after the learning-"
              "rate block (lr_decay_block_id), once per round (distributed_mode 0, sync) or per "
              "gradient (1, async)";
  s.inputs = {{"X", true, true}};
  s.selected_rows_inputs = {"X"};  // the sparse gradients the server receives
  s.attrs = {{"endpoint", std::string("127.0.0.1:6164")},
             {"pserver_id", int32_t{-1}},
             {"Fanin", int32_t{1}},
             {"distributed_mode", int32_t{0}},
             {"optimize_blocks", std::vector<int32_t>{}},
             {"grad_to_block_id", Strings{}},
             {"lr_decay_block_id", int32_t{-1}},
             {"sparse_grad_to_param", Strings{}},
             // Growable tables the server holds: "<block> <var> ...", the table's block (a
             // one-row prototype) and the vars its optimizer keeps per row, which grow with it.
             {"growable_tables", Strings{}}};
  s.infer_shape = [](ShapeContext& c) {
    if (c.StringAttr("endpoint").empty()) return c.Error("endpoint is empty");
    if (c.IntAttr("Fanin") < 1) {
      return c.Error("Fanin (the number of trainers) must be >= 1, not " +
                     std::to_string(c.IntAttr("Fanin")));
    }
    const int64_t mode = c.IntAttr("distributed_mode");
    if (mode < 0 || mode > 3) {
      return c.Error("distributed_mode must be 0 (sync), 1 (async), 2 (half async) or 3 (geo), "
                     "not " + std::to_string(mode));
    }
    const std::vector<int64_t> blocks = c.IntsAttr("optimize_blocks");
    for (int64_t b : blocks) {
      if (b < 1) return c.Error("optimize_blocks holds block " + std::to_string(b) +
                                "; optimize blocks are sub-blocks (index >= 1)");
    }
    for (const std::string& entry : StringsAttr(c, "grad_to_block_id")) {
      const size_t colon = entry.rfind(':');
      int64_t id = -1;
      if (colon != std::string::npos && colon > 0 && colon + 1 < entry.size()) {
        try {
          size_t used = 0;
          id = std::stoll(entry.substr(colon + 1), &used);
          if (used != entry.size() - colon - 1) id = -1;
        } catch (const std::exception&) {
          id = -1;
        }
      }
      if (id < 0) {
        return c.Error("grad_to_block_id entry '" + entry + "' is not \"<grad>:<block index>\"");
      }
      if (std::find(blocks.begin(), blocks.end(), id) == blocks.end()) {
        return c.Error("grad_to_block_id entry '" + entry + "' names block " +
                       std::to_string(id) + ", which is not in optimize_blocks");
      }
    }
    return OkStatus();
  };
  RegisterRpc(registry, std::move(s));
}

void RegisterSplitByref(OpRegistry& registry) {
  OpSchema s;
  s.type = "split_byref";
  s.summary = "Out[i] = rows [sum(sections[:i]), sum(sections[:i+1])) of X (dim 0), or X cut "
              "into `num` equal row blocks when sections is empty";
  s.inputs = {{"X"}};
  s.outputs = {{"Out", false, true}};
  s.attrs = {{"sections", std::vector<int32_t>{}}, {"num", int32_t{0}}};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (x.dims.empty()) return c.Error("X must have at least one dimension");
    const size_t n = c.OutputCount("Out");
    std::vector<int64_t> sections = c.IntsAttr("sections");
    const int64_t num = c.IntAttr("num");
    const int64_t rows = x.dims[0];
    if (sections.empty()) {
      if (num < 1) return c.Error("needs sections or num >= 1");
      if (rows >= 0 && rows % num != 0) {
        return c.Error("X has " + std::to_string(rows) + " rows, which num=" +
                       std::to_string(num) + " does not divide");
      }
      sections.assign(static_cast<size_t>(num), rows >= 0 ? rows / num : -1);
    }
    if (sections.size() != n) {
      return c.Error("sections has " + std::to_string(sections.size()) + " entries but Out holds " +
                     std::to_string(n) + " vars");
    }
    int64_t total = 0;
    for (int64_t r : sections) {
      if (r < 0 && rows >= 0) return c.Error("sections holds a negative row count");
      total += r;
    }
    if (rows >= 0 && total != rows) {
      return c.Error("sections add up to " + std::to_string(total) + " rows but X has " +
                     std::to_string(rows));
    }
    for (size_t i = 0; i < n; ++i) {
      TensorInfo out = x;
      out.dims[0] = sections[i];
      c.Output("Out", i) = out;
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

// A sparse gradient cut at the parameter's row blocks, for the servers that hold them.
void RegisterSplitSelectedRows(OpRegistry& registry) {
  OpSchema s;
  s.type = "split_selected_rows";
  s.summary = "Out[i] (selected_rows, height height_sections[i]) = the entries of X whose row "
              "lies in block i (rows [sum(height_sections[:i]), sum(height_sections[:i+1]))), "
              "in X's order, rows made relative to the block; each Out has X's room for entries";
  s.inputs = {{"X"}};
  s.outputs = {{"Out", false, true}};
  // by_hash: the gradient of a growable table, whose rows are ids: entry e goes to
  // Out[fleet_row_shard(row, n)] with its row unchanged, and every Out has X's height.
  s.attrs = {{"height_sections", std::vector<int64_t>{}}, {"by_hash", false}};
  s.selected_rows_inputs = {"X"};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (!x.selected_rows() || x.dims.empty()) {
      return c.Error("X must be a sparse gradient (selected_rows)");
    }
    const std::vector<int64_t> sections = c.IntsAttr("height_sections");
    const size_t n = c.OutputCount("Out");
    if (c.BoolAttr("by_hash")) {
      if (!sections.empty() || n == 0) {
        return c.Error("by_hash takes no height_sections and at least one Out");
      }
      for (size_t i = 0; i < n; ++i) c.Output("Out", i) = x;
      return OkStatus();
    }
    if (sections.size() != n) {
      return c.Error("height_sections has " + std::to_string(sections.size()) +
                     " entries but Out holds " + std::to_string(n) + " vars");
    }
    int64_t total = 0;
    for (int64_t r : sections) {
      if (r < 0 || r > x.height - total) {
        return c.Error("height_sections " + ir::ShapeText(sections) + " do not cut X's " +
                       std::to_string(x.height) + " rows");
      }
      total += r;
    }
    if (total != x.height) {
      return c.Error("height_sections add up to " + std::to_string(total) + " rows but X has " +
                     std::to_string(x.height));
    }
    for (size_t i = 0; i < n; ++i) {
      TensorInfo out = x;
      out.height = sections[i];
      c.Output("Out", i) = out;
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

// The rows a trainer needs of a table that lives only on the servers (Paddle's remote
// prefetch): Outputs[i] = the rows of Ids[i], fetched from the servers that hold them. The
// table is cut in row blocks of height_sections, block k named table_names[k] on
// endpoints[k]; the trainer never holds it, so its dtype and row width are attributes.
void RegisterDistributedLookupTable(OpRegistry& registry) {
  OpSchema s;
  s.type = "distributed_lookup_table";
  s.summary = "Outputs[i] = the rows of Ids[i] of a table held by the pservers in row blocks "
              "(table_names[k] on endpoints[k], height_sections[k] rows); rows of padding_idx "
              "are zero";
  s.inputs = {{"Ids", false, true, true}};
  s.outputs = {{"Outputs", false, true}};
  s.attrs = {{"table_names", Strings{}},
             {"height_sections", std::vector<int64_t>{}},
             {"endpoints", Strings{}},
             {"padding_idx", int64_t{-1}},
             {"trainer_id", int32_t{0}},
             {"lookup_table_version", std::string("lookup_table_v2")},
             {"emb_dim", int64_t{0}},
             {"dtype", int32_t{FLEET_DTYPE_FLOAT32}},
             // A growable table: block k holds the ids i with fleet_row_shard(i, blocks) == k,
             // keyed by the id itself (height_sections are then one row each, the prototype).
             {"growable", false},
             // Reads only (an evaluation): a growable table's servers make no row for it.
             {"is_test", false}};
  // One row per id, in the ids' sequences; each Ids[i] may be a slot of its own sequences.
  s.lod_share = {{"Outputs", "Ids"}};
  s.mixed_sequences = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckTrainerId(c));
    const Strings tables = StringsAttr(c, "table_names");
    const Strings endpoints = StringsAttr(c, "endpoints");
    const std::vector<int64_t> sections = c.IntsAttr("height_sections");
    if (tables.empty() || tables.size() != endpoints.size() || tables.size() != sections.size()) {
      return c.Error("table_names, endpoints and height_sections need one entry per block of "
                     "the table, and hold " + std::to_string(tables.size()) + ", " +
                     std::to_string(endpoints.size()) + " and " +
                     std::to_string(sections.size()));
    }
    int64_t height = 0;
    for (size_t k = 0; k < sections.size(); ++k) {
      if (tables[k].empty() || endpoints[k].empty()) {
        return c.Error("block " + std::to_string(k) + " has an empty table name or endpoint");
      }
      if (sections[k] < 1 || sections[k] > (int64_t{1} << 62) - height) {
        return c.Error("height_sections " + ir::ShapeText(sections) +
                       " must be positive row counts");
      }
      height += sections[k];
    }
    const int64_t pad = c.IntAttr("padding_idx");
    if (pad < -1 || (pad >= height && !c.BoolAttr("growable"))) {
      return c.Error("padding_idx " + std::to_string(pad) + " is outside the table's " +
                     std::to_string(height) + " rows (-1 = none)");
    }
    const int64_t dim = c.IntAttr("emb_dim");
    if (dim < 1) return c.Error("emb_dim must be the table's row width (>= 1), not " +
                                std::to_string(dim));
    const int64_t dtype = c.IntAttr("dtype");
    if (dtype != FLEET_DTYPE_FLOAT32 && dtype != FLEET_DTYPE_FLOAT64) {
      return c.Error("dtype must be float32 (9) or float64 (10), not " + std::to_string(dtype));
    }
    const std::string version = c.StringAttr("lookup_table_version");
    if (version != "lookup_table" && version != "lookup_table_v2") {
      return c.Error("lookup_table_version must be lookup_table or lookup_table_v2, not '" +
                     version + "'");
    }
    const size_t n = c.InputCount("Ids");
    if (c.OutputCount("Outputs") != n) {
      return c.Error("Outputs holds " + std::to_string(c.OutputCount("Outputs")) +
                     " vars for " + std::to_string(n) + " Ids; it needs one per Ids");
    }
    for (size_t i = 0; i < n; ++i) {
      const TensorInfo& ids = c.Input("Ids", i);
      if (ids.dtype != ir::DataType::kInt64) {
        return c.Error("Ids " + std::to_string(i) + " must be int64, got " +
                       std::string(ir::DataTypeName(ids.dtype)));
      }
      TensorInfo out{static_cast<ir::DataType>(dtype), ids.dims};
      // lookup_table (v1) takes ids [..., 1] and replaces that dim with the row.
      if (version == "lookup_table") {
        if (ids.dims.empty() || ids.dims.back() != 1) {
          return c.Error("Ids " + std::to_string(i) + " must end in a dim of 1 for "
                         "lookup_table, got " + ir::ShapeText(ids.dims));
        }
        out.dims.pop_back();
      }
      out.dims.push_back(dim);
      c.Output("Outputs", i) = out;
    }
    return OkStatus();
  };
  RegisterRpc(registry, std::move(s));
}

// GEO-SGD's exchange (Paddle's GeoCommunicator, reference §4.8): the trainer trains every
// parameter locally, and every k_steps launches it sends each block's change since the last
// exchange, divided by the number of trainers, as "<block>.delta", and takes the server's
// block back. The op sits first in main: its first launch remembers the starting values.
// X and Out are the same parameters (the exchange updates them in place).
void RegisterGeoSgd(OpRegistry& registry) {
  OpSchema s;
  s.type = "geo_sgd";
  s.summary = "every k_steps launches sends each parameter block's change since the last "
              "exchange / trainers to its pserver as '<block>.delta' and takes the pserver's "
              "block back (GEO-SGD; a sparse table's changed rows alone); Out = X, updated in "
              "place";
  s.inputs = {{"X", false, true}};
  s.outputs = {{"Out", false, true}};
  s.attrs = {{"k_steps", int64_t{1}},
             {"trainers", int32_t{1}},
             {"trainer_id", int32_t{0}},
             {"blocks", std::vector<int64_t>{}},
             {"block_names", Strings{}},
             {"sections", std::vector<int64_t>{}},
             {"epmap", Strings{}},
             // Per X, 1 for a table whose gradient is sparse: only the rows that changed since
             // the last exchange travel, as a sparse delta, and only they come back. Empty: none.
             {"sparse", std::vector<int64_t>{}}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckTrainerId(c));
    if (!c.IntsAttr("sparse").empty() && c.IntsAttr("sparse").size() != c.InputCount("X")) {
      return c.Error("sparse holds " + std::to_string(c.IntsAttr("sparse").size()) +
                     " flags for " + std::to_string(c.InputCount("X")) + " parameters");
    }
    if (c.IntAttr("k_steps") < 1) {
      return c.Error("k_steps must be >= 1, not " + std::to_string(c.IntAttr("k_steps")));
    }
    if (c.IntAttr("trainers") < 1) {
      return c.Error("trainers must be >= 1, not " + std::to_string(c.IntAttr("trainers")));
    }
    const size_t n = c.InputCount("X");
    if (c.OutputCount("Out") != n) {
      return c.Error("Out holds " + std::to_string(c.OutputCount("Out")) + " vars for " +
                     std::to_string(n) + " in X; they must be the same vars");
    }
    const std::vector<int64_t> blocks = c.IntsAttr("blocks");
    const std::vector<int64_t> sections = c.IntsAttr("sections");
    const Strings names = StringsAttr(c, "block_names");
    const Strings epmap = StringsAttr(c, "epmap");
    if (blocks.size() != n) {
      return c.Error("blocks holds " + std::to_string(blocks.size()) + " counts for " +
                     std::to_string(n) + " parameters; it needs one per parameter");
    }
    size_t total = 0;
    for (int64_t b : blocks) {
      if (b < 1 || b > 1 << 20) return c.Error("blocks holds a count of " + std::to_string(b));
      total += static_cast<size_t>(b);
    }
    if (sections.size() != total || names.size() != total || epmap.size() != total) {
      return c.Error("sections, block_names and epmap need one entry per block (" +
                     std::to_string(total) + "), and hold " + std::to_string(sections.size()) +
                     ", " + std::to_string(names.size()) + " and " +
                     std::to_string(epmap.size()));
    }
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      const TensorInfo& x = c.Input("X", i);
      if (x.dtype != ir::DataType::kFloat32) {
        return c.Error("X " + std::to_string(i) + " is " +
                       std::string(ir::DataTypeName(x.dtype)) + "; GEO-SGD exchanges float32");
      }
      if (x.dims.empty()) return c.Error("X " + std::to_string(i) + " is a scalar");
      int64_t rows = 0;
      for (int64_t b = 0; b < blocks[i]; ++b, ++at) {
        if (names[at].empty() || epmap[at].empty()) {
          return c.Error("block " + std::to_string(at) + " has an empty name or endpoint");
        }
        if (sections[at] < 1 || sections[at] > x.dims[0] - rows) {
          return c.Error("the sections of X " + std::to_string(i) + " do not add up to its " +
                         std::to_string(x.dims[0]) + " rows");
        }
        rows += sections[at];
      }
      if (rows != x.dims[0]) {
        return c.Error("the sections of X " + std::to_string(i) + " cover " +
                       std::to_string(rows) + " of its " + std::to_string(x.dims[0]) + " rows");
      }
      c.Output("Out", i) = x;
    }
    return OkStatus();
  };
  RegisterRpc(registry, std::move(s));
}

}  // namespace

void RegisterPserverOps(OpRegistry& registry) {
  RegisterSend(registry);
  RegisterRecv(registry);
  RegisterBarrier(registry, /*send=*/true);
  RegisterBarrier(registry, /*send=*/false);
  RegisterListenAndServ(registry);
  RegisterSplitByref(registry);
  RegisterSplitSelectedRows(registry);
  RegisterDistributedLookupTable(registry);
  RegisterGeoSgd(registry);
}

}  // namespace fleet::ops
