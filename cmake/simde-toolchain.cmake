# Lets deno_core's QuickJS backend (v8x) build offline: its CMake project fetches
# SIMDe from GitHub unless told where a copy is. Debian's libsimde-dev ships one.
if(EXISTS "/usr/include/simde/simde-common.h")
  set(FETCHCONTENT_SOURCE_DIR_SIMDE "/usr/include" CACHE PATH "SIMDe headers from libsimde-dev")
endif()
