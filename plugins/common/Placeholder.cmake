# fleet_add_placeholder_plugin(NAME DESCRIPTION [LIBRARIES lib...]): a plugin that loads and
# registers no component, for a backend whose components are not written yet.
function(fleet_add_placeholder_plugin name description)
  fleet_add_plugin(${name} SOURCES "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/placeholder_plugin.cc" ${ARGN})
  target_compile_definitions(fleet_${name} PRIVATE
    FLEET_PLACEHOLDER_NAME="${name}" FLEET_PLACEHOLDER_DESCRIPTION="${description}")
endfunction()
