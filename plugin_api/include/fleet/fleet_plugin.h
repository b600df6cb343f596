/*
 * fleet_plugin.h — includes the whole Fleet plugin ABI. A plugin includes this and defines
 *
 *     FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
 *                                                     FleetPluginInfo* info);
 *
 * See fleet_host.h for the start-up protocol and fleet_abi.h for the versioning rules.
 */
#ifndef FLEET_PLUGIN_H_
#define FLEET_PLUGIN_H_

#include "fleet/fleet_abi.h"
#include "fleet/fleet_host.h"
#include "fleet/fleet_device.h"
#include "fleet/fleet_kernels.h"
#include "fleet/fleet_comm.h"
#include "fleet/fleet_pass.h"
#include "fleet/fleet_transport.h"
#include "fleet/fleet_op_schema.h"

#endif /* FLEET_PLUGIN_H_ */
