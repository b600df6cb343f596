# fleet_add_plugin(NAME SOURCES src... [LIBRARIES lib...] [NO_INSTALL] [OUTPUT_DIRECTORY dir])
#
# Builds a Fleet plugin: a MODULE library named libfleet_NAME.so, compiled with hidden
# visibility so that only the entry symbol (marked FLEET_EXPORT) is exported, linked with
# --no-undefined so a missing symbol fails at build time rather than at load time. Installed
# into the plugin directory unless NO_INSTALL. Used by Fleet's own plugins and, through the
# installed CMake package, by third-party ones.
function(fleet_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "fleet_add_plugin(${name}): SOURCES is required")
  endif()
  set(target fleet_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET Fleet::plugin_api)
    target_link_libraries(${target} PRIVATE Fleet::plugin_api)
  else()
    target_link_libraries(${target} PRIVATE fleet_plugin_api)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  # Hidden visibility cannot hide GNU-unique symbols that inline library code (std::to_string)
  # brings in; a version script exports the entry points and nothing else.
  set(map "${CMAKE_CURRENT_BINARY_DIR}/${target}.map")
  file(WRITE "${map}" "{ global: fleet_plugin_entry_v*; local: *; };\n")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED FLEET_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${FLEET_PLUGIN_OUTPUT_DIR}")
  endif()
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${FLEET_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
