// Sub-communicators (new_group): every parent rank calls it with the same list; ranks outside
// get NULL; a group reduces over its members only, and groups made one after another stay apart.
#include <vector>

#include "comm_harness.h"

namespace fleet::conformance::comm {
namespace {

double Contribution(int parent_rank, int64_t i) {
  return (parent_rank + 1) * 10 + static_cast<double>(i % 5);
}

// Makes the group `members` from r (collectively) and checks it all-reduces over its members.
void CheckGroup(const Rank& r, const std::vector<int32_t>& members) {
  std::string where = "group {";
  for (size_t i = 0; i < members.size(); ++i) where += (i ? "," : "") + std::to_string(members[i]);
  where += "} on parent rank " + std::to_string(r.rank);
  FleetComm* child = reinterpret_cast<FleetComm*>(0x1);
  Status s = Take(r.vt->new_group(r.ctx, r.comm, members.data(), members.size(), &child));
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  int index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == r.rank) index = static_cast<int>(i);
  }
  if (index < 0) {
    EXPECT_EQ(child, nullptr) << where << ": a rank outside the group must get NULL";
    return;
  }
  ASSERT_NE(child, nullptr) << where;
  Rank g = r;
  g.comm = child;
  g.rank = index;
  g.size = static_cast<int>(members.size());
  const int64_t n = 257;
  Buf buf(FLEET_DTYPE_FLOAT32, n);
  buf.Fill([&](int64_t i) { return Contribution(r.rank, i); });
  s = g.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
  EXPECT_TRUE(s.ok()) << where << ": " << s.ToString();
  for (int64_t i = 0; s.ok() && i < n; ++i) {
    double want = 0;
    for (int32_t m : members) want += Contribution(m, i);
    if (!Near(buf.Get(i), want, FLEET_DTYPE_FLOAT32, where + " element " + std::to_string(i))) {
      break;
    }
  }
  // Group rank 0 broadcasts its parent rank: every member learns the group's root.
  Buf root(FLEET_DTYPE_INT32, 1);
  root.Set(0, g.rank == 0 ? r.rank : -1);
  s = g.Broadcast(root.t(), 0);
  EXPECT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_EQ(root.Get(0), members[0]) << where;
  s = Take(r.vt->destroy(r.ctx, child));
  EXPECT_TRUE(s.ok()) << where << ": " << s.ToString();
}

TEST(CommGroups, SubsetsOfFourGetNullOutsideAndReduceInside) {
  std::string error;
  const CommUnderTest* c = Comm(&error);
  ASSERT_NE(c, nullptr) << error;
  if (!FLEET_CAN_CALL(c->vt, FleetCommVTable, new_group)) {
    GTEST_SKIP() << "communicator '" << c->name << "' has no new_group";
  }
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(4);
  World world(4);
  world.Run([&](Rank& r) {
    CheckGroup(r, {0, 2});
    CheckGroup(r, {1, 2, 3});
    CheckGroup(r, {0, 1, 2, 3});
    CheckGroup(r, {3});
    // The parent still works after its groups.
    Status s = r.Barrier();
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
}

TEST(CommGroups, BadRankListsAreInvalidArguments) {
  std::string error;
  const CommUnderTest* c = Comm(&error);
  ASSERT_NE(c, nullptr) << error;
  if (!FLEET_CAN_CALL(c->vt, FleetCommVTable, new_group)) {
    GTEST_SKIP() << "communicator '" << c->name << "' has no new_group";
  }
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  World world(2);
  world.Run([&](Rank& r) {
    for (const std::vector<int32_t>& bad :
         {std::vector<int32_t>{1, 0}, std::vector<int32_t>{0, 5}, std::vector<int32_t>{0, 0}}) {
      FleetComm* child = nullptr;
      Status s = Take(r.vt->new_group(r.ctx, r.comm, bad.data(), bad.size(), &child));
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
      EXPECT_EQ(child, nullptr);
    }
  });
}

}  // namespace
}  // namespace fleet::conformance::comm
