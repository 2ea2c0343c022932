# Install rules: `cmake --install build --prefix PREFIX` gives a prefix that runs on its own
# (bin/spmd finds lib/libspmd.so and the CUDA module beside it through $ORIGIN), and a
# package for C++ users: find_package(SpmdKit) or pkg-config spmd-kit.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The public API: what an MPI program of its own needs to split rows over ranks, plan padded
# steps, count rows exactly over ranks and read HDF5 rows. Listed one by one: every other
# header (workloads, models, backends, output files, ...) is internal and may change at any
# commit. These include only each other (tests/cli/install.sh compiles each on its own
# against the installed prefix).
set(SPMD_PUBLIC_HEADERS
    runtime/mpi.hpp runtime/error.hpp runtime/context.hpp runtime/devices.hpp runtime/collectives.hpp
    runtime/large_pages.hpp
    sharding/split.hpp sharding/step_plan.hpp sharding/host_array.hpp sharding/step_sync.hpp
    sharding/pad_shard_unpad.hpp
    data/h5_handle.hpp data/element_type.hpp data/h5_reader.hpp data/h5_parallel_reader.hpp data/feature_decoder.hpp
    data/dataset.hpp data/serial_row_reader.hpp)
foreach(header ${SPMD_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/include/spmd/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spmd/${dir} COMPONENT spmd-kit)
endforeach()

# spmd looks for libspmd in ../lib; the module for libspmd (and the CUDA libraries where the
# toolkit put them, as it was linked) beside itself.
file(RELATIVE_PATH SPMD_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(spmd-cli PROPERTIES INSTALL_RPATH "$ORIGIN/${SPMD_BIN_TO_LIB}")
target_include_directories(spmd INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS spmd EXPORT SpmdKitTargets COMPONENT spmd-kit
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT spmd-kit)
install(TARGETS spmd-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT spmd-kit)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/spmdrun DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT spmd-kit)
if(SPMD_HAVE_CUDA)
  set_target_properties(spmd_cuda PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
  # The registry looks for modules in the folder of the libspmd.so it runs from.
  install(TARGETS spmd_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT spmd-kit-cuda)
endif()

set(SPMD_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/spmd-kit)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/jobs/slurm DESTINATION ${SPMD_SHARE_DIR}/jobs COMPONENT spmd-kit
        USE_SOURCE_PERMISSIONS PATTERN README.md EXCLUDE
        PATTERN scaling.sbatch EXCLUDE)  # runs tools/scaling_study.sh of a checkout
install(FILES ${PROJECT_SOURCE_DIR}/jobs/slurm/README.md DESTINATION ${SPMD_SHARE_DIR}/jobs/slurm COMPONENT spmd-kit)
file(GLOB SPMD_INPUT_FILES ${PROJECT_SOURCE_DIR}/inputs/*.ini)
install(FILES ${SPMD_INPUT_FILES} DESTINATION ${SPMD_SHARE_DIR}/inputs COMPONENT spmd-kit)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${SPMD_SHARE_DIR}/examples COMPONENT spmd-kit
        OPTIONAL PATTERN build EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/spmd-kit COMPONENT spmd-kit)
if(EXISTS ${PROJECT_SOURCE_DIR}/LICENSE)
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/spmd-kit COMPONENT spmd-kit)
endif()

# The CMake package: SpmdKit::spmd, with its dependencies found again on the user's side.
set(SPMD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/SpmdKit)
install(EXPORT SpmdKitTargets NAMESPACE SpmdKit:: DESTINATION ${SPMD_CMAKE_DIR} COMPONENT spmd-kit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SpmdKitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/SpmdKitConfig.cmake INSTALL_DESTINATION ${SPMD_CMAKE_DIR})
# SameMinorVersion: before 1.0 a minor release may break the API, as it may the ABI.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SpmdKitConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SpmdKitConfig.cmake ${PROJECT_BINARY_DIR}/SpmdKitConfigVersion.cmake
        DESTINATION ${SPMD_CMAKE_DIR} COMPONENT spmd-kit)

# pkg-config: the compile and link flags of MPI and parallel HDF5 as this build found them,
# so that a plain c++ works (their .pc names differ between distributions and MPIs).
set(SPMD_PC_CFLAGS "")
foreach(dir ${MPI_CXX_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  string(APPEND SPMD_PC_CFLAGS " -I${dir}")
endforeach()
# Only libhdf5 itself: a user's program calls HDF5 through the handles of the headers, and
# libspmd brings the rest of HDF5's own dependencies (curl, ssl, szip, ...).
set(SPMD_PC_HDF5 ${HDF5_C_LIBRARIES})
if(HDF5_C_LIBRARY_hdf5)
  set(SPMD_PC_HDF5 ${HDF5_C_LIBRARY_hdf5})
endif()
set(SPMD_PC_LIBS "")
foreach(lib ${MPI_CXX_LIBRARIES} ${SPMD_PC_HDF5})
  string(APPEND SPMD_PC_LIBS " ${lib}")
endforeach()
file(RELATIVE_PATH SPMD_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SPMD_PC_TO_PREFIX "${SPMD_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/spmd-kit.pc.in ${PROJECT_BINARY_DIR}/spmd-kit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/spmd-kit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT spmd-kit)

# The Lmod module: `module use PREFIX/share/modulefiles; module load spmd-kit`.
configure_file(${PROJECT_SOURCE_DIR}/cmake/modulefile.lua.in ${PROJECT_BINARY_DIR}/modulefile.lua @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/modulefile.lua DESTINATION ${CMAKE_INSTALL_DATADIR}/modulefiles/spmd-kit
        RENAME ${PROJECT_VERSION}.lua COMPONENT spmd-kit)
