// The freetoken binary's command line: help, unknown commands and flags, exit codes.
#include <gtest/gtest.h>

#include "test_support.h"

namespace ft::test {
namespace {

TEST(Cli, HelpListsSubcommands) {
  auto r = run_freetoken({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* cmd : {"serve", "generate", "logits", "make-demo-model", "make-synthetic-model", "tokenize", "render", "bench", "device", "version"}) EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
}

TEST(Cli, NoArgumentsPrintsHelpAndFails) {
  auto r = run_freetoken({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("Commands:"), std::string::npos);
}

TEST(Cli, UnknownCommandExitsTwo) {
  auto r = run_freetoken({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(Cli, UnknownFlagExitsTwoWithClearError) {
  auto r = run_freetoken({"device", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --bogus"), std::string::npos) << r.err;
}

TEST(Cli, FlagMissingValueExitsTwo) {
  auto r = run_freetoken({"device", "--index"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs a value"), std::string::npos) << r.err;
}

TEST(Cli, BadIntegerExitsTwo) {
  auto r = run_freetoken({"device", "--index", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expects an integer"), std::string::npos) << r.err;
}

// --cpu-activations takes bf16x2 or bf16; anything else is a usage error naming it. (Without AMX
// both run the same kernels: the choice is the AMX products'.)
TEST(Cli, CpuActivationsTakesBf16x2OrBf16) {
  const std::string model = std::string(FT_FIXTURES_DIR) + "/gguf/models/qwen3_moe-mixed.gguf";
  const std::string out = testing::TempDir() + "cpu_activations_logits.safetensors";
  auto r = run_freetoken(
      {"logits", "--model", model, "--tokens", "1,2,3", "--out", out, "--device", "cpu", "--cpu-activations", "fp8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpu-activations must be bf16x2 or bf16, not fp8"), std::string::npos) << r.err;
  r = run_freetoken(
      {"logits", "--model", model, "--tokens", "1,2,3", "--out", out, "--device", "cpu", "--cpu-activations", "bf16"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Cli, SubcommandHelp) {
  auto r = run_freetoken({"device", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--index N"), std::string::npos);
}

TEST(Cli, DeviceReportsAvailabilityWithoutCrashing) {
  auto r = run_freetoken({"device"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("cuda: "), std::string::npos);
}

// `bench gemm` on one path: a line with that path's name and its rate; an unknown path is a usage
// error naming it.
TEST(Cli, BenchGemmRunsOnePathOrRefusesAnUnknownOne) {
  auto r = run_freetoken(
      {"bench", "gemm", "--isa", "avx512", "--tokens", "16", "--rows", "64", "--cols", "64", "--threads", "1"});
  if (r.exit_code == 1 && r.err.find("cannot run") != std::string::npos) GTEST_SKIP() << "no AVX-512 here";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("avx512 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TFLOP/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("amx"), std::string::npos) << r.out;  // the other paths did not run
  r = run_freetoken({"bench", "gemm", "--isa", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown --isa 'bogus'"), std::string::npos) << r.err;
}

// `bench share`: the CPU share timed at every expert count up to --k, with its fit; a --k past 32
// is a usage error.
TEST(Cli, BenchShareTimesTheCpuShareByItsExperts) {
  auto r = run_freetoken({"bench", "share", "--k", "2", "--gap-us", "10", "--seconds", "0.05", "--threads", "2",
                          "--hidden", "256", "--inter", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"a call by its experts", "its phases", " 1: ", " 2: ", "us an expert"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find(" 3: "), std::string::npos) << r.out;  // --k 2: counts 1 and 2 only
  r = run_freetoken({"bench", "share", "--k", "33"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--k 1..32"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ft::test
