# Debian packages of the installed duograd (cmake/install.cmake), one per
# install component, under /usr like the packages of its dependencies:
#   cmake --build build && (cd build && cpack -G DEB)
#   libduograd0.1   lib: the shared library (named after its soname, with a
#                   shlibs file and the ldconfig trigger);
#   libduograd-dev  dev: headers, libduograd.so, the static libraries (the
#                   check kit's among them), CMake and pkg-config files;
#   duograd-bench   bench: the command and its man page.
# dpkg-shlibdeps derives each package's run-time dependencies from its
# binaries; the -dev package names the -dev packages a build against
# duograd needs. Each package carries the copyright file (made from
# LICENSE), the Debian changelog (the release's date from CHANGELOG.md) and
# CHANGELOG.md. scripts/consumer-test.sh builds them and runs lintian.
set(DG_DEB_RELEASE 1)
set(DG_DEB_VERSION ${PROJECT_VERSION}-${DG_DEB_RELEASE})
set(DG_DEB_LIB libduograd${DG_SOVERSION})
set(DG_DEB_MAINTAINER "duograd maintainers <duograd@example.org>" CACHE STRING
    "The Debian packages' Maintainer: Name <address>")
set(DG_DEB_PACKAGES ${DG_DEB_LIB} libduograd-dev)
set(CPACK_COMPONENTS_ALL lib dev)
if(TARGET duograd-bench)
  list(APPEND DG_DEB_PACKAGES duograd-bench)
  list(APPEND CPACK_COMPONENTS_ALL bench)
endif()

# the files every package's /usr/share/doc/PACKAGE holds
set(DG_DEB_DIR ${PROJECT_BINARY_DIR}/debian)
# copyright, machine-readable (DEP-5): LICENSE's text as the Expat license
file(STRINGS ${PROJECT_SOURCE_DIR}/LICENSE DG_LICENSE_LINES)
list(POP_FRONT DG_LICENSE_LINES)              # "MIT License"
list(POP_FRONT DG_LICENSE_LINES)              # its blank line
list(POP_FRONT DG_LICENSE_LINES DG_LICENSE_COPYRIGHT)
string(REGEX REPLACE "^Copyright \\(c\\) " "" DG_LICENSE_COPYRIGHT "${DG_LICENSE_COPYRIGHT}")
set(DG_LICENSE_TEXT "")
foreach(line IN LISTS DG_LICENSE_LINES)
  if(line STREQUAL "")
    string(APPEND DG_LICENSE_TEXT " .\n")
  else()
    string(APPEND DG_LICENSE_TEXT " ${line}\n")
  endif()
endforeach()
string(REGEX REPLACE "^ \\.\n" "" DG_LICENSE_TEXT "${DG_LICENSE_TEXT}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/copyright.in ${DG_DEB_DIR}/copyright @ONLY)
# changelog.Debian: this release's entry, dated as CHANGELOG.md dates it
file(STRINGS ${PROJECT_SOURCE_DIR}/CHANGELOG.md DG_RELEASE_LINE REGEX "^## \\[${PROJECT_VERSION}\\] - ")
string(REGEX MATCH "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]" DG_RELEASE_DAY "${DG_RELEASE_LINE}")
if(NOT DG_RELEASE_DAY)
  message(FATAL_ERROR "CHANGELOG.md has no section '## [${PROJECT_VERSION}] - YYYY-MM-DD' for project()'s version")
endif()
execute_process(COMMAND date -u -R -d "${DG_RELEASE_DAY} 00:00:00 UTC" OUTPUT_VARIABLE DG_RELEASE_DATE
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
# the ldconfig trigger of the library's package, and the overrides of
# lintian's custom-library-search-path: the rpath names the system's folder
# of OpenBLAS's OpenMP build (cmake/duograd_openblas.cmake), which an OpenMP
# program must load instead of the build the alternatives system may give
file(WRITE ${DG_DEB_DIR}/triggers "activate-noawait ldconfig\n")
foreach(pkg ${DG_DEB_PACKAGES})
  set(DG_DEB_PACKAGE ${pkg})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/changelog.in ${DG_DEB_DIR}/${pkg}/changelog.Debian @ONLY)
  configure_file(${PROJECT_SOURCE_DIR}/CHANGELOG.md ${DG_DEB_DIR}/${pkg}/changelog COPYONLY)
  foreach(f changelog.Debian changelog)
    execute_process(COMMAND gzip -9nf ${DG_DEB_DIR}/${pkg}/${f} COMMAND_ERROR_IS_FATAL ANY)
  endforeach()
  if(pkg STREQUAL DG_DEB_LIB)
    set(component lib)
  elseif(pkg STREQUAL "libduograd-dev")
    set(component dev)
  else()
    set(component bench)
  endif()
  install(FILES ${DG_DEB_DIR}/copyright ${DG_DEB_DIR}/${pkg}/changelog.Debian.gz ${DG_DEB_DIR}/${pkg}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg} COMPONENT ${component})
  if(DG_OPENBLAS_RPATH AND NOT component STREQUAL "dev")
    file(WRITE ${DG_DEB_DIR}/${pkg}/lintian "${pkg}: custom-library-search-path RUNPATH ${DG_OPENBLAS_RPATH} *\n")
    install(FILES ${DG_DEB_DIR}/${pkg}/lintian DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
            RENAME ${pkg} COMPONENT ${component})
  endif()
endforeach()

set(CPACK_PACKAGE_NAME duograd)
set(CPACK_PACKAGE_VENDOR duograd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${DG_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DG_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# dpkg-shlibdeps names libopenblas0, which any of OpenBLAS's builds
# satisfies: the binaries that load the OpenMP build by their rpath need
# that build's package
if(DUOGRAD_OPENBLAS_LIBDIR MATCHES "openblas-openmp")
  set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS libopenblas0-openmp)
  set(CPACK_DEBIAN_BENCH_PACKAGE_DEPENDS libopenblas0-openmp)
endif()
set(DG_DEB_WHAT "duograd builds a static computation graph, differentiates it in reverse
mode, plans its memory once and runs it on an OpenMP and OpenBLAS CPU
backend")
if(DG_HAVE_CUDA)
  # no dependency on NVIDIA's libraries (CMakeLists.txt: the CUDA runtime
  # linked statically, cuBLAS and NCCL loaded at run time): the GPU backend
  # works where the driver and cuBLAS are installed, the CPU one anywhere
  string(APPEND DG_DEB_WHAT " or, where NVIDIA's driver and cuBLAS are installed, a
CUDA and cuBLAS GPU backend")
endif()
string(APPEND DG_DEB_WHAT ".")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${DG_DEB_LIB})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# CPack 3.25 reads this one for every package: the library's alone has a
# shared object to describe
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${DG_DEB_DIR}/triggers)
set(CPACK_COMPONENT_LIB_DESCRIPTION "reverse-mode automatic differentiation on the CPU and the GPU
${DG_DEB_WHAT}
This package holds the shared library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libduograd-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${DG_DEB_LIB} (= ${DG_DEB_VERSION}), libopenblas-openmp-dev, libsleef-dev, zlib1g-dev")
# the library and the bench need libdnnl2 (dpkg-shlibdeps finds it); a
# program linking libduograd.a needs its -dev package
if(DG_ONEDNN)
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", libdnnl-dev")
endif()
set(CPACK_COMPONENT_DEV_DESCRIPTION "reverse-mode automatic differentiation: development files
${DG_DEB_WHAT}
This package holds the headers, the static libraries, the float64 check kit
(libduograd_check.a) and the CMake and pkg-config files.")

set(CPACK_DEBIAN_BENCH_PACKAGE_NAME duograd-bench)
set(CPACK_DEBIAN_BENCH_PACKAGE_SECTION science)
set(CPACK_DEBIAN_BENCH_PACKAGE_RECOMMENDS "gnuplot-nox")
set(CPACK_COMPONENT_BENCH_DESCRIPTION "benchmark reverse-mode autodiff on the CPU and the GPU side by side
${DG_DEB_WHAT}
duograd-bench times its sweeps (GEMM, ops, MLP, convolution, ResNet,
attention, transformer training steps), each result checked against a float64
reference, and writes CSV, JSON, charts and a summary.")
include(CPack)
