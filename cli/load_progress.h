// Loading a model of tens of gigabytes takes a while (copied to the GPU, or faulted in from disk):
// progress on stderr — one line redrawn on a terminal, a line every few seconds otherwise — and
// a last line with the size, time and rate (not for a load under 2 s when stderr is no terminal).
#pragma once

#include <cstdint>
#include <functional>

namespace ft::cli {

// A LoadOptions::progress for the CLI.
std::function<void(std::uint64_t placed, std::uint64_t total, bool done)> load_progress_printer();

}  // namespace ft::cli
