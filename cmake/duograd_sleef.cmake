# The imported target duograd::sleef: SLEEF, the vectorised libm behind the
# CPU backend's exp and tanh (cpu_backend/cpu_vmath.h). Read by duograd's
# build and by its installed package (duograd-config.cmake), so each
# machine finds its own copy (Debian: libsleef-dev).
if(TARGET duograd::sleef)
  return()
endif()
find_path(DUOGRAD_SLEEF_INCLUDE_DIR sleef.h)
find_library(DUOGRAD_SLEEF_LIBRARY NAMES sleef libsleef.so.3)
if(DUOGRAD_SLEEF_LIBRARY AND DUOGRAD_SLEEF_INCLUDE_DIR)
  get_filename_component(DUOGRAD_SLEEF_LIBDIR ${DUOGRAD_SLEEF_LIBRARY} DIRECTORY)
  add_library(duograd::sleef UNKNOWN IMPORTED)
  set_target_properties(duograd::sleef PROPERTIES IMPORTED_LOCATION ${DUOGRAD_SLEEF_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${DUOGRAD_SLEEF_INCLUDE_DIR})
endif()
