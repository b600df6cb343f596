# Checks the dynamic symbol table of a built plugin: it must define exactly the one entry symbol
# it is expected to (hidden visibility keeps everything else local), and nothing else but the
# linker's own markers. A leaked symbol can clash with another plugin's or the host's, which is
# what -fvisibility=hidden in fleet_add_plugin is for.
#
#   cmake -DNM=<nm> -DPLUGIN=<file.so> -DENTRY=<symbol|NONE> [-DALLOW=a,b] -P check_exports.cmake
#
# ENTRY: the only fleet_plugin_* symbol expected (NONE: no entry at all). ALLOW: comma-separated
# further symbols the plugin may define.
cmake_minimum_required(VERSION 3.25)  # -P scripts start with old policies (IN_LIST)

foreach(var NM PLUGIN ENTRY)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check_exports.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${PLUGIN}")
  message(FATAL_ERROR "check_exports.cmake: no such file: ${PLUGIN}")
endif()

execute_process(COMMAND "${NM}" -D --defined-only "${PLUGIN}"
  OUTPUT_VARIABLE nm_out ERROR_VARIABLE nm_err RESULT_VARIABLE nm_rc)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${PLUGIN} failed (${nm_rc}): ${nm_err}")
endif()

# Markers some linkers define in every shared object; not the plugin's doing.
set(standard _init _fini _edata _end __bss_start)
string(REPLACE "," ";" allowed "${ALLOW}")

set(entries "")
set(unexpected "")
string(REPLACE "\n" ";" lines "${nm_out}")
foreach(line IN LISTS lines)
  # "0000000000001139 T fleet_plugin_entry_v1" (the address is blank for absolute symbols)
  if(NOT line MATCHES "^[0-9a-fA-F ]* ([A-Za-z]) ([^ ]+)$")
    continue()
  endif()
  set(symbol "${CMAKE_MATCH_2}")
  if(symbol MATCHES "^fleet_plugin_")
    list(APPEND entries "${symbol}")
  elseif(NOT symbol IN_LIST standard AND NOT symbol IN_LIST allowed)
    list(APPEND unexpected "${CMAKE_MATCH_1} ${symbol}")
  endif()
endforeach()

get_filename_component(file_name "${PLUGIN}" NAME)
set(errors "")
if(ENTRY STREQUAL "NONE")
  if(entries)
    string(APPEND errors "  expected no fleet_plugin_* symbol, found: ${entries}\n")
  endif()
elseif(NOT entries STREQUAL ENTRY)
  string(APPEND errors
    "  expected exactly one fleet_plugin_* symbol, ${ENTRY}; found: '${entries}'\n")
endif()
if(unexpected)
  list(LENGTH unexpected count)
  list(JOIN unexpected "\n    " shown)
  string(APPEND errors
    "  ${count} other exported symbol(s) (missing hidden visibility?):\n    ${shown}\n")
endif()
if(errors)
  message(FATAL_ERROR "${file_name}: bad dynamic symbol table\n${errors}")
endif()
message(STATUS "${file_name}: exports '${entries}' and nothing else")
