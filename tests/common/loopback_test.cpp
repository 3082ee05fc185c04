// Addresses and Host headers that name this machine's loopback.
#include <gtest/gtest.h>

#include "ft/common/loopback.h"

namespace ft {
namespace {

TEST(LoopbackHost, LoopbackNamesWithAndWithoutPorts) {
  for (const char* h : {"127.0.0.1", "127.0.0.1:1919", "localhost", "LOCALHOST:80", "[::1]:1919", "::1", "127.1.2.3"})
    EXPECT_TRUE(loopback_host(h)) << h;
  for (const char* h : {"evil.example", "localhost.evil.example", "10.0.0.1:1919", "[2001:db8::1]:80", "", "0.0.0.0"})
    EXPECT_FALSE(loopback_host(h)) << h;
}

}  // namespace
}  // namespace ft
