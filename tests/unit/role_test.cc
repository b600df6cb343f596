#include "roles/role.h"

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
  EXPECT_TRUE(Contains(ErrorOf({{"RANK", "-1"}}), "RANK=-1: expected an integer in [0, 65536]"));
  EXPECT_TRUE(Contains(ErrorOf({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0: expected an integer in [1, 65536]"));
  EXPECT_TRUE(Contains(ErrorOf({{"WORLD_SIZE", "1099511627776"}}),
                       "WORLD_SIZE=1099511627776: expected an integer in [1, 65536]"));
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

// What `fleet-host launch --servers 2 --workers 3` gives server 1: PaddleCloud's PS variables
// plus PADDLE_PSERVER_ID, which must agree with the position of POD_IP:PADDLE_PORT.
TEST(RoleTest, PaddleCloudPserverFromTheLaunchersVariables) {
  Env env = {{"TRAINING_ROLE", "PSERVER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:41000,127.0.0.1:41001"},
             {"PADDLE_PSERVER_ID", "1"},
             {"POD_IP", "127.0.0.1"},
             {"PADDLE_PORT", "41001"},
             {"PADDLE_TRAINERS_NUM", "3"},
             {"LOCAL_WORLD_SIZE", "5"}};
  StatusOr<Role> role = Resolve(env);
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "pserver");
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->world_size, 3);
  EXPECT_EQ(role->current_endpoint, "127.0.0.1:41001");
  EXPECT_EQ(role->pserver_endpoints,
            (std::vector<std::string>{"127.0.0.1:41000", "127.0.0.1:41001"}));
  EXPECT_FALSE(role->mpi_symmetric);
  EXPECT_EQ(role->source.at("rank"), "env PADDLE_PSERVER_ID");
  EXPECT_EQ(role->source.at("world_size"), "env PADDLE_TRAINERS_NUM");
  EXPECT_EQ(role->source.at("current_endpoint"), "env POD_IP:PADDLE_PORT");
  EXPECT_EQ(role->source.at("mpi_symmetric"), "default");

  // A worker of the same job.
  role = Resolve({{"TRAINING_ROLE", "TRAINER"},
                  {"PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:41000,127.0.0.1:41001"},
                  {"PADDLE_TRAINER_ID", "2"},
                  {"PADDLE_TRAINERS_NUM", "3"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "trainer");
  EXPECT_EQ(role->rank, 2);
  EXPECT_EQ(role->world_size, 3);
  EXPECT_EQ(role->current_endpoint, "");
  EXPECT_EQ(role->pserver_endpoints.size(), 2u);
}

TEST(RoleTest, PserverFullyDefinedInFleetToml) {
  // UserDefinedRoleMaker: no environment at all.
  StatusOr<Role> role = Resolve({}, {}, R"([role]
role = "pserver"
rank = 1
world_size = 4
pserver_endpoints = ["10.0.0.1:6000", "10.0.0.2:6000", "10.0.0.3:6000"]
)");
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_TRUE(role->is_pserver());
  EXPECT_EQ(role->rank, 1);
  EXPECT_EQ(role->world_size, 4);
  EXPECT_EQ(role->current_endpoint, "10.0.0.2:6000");
  EXPECT_EQ(role->pserver_endpoints.size(), 3u);
  EXPECT_EQ(role->source.at("role"), "fleet.toml:2:8 role.role");
  EXPECT_EQ(role->source.at("rank"), "fleet.toml:3:8 role.rank");
  EXPECT_EQ(role->source.at("world_size"), "fleet.toml:4:14 role.world_size");
  EXPECT_EQ(role->source.at("current_endpoint"),
            "pserver_endpoints[1] (fleet.toml:5:21 role.pserver_endpoints)");

  // current_endpoint instead of rank gives the same server.
  role = Resolve({}, {}, R"([role]
role = "pserver"
world_size = 4
current_endpoint = "10.0.0.3:6000"
pserver_endpoints = ["10.0.0.1:6000", "10.0.0.2:6000", "10.0.0.3:6000"]
)");
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->rank, 2);

  std::string e = ErrorOf({}, {}, R"([role]
role = "pserver"
rank = 3
pserver_endpoints = ["10.0.0.1:6000", "10.0.0.2:6000", "10.0.0.3:6000"]
)");
  EXPECT_TRUE(Contains(e, "rank: fleet.toml:3:8 role.rank=3 is not below the number of "
                          "pserver_endpoints 3"))
      << e;
}

// Paddle's MPISymetricRoleMaker: MPI rank r is pserver r/2 when even, trainer r/2 when odd.
TEST(RoleTest, MpiSymmetricLayout) {
  const std::string servers = "10.0.0.1:6000,10.0.0.2:6000";
  struct Expect {
    const char* role;
    int64_t rank;
    const char* endpoint;
    const char* source;
  };
  const Expect expect[4] = {
      {"pserver", 0, "10.0.0.1:6000",
       "OMPI_COMM_WORLD_RANK=0 (mpi_symmetric: even rank -> pserver 0)"},
      {"trainer", 0, "", "OMPI_COMM_WORLD_RANK=1 (mpi_symmetric: odd rank -> trainer 0)"},
      {"pserver", 1, "10.0.0.2:6000",
       "OMPI_COMM_WORLD_RANK=2 (mpi_symmetric: even rank -> pserver 1)"},
      {"trainer", 1, "", "OMPI_COMM_WORLD_RANK=3 (mpi_symmetric: odd rank -> trainer 1)"},
  };
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("MPI rank " + std::to_string(r));
    StatusOr<Role> role = Resolve({{"FLEET_MPI_SYMMETRIC", "1"},
                                   {"OMPI_COMM_WORLD_RANK", std::to_string(r)},
                                   {"OMPI_COMM_WORLD_SIZE", "4"},
                                   {"PADDLE_PSERVERS_IP_PORT_LIST", servers}});
    ASSERT_TRUE(role.ok()) << role.status().ToString();
    EXPECT_TRUE(role->mpi_symmetric);
    EXPECT_EQ(role->role, expect[r].role);
    EXPECT_EQ(role->rank, expect[r].rank);
    EXPECT_EQ(role->world_size, 2);
    EXPECT_EQ(role->current_endpoint, expect[r].endpoint);
    EXPECT_EQ(role->source.at("role"), expect[r].source);
    EXPECT_EQ(role->source.at("rank"), expect[r].source);
    EXPECT_EQ(role->source.at("world_size"),
              "OMPI_COMM_WORLD_SIZE=4 (mpi_symmetric: half the processes are trainers)");
    EXPECT_EQ(role->source.at("mpi_symmetric"), "env FLEET_MPI_SYMMETRIC");
  }

  // From fleet.toml, with PMI's variables and the server list in [role].
  StatusOr<Role> role = Resolve({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}}, {}, R"([role]
mpi_symmetric = true
pserver_endpoints = ["s0:1", "s1:1", "s2:1"]
)");
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->role, "trainer");
  EXPECT_EQ(role->rank, 2);
  EXPECT_EQ(role->world_size, 3);
  EXPECT_EQ(role->source.at("rank"), "PMI_RANK=5 (mpi_symmetric: odd rank -> trainer 2)");
  EXPECT_EQ(role->source.at("mpi_symmetric"), "fleet.toml:2:17 role.mpi_symmetric");

  // Without the layout the same variables make a plain trainer 5 of 6.
  role = Resolve({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}});
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(role->rank, 5);
  EXPECT_EQ(role->world_size, 6);
  EXPECT_FALSE(role->mpi_symmetric);
}

TEST(RoleTest, MpiSymmetricErrors) {
  const Env base = {{"FLEET_MPI_SYMMETRIC", "1"},
                    {"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"PADDLE_PSERVERS_IP_PORT_LIST", "a:1,b:1"}};
  Env env = base;
  env["OMPI_COMM_WORLD_SIZE"] = "5";
  std::string e = ErrorOf(env);
  EXPECT_TRUE(Contains(e, "mpi_symmetric: OMPI_COMM_WORLD_SIZE=5 is odd")) << e;

  env = base;
  env["PADDLE_PSERVERS_IP_PORT_LIST"] = "a:1,b:1,c:1";
  e = ErrorOf(env);
  EXPECT_EQ(e, "pserver_endpoints: mpi_symmetric with OMPI_COMM_WORLD_SIZE=4 needs 2 server "
               "endpoints (one per even rank) but env PADDLE_PSERVERS_IP_PORT_LIST lists 3");
  env.erase("PADDLE_PSERVERS_IP_PORT_LIST");
  e = ErrorOf(env);
  EXPECT_TRUE(Contains(e, "needs 2 server endpoints (one per even rank); set "
                          "PADDLE_PSERVERS_IP_PORT_LIST or role.pserver_endpoints"))
      << e;

  env = base;
  env.erase("OMPI_COMM_WORLD_RANK");
  e = ErrorOf(env);
  EXPECT_TRUE(Contains(e, "mpi_symmetric (env FLEET_MPI_SYMMETRIC) needs MPI's rank and size"))
      << e;
  EXPECT_TRUE(Contains(e, "no rank is set")) << e;

  env = base;
  env["FLEET_MPI_SYMMETRIC"] = "yes";
  EXPECT_EQ(ErrorOf(env), "FLEET_MPI_SYMMETRIC='yes': expected 1 or 0");

  // The layout's answer must agree with what else is set.
  env = base;
  env["TRAINING_ROLE"] = "PSERVER";
  EXPECT_EQ(ErrorOf(env),
            "role: mpi_symmetric(OMPI_COMM_WORLD_RANK=1)=trainer but TRAINING_ROLE=pserver");
  env = base;
  env["PADDLE_TRAINERS_NUM"] = "4";
  EXPECT_EQ(ErrorOf(env),
            "world_size: mpi_symmetric(OMPI_COMM_WORLD_SIZE=4)=2 but PADDLE_TRAINERS_NUM=4");
  env = base;
  env["PADDLE_TRAINER_ID"] = "0";
  env["PADDLE_TRAINERS_NUM"] = "2";
  StatusOr<Role> agreeing = Resolve(env);
  ASSERT_TRUE(agreeing.ok()) << agreeing.status().ToString();
  EXPECT_EQ(agreeing->rank, 0);
  EXPECT_EQ(ErrorOf(base, {}, "[role]\nmpi_symmetric = true\n"), "<no error>");
  env = base;
  env["FLEET_MPI_SYMMETRIC"] = "0";
  EXPECT_EQ(ErrorOf(env, {}, "[role]\nmpi_symmetric = true\n"),
            "mpi_symmetric: fleet.toml:2:17 role.mpi_symmetric=true but "
            "FLEET_MPI_SYMMETRIC=false");
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
  EXPECT_TRUE(Contains(m, "fleet.toml:3:8: role.rank: expected an integer in [-1, 65535], got -2")) << m;
  EXPECT_TRUE(Contains(m, "role.world_size: expected an integer in [0, 65536], got a string")) << m;
  EXPECT_TRUE(Contains(m, "role.ranks: unknown key (did you mean 'role.rank'?)")) << m;
}

}  // namespace
}  // namespace fleet
