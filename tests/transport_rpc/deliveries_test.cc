// The server's delivery log alone: a send is delivered once, a retry that meets a delivery in
// progress waits for its outcome (and gives up at its deadline), an abandoned delivery frees
// the send for a retry, and memory stays bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "deliveries.h"

namespace fleet_rpc {
namespace {

using Clock = std::chrono::system_clock;
using std::chrono::milliseconds;

Clock::time_point In(int ms) { return Clock::now() + milliseconds(ms); }

TEST(RpcDeliveryLog, ASendIsDeliveredOnceAndItsAnswerRepeated) {
  DeliveryLog log;
  DeliveryLog::Answer answer;
  ASSERT_EQ(log.Begin({1, 1}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  log.Finish({1, 1}, DeliveryLog::Answer{9, "refused by the handler"});
  ASSERT_EQ(log.Begin({1, 1}, In(1000), &answer), DeliveryLog::Claim::kAnswered);
  EXPECT_EQ(answer.code, 9);
  EXPECT_EQ(answer.message, "refused by the handler");
  // Another request of the client, and the same request id of another client, are new sends.
  EXPECT_EQ(log.Begin({1, 2}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  EXPECT_EQ(log.Begin({2, 1}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
}

TEST(RpcDeliveryLog, ARetryDuringADeliveryTimesOutAtItsDeadline) {
  DeliveryLog log;
  DeliveryLog::Answer answer;
  ASSERT_EQ(log.Begin({3, 1}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(log.Begin({3, 1}, In(200), &answer), DeliveryLog::Claim::kTimedOut);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(150)) << "the retry did not wait for the delivery";
  // Unrelated activity wakes the waiter but does not end its wait.
  auto retry = std::async(std::launch::async, [&] {
    DeliveryLog::Answer a;
    return log.Begin({3, 1}, In(300), &a);
  });
  std::this_thread::sleep_for(milliseconds(50));
  log.Finish({4, 1}, {});
  EXPECT_EQ(retry.get(), DeliveryLog::Claim::kTimedOut);
}

TEST(RpcDeliveryLog, AWaitingRetryTakesTheOutcomeOfTheDelivery) {
  DeliveryLog log;
  DeliveryLog::Answer answer;
  ASSERT_EQ(log.Begin({5, 1}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  auto answered = std::async(std::launch::async, [&] {
    DeliveryLog::Answer a;
    const DeliveryLog::Claim c = log.Begin({5, 1}, In(5000), &a);
    return std::make_pair(c, a.code);
  });
  std::this_thread::sleep_for(milliseconds(50));
  log.Finish({5, 1}, DeliveryLog::Answer{0, ""});
  const auto [claim, code] = answered.get();
  EXPECT_EQ(claim, DeliveryLog::Claim::kAnswered);
  EXPECT_EQ(code, 0);

  // An abandoned delivery (its payload never arrived) hands the send to the waiting retry.
  ASSERT_EQ(log.Begin({5, 2}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  auto delivers = std::async(std::launch::async, [&] {
    DeliveryLog::Answer a;
    return log.Begin({5, 2}, In(5000), &a);
  });
  std::this_thread::sleep_for(milliseconds(50));
  { DeliveryClaim abandoned(&log, {5, 2}); }  // leaves without Finish
  EXPECT_EQ(delivers.get(), DeliveryLog::Claim::kDeliver);
}

TEST(RpcDeliveryLog, OnlyTheNewestAnswersAreKept) {
  DeliveryLog log;
  DeliveryLog::Answer answer;
  for (uint64_t r = 1; r <= DeliveryLog::kRemembered + 1; ++r) {
    ASSERT_EQ(log.Begin({6, r}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
    log.Finish({6, r}, {});
  }
  // The oldest was pushed out (a retry that late is not expected); the newest is remembered.
  EXPECT_EQ(log.Begin({6, 1}, In(1000), &answer), DeliveryLog::Claim::kDeliver);
  EXPECT_EQ(log.Begin({6, DeliveryLog::kRemembered + 1}, In(1000), &answer),
            DeliveryLog::Claim::kAnswered);
  EXPECT_EQ(log.Begin({6, 2}, In(1000), &answer), DeliveryLog::Claim::kAnswered);
}

}  // namespace
}  // namespace fleet_rpc
