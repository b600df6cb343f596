#include "dist/role.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace fleet {
namespace {

using Env = std::map<std::string, std::string>;

StatusOr<Role> Resolve(const Env& env, const std::vector<std::string>& overrides = {},
                       std::string_view toml = "") {
  StatusOr<Config> config = ParseConfig(toml, "fleet.toml", "/etc/fleet", overrides);
  if (!config.ok()) return config.status();
  return ResolveRole(*config, env);
}

// The error message of resolving `env`, or a note that there was none.
std::string ErrorOf(const Env& env, const std::vector<std::string>& overrides = {},
                    std::string_view toml = "") {
  StatusOr<Role> role = Resolve(env, overrides, toml);
  if (role.ok()) return "<no error>";
  EXPECT_EQ(role.status().code(), Code::kInvalidArgument);
  return role.status().message();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(RoleTest, NothingSetIsTrainerZeroOfOne) {
  StatusOr<Role> role = Resolve({{"HOME", "/root"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "trainer");
  EXPECT_EQ(role->rank, 0);
  EXPECT_EQ(role->world_size, 1);
  EXPECT_EQ(role->local_rank, 0);
  EXPECT_TRUE(role->trainer_endpoints.empty());
  EXPECT_TRUE(role->pserver_endpoints.empty());
  EXPECT_EQ(role->current_endpoint, "");
  EXPECT_EQ(role->master_addr, "");
  EXPECT_EQ(role->master_port, 0);
  for (const std::string& field : RoleFieldNames()) {
    ASSERT_TRUE(role->source.count(field)) << field;
    EXPECT_EQ(role->source.at(field), "default") << field;
  }
}

TEST(RoleTest, PaddleCollectiveVariables) {
  StatusOr<Role> role =
      Resolve({{"PADDLE_TRAINER_ID", "2"},
               {"PADDLE_TRAINERS_NUM", "3"},
               {"PADDLE_TRAINER_ENDPOINTS", "10.0.0.1:6170,10.0.0.2:6170,10.0.0.3:6170"},
               {"PADDLE_CURRENT_ENDPOINT", "10.0.0.3:6170"},
               {"PADDLE_TRAINING_ROLE", "TRAINER"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "trainer");
  EXPECT_EQ(role->rank, 2);
  EXPECT_EQ(role->world_size, 3);
  EXPECT_EQ(role->trainer_endpoints,
            (std::vector<std::string>{"10.0.0.1:6170", "10.0.0.2:6170", "10.0.0.3:6170"}));
  EXPECT_EQ(role->current_endpoint, "10.0.0.3:6170");
  EXPECT_EQ(role->source.at("rank"), "env PADDLE_TRAINER_ID");
  EXPECT_EQ(role->source.at("world_size"), "env PADDLE_TRAINERS_NUM");
  EXPECT_EQ(role->source.at("trainer_endpoints"), "env PADDLE_TRAINER_ENDPOINTS");
  EXPECT_EQ(role->source.at("current_endpoint"), "env PADDLE_CURRENT_ENDPOINT");
  EXPECT_EQ(role->source.at("role"), "env PADDLE_TRAINING_ROLE");
}

TEST(RoleTest, EndpointsAloneGiveWorldSizeAndCurrentEndpoint) {
  StatusOr<Role> role =
      Resolve({{"PADDLE_TRAINER_ID", "1"}, {"PADDLE_TRAINER_ENDPOINTS", "a:1, b:2"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->world_size, 2);
  EXPECT_EQ(role->current_endpoint, "b:2");
  EXPECT_TRUE(Contains(role->source.at("world_size"), "PADDLE_TRAINER_ENDPOINTS"));
  EXPECT_TRUE(Contains(role->source.at("current_endpoint"), "trainer_endpoints[1]"));
}

struct LauncherCase {
  const char* name;
  Env env;
  std::string rank_var, size_var, local_var;
};

TEST(RoleTest, EachLauncherAlone) {
  const LauncherCase cases[] = {
      {"mpi",
       {{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmi", {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}}, "PMI_RANK", "PMI_SIZE", ""},
      {"slurm",
       {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}},
       "SLURM_PROCID",
       "SLURM_NTASKS",
       "SLURM_LOCALID"},
      {"torchrun",
       {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}},
       "RANK",
       "WORLD_SIZE",
       "LOCAL_RANK"},
  };
  for (const LauncherCase& c : cases) {
    SCOPED_TRACE(c.name);
    StatusOr<Role> role = Resolve(c.env);
    ASSERT_TRUE(role.ok()) << role.status().ToString();
    EXPECT_EQ(role->role, "trainer");
    EXPECT_EQ(role->rank, 3);
    EXPECT_EQ(role->world_size, 4);
    EXPECT_EQ(role->source.at("rank"), "env " + c.rank_var);
    EXPECT_EQ(role->source.at("world_size"), "env " + c.size_var);
    if (c.local_var.empty()) {
      EXPECT_EQ(role->local_rank, 0);
      EXPECT_EQ(role->source.at("local_rank"), "default");
    } else {
      EXPECT_EQ(role->local_rank, 1);
      EXPECT_EQ(role->source.at("local_rank"), "env " + c.local_var);
    }
  }
}

TEST(RoleTest, TorchrunMaster) {
  StatusOr<Role> role = Resolve({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->master_addr, "node0");
  EXPECT_EQ(role->master_port, 29500);
  EXPECT_EQ(role->source.at("master_addr"), "env MASTER_ADDR");
  EXPECT_EQ(role->source.at("master_port"), "env MASTER_PORT");
  EXPECT_TRUE(Contains(ErrorOf({{"MASTER_ADDR", "node0"}}), "MASTER_PORT is not"));
}

TEST(RoleTest, FleetTomlAlone) {
  StatusOr<Role> role = Resolve({}, {}, R"(
[role]
role = "trainer"
rank = 1
world_size = 2
trainer_endpoints = ["h0:7000", "h1:7000"]
master = "h0:7100"
local_rank = 0
)");
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->world_size, 2);
  EXPECT_EQ(role->current_endpoint, "h1:7000");
  EXPECT_EQ(role->master_addr, "h0");
  EXPECT_EQ(role->master_port, 7100);
  EXPECT_EQ(role->local_rank, 0);
  EXPECT_EQ(role->source.at("rank"), "fleet.toml:4:8 role.rank");
  EXPECT_EQ(role->source.at("world_size"), "fleet.toml:5:14 role.world_size");
  EXPECT_EQ(role->source.at("master_port"), "fleet.toml:7:10 role.master");
  EXPECT_EQ(role->source.at("local_rank"), "fleet.toml:8:14 role.local_rank");
}

TEST(RoleTest, SetOverridesAreNamedAsSuch) {
  StatusOr<Role> role = Resolve({}, {"role.rank=1", "role.world_size=2"});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->source.at("rank"), "--set role.rank");
}

TEST(RoleTest, AgreeingSourcesAreAccepted) {
  StatusOr<Role> role = Resolve({{"PADDLE_TRAINER_ID", "1"},
                                 {"OMPI_COMM_WORLD_RANK", "1"},
                                 {"PMI_RANK", "1"},
                                 {"SLURM_PROCID", "1"},
                                 {"RANK", "1"},
                                 {"WORLD_SIZE", "2"},
                                 {"SLURM_NTASKS", "2"},
                                 {"PADDLE_TRAINER_ENDPOINTS", "a:1,b:2"}},
                                {"role.rank=1", "role.trainer_endpoints=[\"a:1\", \"b:2\"]"});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->world_size, 2);
  // The first source consulted is the one shown.
  EXPECT_EQ(role->source.at("rank"), "--set role.rank");
}

TEST(RoleTest, ConflictsNameBothSources) {
  EXPECT_EQ(ErrorOf({{"PADDLE_TRAINER_ID", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}),
            "rank: PADDLE_TRAINER_ID=1 but RANK=0");
  EXPECT_EQ(ErrorOf({{"OMPI_COMM_WORLD_SIZE", "4"}, {"SLURM_NTASKS", "2"}}),
            "world_size: OMPI_COMM_WORLD_SIZE=4 but SLURM_NTASKS=2");
  EXPECT_EQ(ErrorOf({{"LOCAL_RANK", "1"}}, {}, "[role]\nlocal_rank = 0\n"),
            "local_rank: fleet.toml:2:14 role.local_rank=0 but LOCAL_RANK=1");
  EXPECT_EQ(ErrorOf({{"TRAINING_ROLE", "PSERVER"}}, {"role.role=trainer"}),
            "role: --set role.role=trainer but TRAINING_ROLE=pserver");
  EXPECT_EQ(
      ErrorOf({{"PADDLE_TRAINER_ENDPOINTS", "a:1,b:2"}}, {"role.trainer_endpoints=[\"a:1\"]"}),
      "trainer_endpoints: --set role.trainer_endpoints=a:1 but "
      "PADDLE_TRAINER_ENDPOINTS=a:1,b:2");
  EXPECT_EQ(ErrorOf({{"MASTER_ADDR", "h1"}, {"MASTER_PORT", "7100"}}, {"role.master=h0:7100"}),
            "master_addr: --set role.master=h0 but MASTER_ADDR=h1");
  std::string size =
      ErrorOf({{"PADDLE_TRAINERS_NUM", "3"}, {"PADDLE_TRAINER_ENDPOINTS", "a:1,b:2"}});
  EXPECT_TRUE(Contains(size, "PADDLE_TRAINERS_NUM=3")) << size;
  EXPECT_TRUE(Contains(size, "PADDLE_TRAINER_ENDPOINTS lists 2 trainer endpoints")) << size;
}

TEST(RoleTest, RankMustBeBelowWorldSize) {
  std::string e = ErrorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(e, "rank: RANK=2 is not below world_size 2 (env WORLD_SIZE)");
  // With no world size at all it is 1.
  EXPECT_EQ(ErrorOf({{"PADDLE_TRAINER_ID", "1"}}),
            "rank: PADDLE_TRAINER_ID=1 is not below world_size 1 (default)");
  EXPECT_TRUE(Contains(ErrorOf({{"RANK", "-1"}}), "RANK=-1: expected an integer >= 0"));
  EXPECT_TRUE(Contains(ErrorOf({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0: expected an integer >= 1"));
}

TEST(RoleTest, MalformedValuesNameTheVariable) {
  EXPECT_EQ(ErrorOf({{"PADDLE_TRAINER_ID", "one"}}),
            "PADDLE_TRAINER_ID='one': expected an integer");
  EXPECT_EQ(ErrorOf({{"SLURM_NTASKS", "4x"}}), "SLURM_NTASKS='4x': expected an integer");
  EXPECT_EQ(ErrorOf({{"TRAINING_ROLE", "WORKER"}}),
            "TRAINING_ROLE='WORKER': expected TRAINER or PSERVER");
  EXPECT_EQ(ErrorOf({{"PADDLE_TRAINER_ENDPOINTS", "a:1,b:99999"}}),
            "PADDLE_TRAINER_ENDPOINTS: 'b:99999': the port '99999' is not an "
            "integer in 1..65535");
  EXPECT_EQ(ErrorOf({{"PADDLE_TRAINER_ENDPOINTS", "a:1,b"}}),
            "PADDLE_TRAINER_ENDPOINTS: 'b' is not host:port");
  EXPECT_TRUE(Contains(ErrorOf({{"PADDLE_TRAINER_ENDPOINTS", "a:1,a:1"}}), "more than once"));
  EXPECT_TRUE(Contains(ErrorOf({{"PADDLE_CURRENT_ENDPOINT", "a:0"}}), "PADDLE_CURRENT_ENDPOINT"));
  EXPECT_TRUE(Contains(ErrorOf({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "port"}}), "MASTER_PORT"));
  std::string toml = ErrorOf({}, {}, "[role]\ntrainer_endpoints = [\"h:1\", \"h:x\"]\n");
  EXPECT_TRUE(Contains(toml, "fleet.toml:2:21 role.trainer_endpoints: 'h:x'")) << toml;
}

TEST(RoleTest, EmptyVariablesAreUnset) {
  StatusOr<Role> role = Resolve({{"RANK", ""}, {"PADDLE_CURRENT_ENDPOINT", " "}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->source.at("rank"), "default");
}

TEST(RoleTest, EndpointSyntax) {
  EXPECT_TRUE(CheckEndpoint("127.0.0.1:6170").ok());
  EXPECT_TRUE(CheckEndpoint("[::1]:6170").ok());
  EXPECT_TRUE(CheckEndpoint("node-3.cluster:65535").ok());
  EXPECT_FALSE(CheckEndpoint("::1:6170").ok());
  EXPECT_FALSE(CheckEndpoint(":6170").ok());
  EXPECT_FALSE(CheckEndpoint("h:0").ok());
  EXPECT_FALSE(CheckEndpoint("h:65536").ok());
  EXPECT_FALSE(CheckEndpoint("h:").ok());
}

TEST(RoleTest, PserverFromPodIpAndPort) {
  Env env = {{"TRAINING_ROLE", "PSERVER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6000,10.0.0.2:6000"},
             {"POD_IP", "10.0.0.2"},
             {"PADDLE_PORT", "6000"},
             {"PADDLE_TRAINERS_NUM", "4"},
             // A launcher counting every process must not make the server a trainer rank.
             {"RANK", "5"},
             {"WORLD_SIZE", "6"}};
  StatusOr<Role> role = Resolve(env);
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_TRUE(role->is_pserver());
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->world_size, 4);
  EXPECT_EQ(role->current_endpoint, "10.0.0.2:6000");
  EXPECT_EQ(role->source.at("current_endpoint"), "env POD_IP:PADDLE_PORT");
  EXPECT_TRUE(Contains(role->source.at("rank"), "PADDLE_PSERVERS_IP_PORT_LIST"))
      << role->source.at("rank");

  env["PADDLE_PSERVER_ID"] = "0";
  std::string e = ErrorOf(env);
  EXPECT_TRUE(Contains(e, "rank: PADDLE_PSERVER_ID=0 but the position of 10.0.0.2:6000")) << e;

  env.erase("PADDLE_PSERVER_ID");
  env["POD_IP"] = "10.0.0.9";
  e = ErrorOf(env);
  EXPECT_TRUE(Contains(e, "10.0.0.9:6000 (env POD_IP:PADDLE_PORT) is not in pserver_endpoints"))
      << e;

  env.erase("POD_IP");
  EXPECT_TRUE(Contains(ErrorOf(env), "PADDLE_PORT is set but POD_IP is not"));
  env.erase("PADDLE_PORT");
  EXPECT_TRUE(Contains(ErrorOf(env), "a pserver must know which server it is"));
  env["PADDLE_PSERVER_ID"] = "1";
  role = Resolve(env);
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->current_endpoint, "10.0.0.2:6000");
  env["PADDLE_PSERVER_ID"] = "2";
  EXPECT_TRUE(Contains(ErrorOf(env), "is not below the number of pserver_endpoints 2"));
}

TEST(RoleTest, PserverNeedsTheServerList) {
  std::string e = ErrorOf({{"TRAINING_ROLE", "PSERVER"}, {"POD_IP", "h"}, {"PADDLE_PORT", "1"}});
  EXPECT_TRUE(Contains(e, "PADDLE_PSERVERS_IP_PORT_LIST")) << e;
  EXPECT_TRUE(Contains(e, "env TRAINING_ROLE")) << e;
}

TEST(RoleTest, TrainersIgnoreLeakedServerAddress) {
  StatusOr<Role> role = Resolve({{"TRAINING_ROLE", "TRAINER"},
                                 {"PADDLE_TRAINER_ID", "0"},
                                 {"PADDLE_TRAINERS_NUM", "2"},
                                 {"PADDLE_PSERVERS_IP_PORT_LIST", "h:1,h:2"},
                                 {"POD_IP", "h"},
                                 {"PADDLE_PORT", "2"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "trainer");
  EXPECT_EQ(role->current_endpoint, "");
  EXPECT_EQ(role->pserver_endpoints.size(), 2u);
}

TEST(RoleConfigTest, SchemaChecksRoleKeys) {
  StatusOr<Config> config =
      ParseConfig("[role]\nrole = \"worker\"\nrank = -2\nworld_size = \"2\"\nranks = 1\n",
                  "fleet.toml", "/etc/fleet", {});
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  EXPECT_TRUE(Contains(m,
                       "fleet.toml:2:8: role.role: expected \"\" (from the environment), "
                       "trainer or pserver, got 'worker'"))
      << m;
  EXPECT_TRUE(Contains(m, "fleet.toml:3:8: role.rank: expected an integer >= -1, got -2")) << m;
  EXPECT_TRUE(Contains(m, "role.world_size: expected an integer >= 0, got a string")) << m;
  EXPECT_TRUE(Contains(m, "role.ranks: unknown key (did you mean 'role.rank'?)")) << m;
}

}  // namespace
}  // namespace fleet
