#include <algorithm>
#include <fstream>
#include <numeric>

#include "ft/engine/checkpoint.h"
#include "weights/safetensors_layout.h"

namespace ft::engine {

Status write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::vector<TensorHeader> headers;
  headers.reserve(tensors.size());
  for (const OwnedTensor& t : tensors) headers.push_back({t.name, t.dtype, t.shape});
  FT_ASSIGN_OR_RETURN(const SafetensorsLayout layout, layout_safetensors(headers, metadata));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (headers[i].nbytes() != tensors[i].data.size()) {
      return invalid_argument("write_safetensors: tensor '" + tensors[i].name + "' has " +
                              std::to_string(tensors[i].data.size()) + " bytes, its shape and dtype " +
                              dtype_name(tensors[i].dtype) + " need " + std::to_string(headers[i].nbytes()));
    }
  }

  std::vector<std::size_t> data_order(tensors.size());
  std::iota(data_order.begin(), data_order.end(), 0);
  std::sort(data_order.begin(), data_order.end(),
            [&](std::size_t a, std::size_t b) { return layout.begin[a] < layout.begin[b]; });

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path.string());
  out.write(layout.prefix.data(), std::streamsize(layout.prefix.size()));
  for (std::size_t i : data_order) {
    out.write(reinterpret_cast<const char*>(tensors[i].data.data()), std::streamsize(tensors[i].data.size()));
  }
  out.close();
  if (!out) return io_error("cannot write " + path.string());
  return Status::ok();
}

}  // namespace ft::engine
