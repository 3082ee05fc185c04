// How a fuzz target reports a violated invariant: abort, so libFuzzer keeps the input as a crash
// and the corpus replay fails.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ft::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace ft::fuzz
