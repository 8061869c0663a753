# The imported target duograd::openblas: OpenBLAS, its OpenMP build. An
# OpenMP program calling the pthread build would oversubscribe the cores.
# Debian installs that build under openblas-openmp/, beside the others,
# and its alternatives system may point the plain libopenblas.so.0 at the
# pthread build: so the OpenMP build is linked by its own path, and
# DUOGRAD_OPENBLAS_LIBDIR is the folder the rpath of duograd's binaries
# names. Read by duograd's build and by its installed package
# (duograd-config.cmake), so each machine finds its own copy.
if(TARGET duograd::openblas)
  return()
endif()
find_path(DUOGRAD_OPENBLAS_INCLUDE_DIR cblas.h
  HINTS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/openblas-openmp
  NO_DEFAULT_PATH)
find_path(DUOGRAD_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
# libopenblas.so.0: a machine with the run-time package but not the -dev one
find_library(DUOGRAD_OPENBLAS_LIBRARY NAMES openblas libopenblas.so.0
  HINTS /usr/lib/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_library(DUOGRAD_OPENBLAS_LIBRARY NAMES openblas libopenblas.so.0)
if(DUOGRAD_OPENBLAS_LIBRARY)
  get_filename_component(DUOGRAD_OPENBLAS_LIBDIR ${DUOGRAD_OPENBLAS_LIBRARY} DIRECTORY)
  add_library(duograd::openblas UNKNOWN IMPORTED)
  set_target_properties(duograd::openblas PROPERTIES IMPORTED_LOCATION ${DUOGRAD_OPENBLAS_LIBRARY})
  if(DUOGRAD_OPENBLAS_INCLUDE_DIR)
    set_target_properties(duograd::openblas PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${DUOGRAD_OPENBLAS_INCLUDE_DIR})
  endif()
endif()
