#include "spmd/data/h5_parallel_reader.hpp"

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"
#include "row_read.hpp"

namespace spmd::data {

template <class T>
std::vector<T> read_rows_parallel(const runtime::Context& ctx, const std::string& path, const std::string& name,
                                  std::int64_t first_row, std::int64_t rows) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string what = "dataset '" + name + "'";
  H5File file = open_file_parallel(ctx, path, what);
  std::vector<T> out;
  H5Dataset dataset;
  std::uint64_t row_elements = 1;
  runtime::agree_on(ctx.comm(), [&] {
    dataset = open_dataset(file.get(), path, name, "data");
    const auto dims = dataset_dims(dataset.get());
    if (dims.empty()) throw Error("'" + path + "': " + what + " is a scalar, it has no rows");
    for (std::size_t k = 1; k < dims.size(); ++k) row_elements *= static_cast<std::uint64_t>(dims[k]);
    if (first_row < 0 || rows < 0 || first_row + rows > dims[0])
      throw Error(rank_prefix(ctx) + "'" + path + "': cannot read rows [" +
                  std::to_string(first_row) + ", " + std::to_string(first_row + rows) + ") of " + what + ", which has " +
                  std::to_string(dims[0]) + " rows");
    out.resize(static_cast<std::size_t>(static_cast<std::uint64_t>(rows) * row_elements));
  });
  runtime::agree_on(ctx.comm(), [&] {
    const std::string hint = "reading rows of " + what + " from '" + path + "' with MPI-IO";
    const H5PropList xfer = collective_transfer(hint.c_str());
    read_rows(ctx, dataset.get(), native_hdf5_type(element_type_v<T>), xfer.get(), first_row,
              out.empty() ? 0 : rows, out.data());
  });
  return out;
}

template std::vector<float> read_rows_parallel<float>(const runtime::Context&, const std::string&, const std::string&,
                                                      std::int64_t, std::int64_t);
template std::vector<double> read_rows_parallel<double>(const runtime::Context&, const std::string&, const std::string&,
                                                        std::int64_t, std::int64_t);
template std::vector<std::int64_t> read_rows_parallel<std::int64_t>(const runtime::Context&, const std::string&,
                                                                    const std::string&, std::int64_t, std::int64_t);

}  // namespace spmd::data
