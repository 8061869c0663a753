# A Debian package of the installed duograd (cmake/install.cmake):
#   cmake --build build && (cd build && cpack -G DEB)
# One package, libraries, headers, CMake and pkg-config files and the bench
# together, installed under /usr like the packages of its dependencies.
# dpkg-shlibdeps derives the run-time dependencies from the binaries; the
# -dev packages a program needs to build against duograd are named here.
set(CPACK_PACKAGE_NAME duograd)
set(CPACK_PACKAGE_VENDOR duograd)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "reverse-mode autodiff on the CPU (OpenMP, OpenBLAS): library and bench")
if(DG_HAVE_CUDA)
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "reverse-mode autodiff on the CPU (OpenMP, OpenBLAS) and the GPU (CUDA): library and bench")
endif()
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "duograd")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(DG_HAVE_CUDA)
  # the CUDA libraries come from NVIDIA's installer, not from a Debian
  # package dpkg-shlibdeps could name: it is told they are private
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas-openmp-dev, libsleef-dev, zlib1g-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gnuplot-nox")
include(CPack)
