// Shared by the gpu suite: skip a test, saying why, where no GPU is usable.
#pragma once

#include <gtest/gtest.h>

#include "ft/engine/device.h"

#define FT_REQUIRE_GPU()                                                           \
  do {                                                                             \
    auto ft_dev_ = ::ft::engine::query_cuda_device();                              \
    if (!ft_dev_) GTEST_SKIP() << "no GPU: " << ft_dev_.status().message();        \
  } while (0)
