#include "weights/text_file.h"

#include <fstream>

namespace ft::engine {

Status write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return io_error("cannot write " + path.string());
  return Status::ok();
}

}  // namespace ft::engine
