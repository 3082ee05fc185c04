// When the CPU ops hand work to the workers. Internal to ft_engine.
#pragma once

#include <cstddef>

namespace ft::engine::cpu {

// Work of fewer elements than this (a decode step's rows) runs on the calling thread: handing it to
// the workers costs more than doing it.
inline constexpr std::size_t kParallelElems = std::size_t(1) << 15;

}  // namespace ft::engine::cpu
