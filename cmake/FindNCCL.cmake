# FindNCCL: NCCL ships no CMake package. The CUDA Toolkit install here puts nccl.h in the
# toolkit's include directory and libnccl.so in its lib/ (not lib64/), so look next to the
# toolkit first, then in NCCL_ROOT and the system paths.
#
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the target NCCL::NCCL.
find_package(CUDAToolkit QUIET)
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
if(CUDAToolkit_FOUND)
  list(APPEND _nccl_hints "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_TARGET_DIR}")
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} ([0-9]+)" _m "${_nccl_defs}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
                                  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL SHARED IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  if(TARGET CUDA::cudart)
    set_property(TARGET NCCL::NCCL APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
