# Runs at build time (cmake -P): writes generated/core/version.h with the current commit, and
# touches it only when the text changes, so an unchanged commit triggers no rebuild.
execute_process(
  COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE LOCUS_GIT_COMMIT
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT LOCUS_GIT_COMMIT)
  set(LOCUS_GIT_COMMIT "unknown")
endif()
execute_process(
  COMMAND git status --porcelain --untracked-files=no
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE _dirty
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(_dirty)
  string(APPEND LOCUS_GIT_COMMIT "-dirty")
endif()
configure_file(${SOURCE_DIR}/src/core/version.h.in ${OUTPUT} @ONLY)
