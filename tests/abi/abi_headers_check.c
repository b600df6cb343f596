/*
 * abi_headers_check.c — the ABI headers as a plugin author's compiler sees them.
 *
 * Built three times: as C99 and as C11 (strict, -pedantic -Werror, no GNU extensions) and, via
 * abi_headers_check.cc, as C++20. Each header is also compiled alone in a generated translation
 * unit (see CMakeLists.txt); this file includes them all, as fleet_plugin.h does, and checks at
 * run time that the versioning macros behave as fleet_abi.h promises. Written in the common
 * subset of C and C++ (no designated initialisers, explicit casts).
 */
#include "fleet/fleet_plugin.h"

#include <stdio.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (0)

/* An entry with the documented signature and attribute; it is never called. If the header's
 * typedef and the documented declaration disagreed, the assignment in main would not compile.
 * (C++ needs extern "C" spelled out: the headers do not declare the entry themselves.) */
#ifdef __cplusplus
extern "C" {
#endif
FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info);
#ifdef __cplusplus
}
#endif
FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info) {
  (void)host;
  (void)info;
  return NULL;
}

static FleetStatus* some_host_alloc(void* ctx, size_t bytes, void** out) {
  (void)ctx;
  (void)bytes;
  *out = NULL;
  return NULL;
}

int main(void) {
  FleetPluginEntryV1 entry = fleet_plugin_entry_v1;
  /* Through pointers, as a real reader sees them. */
  FleetDeviceVTable table_storage;
  FleetDeviceVTable* table = &table_storage;
  const FleetDeviceVTable* no_table = NULL;
  FleetPluginInfo info_storage;
  FleetPluginInfo* info = &info_storage;

#if defined(FLEET_EXPECT_STDC_VERSION)
  /* The target property really selected the standard (no silent fallback to gnu11). */
  CHECK(__STDC_VERSION__ == FLEET_EXPECT_STDC_VERSION);
  printf("compiled as C, __STDC_VERSION__ = %ld\n", (long)__STDC_VERSION__);
#elif defined(__cplusplus)
  printf("compiled as C++, __cplusplus = %ld\n", (long)__cplusplus);
#endif

  CHECK(entry != NULL);
  CHECK(FLEET_ABI_MAJOR == 1);
  CHECK(FLEET_ABI_MINOR >= 0);
  CHECK(strcmp(FLEET_PLUGIN_ENTRY_V1, "fleet_plugin_entry_v1") == 0);

  /* A table written by an older plugin that stops at the last required slot. */
  memset(table, 0, sizeof(*table));
  table->struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, synchronize);
  table->host_alloc = some_host_alloc; /* stale memory beyond struct_size must not count */
  CHECK(FLEET_HAS_FIELD(table, FleetDeviceVTable, count));
  CHECK(FLEET_HAS_FIELD(table, FleetDeviceVTable, synchronize));
  CHECK(!FLEET_HAS_FIELD(table, FleetDeviceVTable, host_alloc));
  CHECK(!FLEET_CAN_CALL(table, FleetDeviceVTable, host_alloc));

  /* The same table from a current plugin: present and set, present and NULL. */
  table->struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native);
  CHECK(FLEET_CAN_CALL(table, FleetDeviceVTable, host_alloc));
  CHECK(FLEET_HAS_FIELD(table, FleetDeviceVTable, host_free));
  CHECK(!FLEET_CAN_CALL(table, FleetDeviceVTable, host_free));

  /* A larger writer (a newer minor) is never a reason to refuse. */
  table->struct_size = sizeof(*table) + 64;
  CHECK(FLEET_HAS_FIELD(table, FleetDeviceVTable, stream_native));

  /* A missing struct has no fields. */
  CHECK(!FLEET_HAS_FIELD(no_table, FleetDeviceVTable, struct_size));

  /* FLEET_STRUCT_SIZE counts through the member and never past sizeof. */
  CHECK(FLEET_STRUCT_SIZE(FleetPluginInfo, struct_size) == sizeof(size_t));
  CHECK(FLEET_STRUCT_SIZE(FleetPluginInfo, shutdown) <= sizeof(FleetPluginInfo));
  CHECK(FLEET_STRUCT_SIZE(FleetPluginInfo, description) <
        FLEET_STRUCT_SIZE(FleetPluginInfo, shutdown));
  CHECK(FLEET_STRUCT_SIZE(FleetTensor, device_ordinal) <= sizeof(FleetTensor));
  CHECK(FLEET_STRUCT_SIZE(FleetHostApi, program) <= sizeof(FleetHostApi));
  CHECK(FLEET_STRUCT_SIZE(FleetAttr, strings) <= sizeof(FleetAttr));

  /* What the host does before the entry runs: zero-fill, set the size; and what an older
   * plugin checks before writing a member it knows. */
  memset(info, 0, sizeof(*info));
  info->struct_size = FLEET_STRUCT_SIZE(FleetPluginInfo, description);
  CHECK(FLEET_HAS_FIELD(info, FleetPluginInfo, description));
  CHECK(!FLEET_HAS_FIELD(info, FleetPluginInfo, shutdown));

  /* Bits are distinct and fit the uint32_t members they travel in. */
  CHECK((FLEET_DEVICE_CAP_HOST_MEMORY & FLEET_DEVICE_CAP_SYNC_STREAMS) == 0u);
  CHECK((FLEET_DEVICE_CAP_SYNC_STREAMS & FLEET_DEVICE_CAP_PINNED_HOST) == 0u);
  CHECK((FLEET_SLOT_OPTIONAL | FLEET_SLOT_DUPLICABLE | FLEET_SLOT_NO_GRAD) == 7u);

  if (g_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("ABI %d.%d headers OK\n", FLEET_ABI_MAJOR, FLEET_ABI_MINOR);
  return 0;
}
