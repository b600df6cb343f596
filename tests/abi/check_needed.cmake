# Checks the DT_NEEDED entries of a built plugin: none may match FORBID (a regular expression).
# The CUDA plugin opens cuBLAS on first use (plugins/cuda/lazy_cublas.cc) so that loading it,
# as every `fleet-host plugins` listing does, stays cheap; linking cuBLAS again would quietly
# undo that.
#
#   cmake -DREADELF=<readelf> -DPLUGIN=<file.so> -DFORBID=<regex> -P check_needed.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var READELF PLUGIN FORBID)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check_needed.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${READELF}" -d "${PLUGIN}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${PLUGIN} failed (${rc})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]]*\\]" needed "${out}")
if(NOT needed)
  message(FATAL_ERROR "${PLUGIN}: no NEEDED entries found; is it a shared library?")
endif()
foreach(entry IN LISTS needed)
  if(entry MATCHES "${FORBID}")
    message(FATAL_ERROR "${PLUGIN} links ${entry}, which must be loaded on first use instead")
  endif()
endforeach()
message(STATUS "${PLUGIN}: ${needed}")
