# Build options. AUTO parts are built when their dependency is found and skipped with a status
# message otherwise; ON makes a missing dependency a configure error; OFF skips the part.
set(FLEET_WITH_CUDA AUTO CACHE STRING "Build the CUDA device plugin (AUTO, ON, OFF)")
set(FLEET_WITH_NCCL AUTO CACHE STRING "Build the NCCL communicator plugin (AUTO, ON, OFF)")
set_property(CACHE FLEET_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE FLEET_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
option(FLEET_BUILD_TESTS "Build the tests" ON)
option(FLEET_WERROR "Treat compiler warnings as errors" OFF)
# A tree of libFuzzer harnesses (tests/fuzz) over a host library built with ASan and UBSan,
# plus the unit tests that need no plugin; needs clang. Builds nothing else: no plugins (the
# rpc transport's message code aside), other tests or benchmarks (scripts/fuzz.sh).
option(FLEET_FUZZ "Build the fuzz harnesses (clang, sanitizers) instead of the product" OFF)

# Where plugins live, relative to the install prefix (and to the build tree).
set(FLEET_PLUGIN_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/fleet/plugins")
set(FLEET_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/Fleet")

set(FLEET_HOST_WARNINGS -Wall -Wextra -Wno-unused-parameter)
if(FLEET_WERROR)
  list(APPEND FLEET_HOST_WARNINGS -Werror)
endif()

# Resolves an AUTO/ON/OFF option against whether the dependency was found. Sets ${out} to TRUE
# when the part should be built.
function(fleet_resolve_option option found what out)
  if(${option} STREQUAL "OFF")
    message(STATUS "Fleet: ${what} disabled (${option}=OFF)")
    set(${out} FALSE PARENT_SCOPE)
  elseif(found)
    message(STATUS "Fleet: building ${what}")
    set(${out} TRUE PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "Fleet: ${what} was requested (${option}=ON) but its dependency was not found")
  else()
    message(STATUS "Fleet: skipping ${what}: dependency not found")
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
