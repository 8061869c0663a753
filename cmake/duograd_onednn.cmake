# The imported target duograd::onednn: oneDNN (libdnnl), the vendor GEMM
# of the CPU backend (cpu_backend/cpu_onednn.c) beside OpenBLAS. Read by
# duograd's build when DG_ONEDNN is ON and by its installed package
# (duograd-config.cmake) when it was built so, so each machine finds its
# own copy (Debian: libdnnl-dev, oneDNN 2.6, whose CPU runtime is GCC's
# OpenMP, the one duograd uses: no second thread pool).
if(TARGET duograd::onednn)
  return()
endif()
find_path(DUOGRAD_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h)
# libdnnl.so.2: a machine with the run-time package but not the -dev one
find_library(DUOGRAD_ONEDNN_LIBRARY NAMES dnnl libdnnl.so.2)
if(DUOGRAD_ONEDNN_LIBRARY AND DUOGRAD_ONEDNN_INCLUDE_DIR)
  get_filename_component(DUOGRAD_ONEDNN_LIBDIR ${DUOGRAD_ONEDNN_LIBRARY} DIRECTORY)
  add_library(duograd::onednn UNKNOWN IMPORTED)
  set_target_properties(duograd::onednn PROPERTIES IMPORTED_LOCATION ${DUOGRAD_ONEDNN_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${DUOGRAD_ONEDNN_INCLUDE_DIR})
endif()
