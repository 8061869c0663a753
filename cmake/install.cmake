# The installed duograd (included by CMakeLists.txt when DG_INSTALL is on),
# in three install components, one Debian package each (package.cmake):
#   lib: LIBDIR/libduograd.so.0.1.0 (soname libduograd.so.0.1; LIBDIR is
#     lib/<multiarch> on Debian, CMakeLists.txt);
#   dev: libduograd.so, libduograd.a, the check kit libduograd_check.a,
#     include/duograd/ (duograd.h and testing.h from include/duograd/,
#     version.h, and the public headers in the source layout: core/,
#     core/nn/, core/data/, core/check/, cpu_backend/, gpu_backend/),
#     LIBDIR/cmake/duograd/ (find_package(duograd CONFIG)),
#     LIBDIR/pkgconfig/duograd.pc;
#   bench: bin/duograd-bench and its man page (install_bench.cmake).
include(CMakePackageConfigHelpers)

# What a program may include; every other header (attrs.h, layout.h,
# backend_impl.h, *_internal.h, cpu_kernels.h, cpu_onednn.h, cpu_onednn_engine.h,
# cpu_onednn_conv.h, gpu_common.cuh, the data stream) is the library's own
# and stays behind.
# The hooks of the tests and the bench (core/testing.h, gpu_testing.h,
# gathered by include/duograd/testing.h) are installed so that the bench
# builds against the installed package; the umbrella leaves them out.
set(DG_PUBLIC_HEADERS
  core/autodiff.h core/backend.h core/cost.h core/graph.h core/ops.h core/plan.h core/precision.h core/rng.h core/status.h
  core/testing.h
  core/nn/cnn.h core/nn/layers.h core/nn/mlp.h core/nn/model.h core/nn/resnet.h
  core/nn/train_step.h core/nn/trainer.h core/nn/transformer.h core/nn/lm_trainer.h core/nn/data_parallel.h
  core/data/dataset.h core/data/text.h core/onnx/onnx.h
  cpu_backend/cpu_backend.h)
# The float64 check kit (core/check/, libduograd_check.a): the bench's and
# the tests' references and checks, installed so that the bench builds
# against the package. Its headers include public headers alone.
file(GLOB DG_CHECK_HEADERS RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/check/*.h)
list(APPEND DG_PUBLIC_HEADERS ${DG_CHECK_HEADERS})
if(DG_HAVE_CUDA)
  list(APPEND DG_PUBLIC_HEADERS gpu_backend/gpu_backend.h gpu_backend/gpu_testing.h)
endif()

# Both libraries are made of the layers' position-independent objects (so
# libduograd.a can go into a program's own shared library too).
set(DG_LIB_OBJECTS $<TARGET_OBJECTS:dg_core_pic> $<TARGET_OBJECTS:dg_cpu_pic>)
# protobuf-c: the ONNX importer's reader runtime, by name (Debian's default
# library path), so the exported targets need no imported target of it
set(DG_LIB_DEPS ZLIB::ZLIB m protobuf-c OpenMP::OpenMP_C duograd::openblas duograd::sleef)
if(DG_ONEDNN)
  list(APPEND DG_LIB_DEPS duograd::onednn)
endif()
set(DG_LIB_LANGUAGE C)
if(DG_HAVE_CUDA)
  list(APPEND DG_LIB_OBJECTS ${DG_GPU_OBJECTS})
  list(APPEND DG_LIB_DEPS CUDA::cudart_static)   # cuBLAS is loaded at run time (gpu_cublas.cu)
  set(DG_LIB_LANGUAGE CUDA)
endif()
add_library(duograd_shared SHARED ${DG_LIB_OBJECTS})
add_library(duograd_static STATIC ${DG_LIB_OBJECTS})
# 0.x: a minor release may change the ABI, so the soname carries the minor
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(DG_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(DG_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()
set_target_properties(duograd_shared PROPERTIES OUTPUT_NAME duograd EXPORT_NAME duograd
  VERSION ${PROJECT_VERSION} SOVERSION ${DG_SOVERSION} LINKER_LANGUAGE ${DG_LIB_LANGUAGE}
  INSTALL_RPATH "${DG_OPENBLAS_RPATH}" BUILD_WITH_INSTALL_RPATH ON
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/duograd.map)
set_target_properties(duograd_static PROPERTIES OUTPUT_NAME duograd EXPORT_NAME duograd_static
  LINKER_LANGUAGE ${DG_LIB_LANGUAGE})
foreach(t duograd_shared duograd_static)
  target_include_directories(${t} PUBLIC $<BUILD_INTERFACE:${DG_ROOT_INCLUDE}> $<BUILD_INTERFACE:${DG_TOP_INCLUDE}>
                                         $<BUILD_INTERFACE:${DG_GEN_INCLUDE}>
                                         $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
# The shared library exports the public dg_ API alone (duograd.map hides the
# dg__ internals its objects share) and resolves all it calls (-z defs);
# its dependencies are its own business. The static one hands them on.
target_link_options(duograd_shared PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/duograd.map"
                    "LINKER:-z,defs")
target_link_libraries(duograd_shared PRIVATE ${DG_LIB_DEPS})
list(TRANSFORM DG_LIB_DEPS REPLACE "(.+)" "$<LINK_ONLY:\\1>")
target_link_libraries(duograd_static INTERFACE ${DG_LIB_DEPS})

# The check kit: static only (a program's tests link it), its position-
# independent objects, calling the shared library's public API (its
# interface links duograd::duograd).
add_library(duograd_check STATIC $<TARGET_OBJECTS:dg_check_pic>)
set_target_properties(duograd_check PROPERTIES OUTPUT_NAME duograd_check EXPORT_NAME duograd_check)
target_include_directories(duograd_check PUBLIC $<BUILD_INTERFACE:${DG_ROOT_INCLUDE}>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(duograd_check INTERFACE duograd_shared $<LINK_ONLY:OpenMP::OpenMP_C> $<LINK_ONLY:m>)

install(TARGETS duograd_shared duograd_static duograd_check EXPORT duograd-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
foreach(h ${DG_PUBLIC_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duograd/${dir} COMPONENT dev)
endforeach()
install(FILES ${DG_TOP_INCLUDE}/duograd/duograd.h ${DG_TOP_INCLUDE}/duograd/testing.h ${DG_GEN_INCLUDE}/duograd/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duograd COMPONENT dev)

# the CMake package
set(DG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/duograd)
install(EXPORT duograd-targets NAMESPACE duograd:: DESTINATION ${DG_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/duograd-config.cmake.in
  ${PROJECT_BINARY_DIR}/duograd-config.cmake INSTALL_DESTINATION ${DG_CMAKE_DIR})
# 0.x: only the same minor release is compatible (as the soname says)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/duograd-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/duograd-config.cmake ${PROJECT_BINARY_DIR}/duograd-config-version.cmake
        ${CMAKE_CURRENT_LIST_DIR}/duograd_openblas.cmake ${CMAKE_CURRENT_LIST_DIR}/duograd_sleef.cmake
        ${CMAKE_CURRENT_LIST_DIR}/duograd_onednn.cmake
        DESTINATION ${DG_CMAKE_DIR} COMPONENT dev)

# duograd.pc, relocatable: its prefix is found from its own folder
# (${pcfiledir}), so an install with --prefix elsewhere still finds itself.
set(DG_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH DG_PC_UP /${DG_PC_DIR} /)
set(DG_PC_PREFIX "\${pcfiledir}/${DG_PC_UP}")
string(REGEX REPLACE "/$" "" DG_PC_PREFIX "${DG_PC_PREFIX}")
set(DG_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
set(DG_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
set(DG_PC_LIBS_PRIVATE "-L${DUOGRAD_OPENBLAS_LIBDIR} -lopenblas -L${DUOGRAD_SLEEF_LIBDIR} -lsleef -lprotobuf-c ${OpenMP_C_FLAGS} -lm")
if(DG_ONEDNN)
  string(PREPEND DG_PC_LIBS_PRIVATE "-L${DUOGRAD_ONEDNN_LIBDIR} -ldnnl ")
endif()
set(DG_PC_CUDA_WORDS "")
set(DG_PC_CUDA_LIBDIR "")
if(DG_HAVE_CUDA)
  # the toolkit's folder as a variable: NVIDIA's installer puts it under
  # /usr/local, which no directive of a packaged .pc may name
  set(DG_PC_CUDA_LIBDIR "cudalibdir=${CUDAToolkit_LIBRARY_DIR}")
  string(APPEND DG_PC_LIBS_PRIVATE " -L\${cudalibdir} -lcudart_static -lrt -lpthread -ldl")
  set(DG_PC_CUDA_WORDS " and a CUDA/cuBLAS GPU backend")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/duograd.pc.in ${PROJECT_BINARY_DIR}/duograd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/duograd.pc DESTINATION ${DG_PC_DIR} COMPONENT dev)
