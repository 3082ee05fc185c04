// `freetoken bench decode` and `bench prefill`: a model's forward passes against the bandwidth
// bound measured in the same run (bench_model.cpp).
#pragma once

#include "flags.h"

namespace ft::cli {

int bench_decode(const Args& args);
int bench_prefill(const Args& args);
int bench_gemm(const Args& args);

}  // namespace ft::cli
