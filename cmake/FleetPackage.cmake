# Installs what a third party needs to build a plugin against an installed Fleet without its
# sources: the ABI headers, the Fleet CMake package (Fleet::plugin_api and fleet_add_plugin) and a
# pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS fleet_plugin_api EXPORT FleetTargets)
install(DIRECTORY plugin_api/include/fleet DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY plugin_api/cpp/fleet DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT FleetTargets NAMESPACE Fleet:: DESTINATION "${FLEET_CMAKE_INSTALL_DIR}")

configure_package_config_file(cmake/FleetConfig.cmake.in
  "${PROJECT_BINARY_DIR}/FleetConfig.cmake"
  INSTALL_DESTINATION "${FLEET_CMAKE_INSTALL_DIR}"
  PATH_VARS FLEET_PLUGIN_INSTALL_DIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/FleetConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/FleetConfig.cmake"
  "${PROJECT_BINARY_DIR}/FleetConfigVersion.cmake"
  cmake/FleetPlugin.cmake
  DESTINATION "${FLEET_CMAKE_INSTALL_DIR}")

# The .pc file finds its prefix from its own location, so the install can be moved.
file(RELATIVE_PATH FLEET_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(cmake/fleet-plugin.pc.in "${PROJECT_BINARY_DIR}/fleet-plugin.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/fleet-plugin.pc"
  DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# The plugin author's documentation: how to write each component and run the conformance kit,
# the annotated fleet.toml (every key, with its default) and the ABI changelog.
install(FILES docs/plugins.md DESTINATION "${CMAKE_INSTALL_DOCDIR}")
install(FILES plugin_api/CHANGELOG.md DESTINATION "${CMAKE_INSTALL_DOCDIR}"
  RENAME ABI-CHANGELOG.md)
install(FILES examples/fleet.toml DESTINATION "${CMAKE_INSTALL_DATADIR}/fleet")
