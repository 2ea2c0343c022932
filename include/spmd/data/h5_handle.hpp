#pragma once
// Owners for HDF5 identifiers (C API). An hid_t names a library object that must be
// closed with the matching H5?close; these move-only wrappers close it exactly once.
//
// Destruction order matters: a file opened with the MPI-IO driver refuses to close while
// its datasets are open (H5F_CLOSE_SEMI), and that close is collective. Declare the file
// owner before the dataset owners so that they are destroyed after them, and let every
// rank unwind at the same point (errors are agreed over ranks before they are thrown).
#include <hdf5.h>

#include <utility>

namespace spmd::data {

template <herr_t (*Close)(hid_t)>
class H5Id {
 public:
  H5Id() = default;
  // Takes ownership of id (a negative id, HDF5's failure value, owns nothing).
  explicit H5Id(hid_t id) : id_(id) {}
  ~H5Id() { reset(); }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& other) noexcept : id_(std::exchange(other.id_, kInvalid)) {}
  H5Id& operator=(H5Id&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, kInvalid);
    }
    return *this;
  }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now. The close status is ignored: this runs on error paths and in
  // destructors, where the caller has nothing better to do with it. Code that must know
  // whether data reached the disk calls close() instead.
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = kInvalid;
  }
  // Gives up ownership without closing (for an id whose collective close could not be
  // matched by the other ranks: leaking it is better than a hang).
  hid_t release() { return std::exchange(id_, kInvalid); }
  // Closes now and returns HDF5's status (negative on failure).
  herr_t close() { return id_ >= 0 ? Close(std::exchange(id_, kInvalid)) : 0; }

 private:
  static constexpr hid_t kInvalid = -1;
  hid_t id_ = kInvalid;
};

using H5File = H5Id<H5Fclose>;
using H5Dataset = H5Id<H5Dclose>;
using H5Dataspace = H5Id<H5Sclose>;
using H5PropList = H5Id<H5Pclose>;
using H5Datatype = H5Id<H5Tclose>;
using H5Group = H5Id<H5Gclose>;
using H5Attribute = H5Id<H5Aclose>;

}  // namespace spmd::data
