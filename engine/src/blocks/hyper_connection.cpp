#include "blocks/hyper_connection.h"

namespace ft::engine::blocks {

Result<HyperConnection> HyperConnection::load(const WeightLoader& w, const std::string& fn, const std::string& base,
                                              const std::string& scale, const HyperSpec& spec, bool head) {
  HyperConnection c;
  c.spec_ = spec;
  const int64_t rows = int64_t(head ? spec.streams : spec.mix_rows()), cols = int64_t(spec.streams * spec.dim);
  FT_ASSIGN_OR_RETURN(c.fn_, w.vector(fn, {rows, cols}));
  FT_ASSIGN_OR_RETURN(c.base_, w.vector(base, {rows}));
  FT_ASSIGN_OR_RETURN(c.scale_, w.vector(scale, {head ? 1 : 3}));
  return c;
}

}  // namespace ft::engine::blocks
