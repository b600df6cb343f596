// Assertions on a Status that say why: a failed call prints the expression and the status the
// plugin returned, not just "Value of: ... .ok()". The suites use them for every call whose
// success they require, so a plugin author reading a failure sees the plugin's own message.
#pragma once

#include <gtest/gtest.h>

#include "support/status.h"

#define FLEET_EXPECT_OK(expr)                                                         \
  do {                                                                                \
    const ::fleet::Status fleet_expect_ok_ = (expr);                                  \
    EXPECT_TRUE(fleet_expect_ok_.ok()) << #expr << " failed: " << fleet_expect_ok_.ToString(); \
  } while (0)

#define FLEET_ASSERT_OK(expr)                                                         \
  do {                                                                                \
    const ::fleet::Status fleet_assert_ok_ = (expr);                                  \
    ASSERT_TRUE(fleet_assert_ok_.ok()) << #expr << " failed: " << fleet_assert_ok_.ToString(); \
  } while (0)
