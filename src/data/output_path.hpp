#pragma once
// Private to src/data: the pieces every atomic output shares (h5_writer.cpp,
// h5_parallel_writer.cpp, output_set.cpp): where its temporary file goes, the checks on the
// final path and the fsyncs around the rename (defined in output_set.cpp), and the HDF5
// objects both writers make alike (defined in h5_writer.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"

namespace spmd::data::output_path {

// Throws spmd::Error when final_path is empty, its folder does not exist or it is a
// directory.
void require_writable_target(const std::string& final_path);

// `<dir of final_path>/.<name>.tmp.<pid>`: in the final file's folder, so that the rename
// stays within one file system and is atomic.
std::string temp_path_for(const std::string& final_path, long pid);

// Data must be on the disk before the rename makes it visible under the final name, or a
// crash could leave a complete-looking name with missing contents. Best effort (some file
// systems refuse it).
void fsync_path(const std::string& path, bool directory);

// Renames temp onto final (throws spmd::Error naming both) and fsyncs the folder.
void publish(const std::string& temp_path, const std::string& final_path);

}  // namespace spmd::data::output_path

namespace spmd::data {

// The dataspace of shape (row-major; {} for a scalar).
H5Dataspace make_space(const std::vector<std::int64_t>& shape, const char* hint);

// Dataset `name` of the native form of type over space, its groups created on the way.
H5Dataset create_dataset(hid_t file, const std::string& name, ElementType type, hid_t space, hid_t create_props,
                         const char* hint);

// Attribute `name` of `object` ("" or "/": the file) of shape, holding data of type; one
// written twice keeps the last value.
void write_attribute(hid_t file, const std::string& object, const std::string& name, hid_t type,
                     const std::vector<std::int64_t>& shape, const void* data, const std::string& final_path);
// The same for text, stored as fixed-length UTF-8 of its length: readable by h5py and h5dump alike.
void write_attribute(hid_t file, const std::string& object, const std::string& name, const std::string& text,
                     const std::string& final_path);

}  // namespace spmd::data
