# Debian packages (CPack): `cpack -G DEB --config build/CPackConfig.cmake` gives
#   spmd-kit_VERSION_amd64.deb       everything installed but the CUDA module; its Depends
#                                    from dpkg-shlibdeps (Open MPI, parallel HDF5, Boost,
#                                    OpenBLAS, ...) plus openmpi-bin (mpirun, for spmdrun)
#   spmd-kit-cuda_VERSION_amd64.deb  libspmd_cuda.so, on NVIDIA's CUDA runtime and cuBLAS
#                                    packages of the toolkit it was built with
# tools/test.sh --packaging installs the first on a clean Debian 12 (tools/packaging_test.sh).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spmd-kit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "SPMD Kit")
set(CPACK_PACKAGE_CONTACT "SPMD Kit maintainers <spmd-kit@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "SPMD data-parallel evaluation and training on MPI and parallel HDF5")
set(CPACK_PACKAGE_DESCRIPTION "spmd eval (padded full-dataset evaluation), spmd ensemble (CNN ensembles), spmd logreg (data-parallel L-BFGS) and spmd data, with the spmdrun launcher, an Lmod module, Slurm job scripts and the C++ API (find_package(SpmdKit), pkg-config spmd-kit).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb (no Debian revision set)
set(CPACK_DEBIAN_PACKAGE_SECTION science)

set(CPACK_COMPONENTS_ALL spmd-kit)
set(CPACK_DEBIAN_SPMD-KIT_PACKAGE_NAME spmd-kit)
set(CPACK_DEBIAN_SPMD-KIT_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SPMD-KIT_PACKAGE_DEPENDS "openmpi-bin")
# What C++ users of the headers (and of the module file) need besides the runtime.
set(CPACK_DEBIAN_SPMD-KIT_PACKAGE_SUGGESTS "libopenmpi-dev, libhdf5-openmpi-dev, cmake, pkg-config, lmod, slurm-client")
if(SPMD_HAVE_CUDA)
  list(APPEND CPACK_COMPONENTS_ALL spmd-kit-cuda)
  set(cuda_suffix ${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR})
  set(CPACK_DEBIAN_SPMD-KIT-CUDA_PACKAGE_NAME spmd-kit-cuda)
  # dpkg-shlibdeps knows no package for a toolkit installed outside dpkg: name NVIDIA's.
  set(CPACK_DEBIAN_SPMD-KIT-CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_SPMD-KIT-CUDA_PACKAGE_DEPENDS
      "spmd-kit (= ${PROJECT_VERSION}), cuda-cudart-${cuda_suffix}, libcublas-${cuda_suffix}")
  set(CPACK_DEBIAN_SPMD-KIT-CUDA_DESCRIPTION "SPMD Kit's CUDA backend (libspmd_cuda.so), loaded by spmd for --backend cuda|auto")
endif()
include(CPack)
