// The conformance suites' machine-readable report, read by fleet-conformance.
//
// When FLEET_CONFORMANCE_REPORT names a file, every suite appends one JSON object per line to
// it, each written with a single write(2) so that a line is never torn and a crash loses nothing
// already reported:
//   {"event":"begin","test":"Suite.Name"}
//   {"event":"run","test":T,"subject":"relu","variant":"float32","result":R,"message":M}
//       one call of the plugin under test: a kernel (subject op type, variant dtype), a
//       collective (subject collective, variant "world N"); R is "ok", "not_provided" (the
//       plugin has no kernel or slot for it) or "error" (it failed; M says how)
//   {"event":"failure","test":T,"where":"file:line","message":M}   a failed assertion
//   {"event":"end","test":T,"result":"passed"|"failed"|"skipped","message":M}
// M of "end" is the skip reason for a skipped test. Without the variable nothing is written.
//
// Linking report.cc into a GoogleTest binary installs the listener that writes begin, failure
// and end (a static initializer, before main runs the tests); the harnesses call ReportRun.
#pragma once

#include <string>

namespace fleet::conformance {

inline constexpr const char* kRunOk = "ok";
inline constexpr const char* kRunNotProvided = "not_provided";
inline constexpr const char* kRunError = "error";

// Appends a "run" event for the current test. Thread-safe (the comm suite runs ranks as
// threads).
void ReportRun(const std::string& subject, const std::string& variant, const char* result,
               const std::string& message = "");

// The prefix of every message for a call the plugin does not provide: the kit classifies a
// failed test whose failures all carry it as "not provided", and a human reading a plain gtest
// run sees why.
inline constexpr const char* kNotProvidedPrefix = "not provided: ";

}  // namespace fleet::conformance
