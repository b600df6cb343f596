// Paddle 2.x's DistributedStrategy as a program file sets it, mapped to the [strategy] keys of
// fleet.toml. A key Fleet has no counterpart for is refused by name, except that switching an
// unsupported feature off (strategy.amp = False) is accepted, being what Fleet does anyway.
#include <set>

#include "frontend/builtins.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

// DistributedStrategy attributes Fleet maps.
const std::set<std::string, std::less<>> kSupported = {
    "a_sync", "a_sync_configs", "localsgd", "localsgd_configs", "nccl_comm_num",
    "fuse_grad_size_in_MB", "fuse_all_reduce_ops", "sync_batch_norm"};

// Paddle's feature switches Fleet lacks: accepted only as False.
const std::set<std::string, std::less<>> kSwitches = {
    "amp", "recompute", "pipeline", "sharding", "gradient_merge", "lars", "lamb", "dgc",
    "adaptive_localsgd", "tensor_parallel", "asp", "fp16_allreduce",
    "hierarchical_allreduce", "use_hierarchical_allreduce", "sync_nccl_allreduce",
    "find_unused_parameters", "without_graph_optimization", "heter_ccl_mode", "qat",
    "semi_auto", "auto", "elastic", "cudnn_exhaustive_search", "cudnn_batchnorm_spatial_persistent",
    "fuse_broadcast_ops", "fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_relu_depthwise_conv",
    "enable_sequential_execution", "is_fl_ps_mode", "last_comm_group_size_MB"};

Status KeyError(const std::string& key, const std::string& why) {
  return InvalidArgument("strategy." + key + ": " + why);
}

// a_sync_configs' keys Fleet reads, with their fleet.toml ranges ([strategy.a_sync_configs]).
struct AsyncKey {
  const char* name;
  bool is_bool;
  int64_t min, max;
};
constexpr AsyncKey kAsyncKeys[] = {
    {"k_steps", false, -1, 1000000},  // > 0: GEO-SGD
    {"max_merge_var_num", false, 1, 1024},
    {"send_queue_size", false, 1, 1024},
    {"independent_recv_thread", true, 0, 1},
    {"thread_pool_size", false, 1, 64},
    {"send_wait_times", false, 0, 1000},
    {"runtime_split_send_recv", true, 0, 1}};

Status CheckAsyncConfigs(const Value& value) {
  const std::string key = "a_sync_configs";
  for (size_t i = 0; i < value.keys.size(); ++i) {
    const std::string& k = value.keys[i];
    const Value& v = value.items[i];
    const AsyncKey* known = nullptr;
    for (const AsyncKey& a : kAsyncKeys) {
      if (k == a.name) known = &a;
    }
    if (known == nullptr) {
      std::vector<std::string> names;
      for (const AsyncKey& a : kAsyncKeys) names.push_back(a.name);
      return KeyError(key, "'" + k + "' is not supported; Fleet reads " + JoinWords(names));
    }
    if (known->is_bool) {
      if (v.kind != Value::Kind::kBool) {
        return KeyError(key, "'" + k + "' expects True or False, got " + DescribeValue(v));
      }
      continue;
    }
    if (v.kind != Value::Kind::kInt) {
      return KeyError(key, "'" + k + "' expects an int, got " + DescribeValue(v));
    }
    if (v.int_value < known->min || v.int_value > known->max) {
      return KeyError(key, "'" + k + "' must be in [" + std::to_string(known->min) + ", " +
                               std::to_string(known->max) + "], got " +
                               std::to_string(v.int_value));
    }
  }
  return OkStatus();
}

}  // namespace

Status CheckStrategyValue(const std::string& key, const Value& value) {
  if (kSwitches.count(key)) {
    if (value.kind == Value::Kind::kBool && !value.bool_value) return OkStatus();
    return KeyError(key, "Fleet does not support this feature (only = False is accepted); it "
                         "supports " + JoinWords({kSupported.begin(), kSupported.end()}));
  }
  if (!kSupported.count(key)) {
    std::vector<std::string> names(kSupported.begin(), kSupported.end());
    names.insert(names.end(), kSwitches.begin(), kSwitches.end());
    std::string guess = ClosestMatch(key, names);
    return KeyError(key, "DistributedStrategy has no such attribute" +
                             (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
  }
  auto want = [&](Value::Kind kind, const char* what) -> Status {
    if (value.kind == kind || (kind == Value::Kind::kFloat && value.is_number())) {
      return OkStatus();
    }
    return KeyError(key, std::string("expects ") + what + ", got " + DescribeValue(value));
  };
  if (key == "a_sync" || key == "localsgd" || key == "fuse_all_reduce_ops" ||
      key == "sync_batch_norm") {
    return want(Value::Kind::kBool, "True or False");
  }
  if (key == "nccl_comm_num") {
    FLEET_RETURN_IF_ERROR(want(Value::Kind::kInt, "an int"));
    if (value.int_value < 1 || value.int_value > 64) return KeyError(key, "must be in [1, 64]");
    return OkStatus();
  }
  if (key == "fuse_grad_size_in_MB") {
    FLEET_RETURN_IF_ERROR(want(Value::Kind::kFloat, "a number"));
    if (value.number() < 0 || value.number() > 1024) {
      return KeyError(key, "must be in [0, 1024]");
    }
    return OkStatus();
  }
  FLEET_RETURN_IF_ERROR(want(Value::Kind::kDict, "a dict"));
  if (key == "a_sync_configs") return CheckAsyncConfigs(value);
  for (size_t i = 0; i < value.keys.size(); ++i) {
    const std::string& k = value.keys[i];
    const Value& v = value.items[i];
    if (k != "k_steps" && k != "begin_step") {
      return KeyError(key, "'" + k + "' is not supported; Fleet reads k_steps and begin_step (1)");
    }
    if (v.kind != Value::Kind::kInt) {
      return KeyError(key, "'" + k + "' expects an int, got " + DescribeValue(v));
    }
    if (k == "k_steps" && v.int_value < 1) return KeyError(key, "k_steps must be at least 1");
    if (k == "begin_step" && v.int_value != 1) {
      return KeyError(key, "begin_step must be 1: Fleet averages from the first step");
    }
  }
  return OkStatus();
}

StatusOr<std::vector<ProgramStrategyKey>> StrategySettings(const Namespace& strategy,
                                                           std::string_view file) {
  std::vector<ProgramStrategyKey> out;
  for (const auto& [key, value] : strategy.attrs) {
    FLEET_RETURN_IF_ERROR(CheckStrategyValue(key, value));
    const Pos pos = strategy.where.at(key);
    const std::string where = std::string(file) + ":" + std::to_string(pos.line) + ":" +
                              std::to_string(pos.col);
    auto add = [&](std::string paddle_key, std::string config_key,
                   std::variant<bool, int64_t, double, std::string> v) {
      out.push_back({std::move(paddle_key), std::move(config_key), std::move(v), where});
    };
    if (key == "a_sync") {
      add(key, "a_sync", value.bool_value);
    } else if (key == "a_sync_configs") {
      for (size_t i = 0; i < value.keys.size(); ++i) {
        const Value& v = value.items[i];
        std::variant<bool, int64_t, double, std::string> setting;
        if (v.kind == Value::Kind::kBool) {
          setting = v.bool_value;
        } else {
          setting = v.int_value;
        }
        add(key + "['" + value.keys[i] + "']", "a_sync_configs." + value.keys[i], setting);
      }
    } else if (key == "localsgd") {
      if (value.bool_value) add(key, "collective_mode", std::string("local_sgd"));
    } else if (key == "localsgd_configs") {
      for (size_t i = 0; i < value.keys.size(); ++i) {
        if (value.keys[i] == "k_steps") {
          add(key + "['k_steps']", "local_sgd_k_steps", value.items[i].int_value);
        }
      }
    } else if (key == "nccl_comm_num") {
      add(key, "nrings", value.int_value);
    } else if (key == "fuse_grad_size_in_MB") {
      add(key, "fuse_grad_size_mb", value.number());
    } else if (key == "sync_batch_norm") {
      add(key, "sync_batch_norm", value.bool_value);
    } else if (key == "fuse_all_reduce_ops") {
      if (!value.bool_value) add(key, "fuse_grad_size_mb", 0.0);
    }
    // Switched-off features change nothing.
  }
  return out;
}

}  // namespace fleet::frontend
