// A main() for a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once on every input
// named on the command line: files, directories (every file inside) and corpus packs (*.pack, see
// below). The unit suite replays each target's committed seeds and corpus this way on every
// build, so what a fuzzing run found stays fixed; a target aborts on a violated invariant, which
// fails the test.
//
// A corpus pack holds a whole corpus in one file (thousands of small inputs would otherwise be
// thousands of files in the repository): "FTFUZZ1\n", then per input a u32 little-endian length
// and the bytes. scripts/fuzz.sh makes and opens them through this program:
//   ft_replay_<target> --pack OUT.pack DIR...    every file of the directories, sorted, once each
//   ft_replay_<target> --unpack PACK DIR         one file per input
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Optional, as in libFuzzer: a target's one-time setup.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;
constexpr char kPackMagic[] = "FTFUZZ1\n";
constexpr std::size_t kMagicBytes = sizeof kPackMagic - 1;

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool is_pack(const fs::path& p) { return p.extension() == ".pack"; }

// The inputs of a pack; false when it is malformed.
bool read_pack(const fs::path& pack, std::vector<std::string>& out) {
  const std::string bytes = read_all(pack);
  if (bytes.compare(0, kMagicBytes, kPackMagic) != 0) return false;
  for (std::size_t at = kMagicBytes; at < bytes.size();) {
    if (bytes.size() - at < 4) return false;
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= std::uint32_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    at += 4;
    if (bytes.size() - at < n) return false;
    out.push_back(bytes.substr(at, n));
    at += n;
  }
  return true;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

int pack(const fs::path& out, const std::vector<fs::path>& dirs) {
  std::set<std::string> inputs;  // sorted and without duplicates: a pack changes only with its content
  for (const fs::path& d : dirs)
    for (const fs::path& f : files_in(d)) inputs.insert(read_all(f));
  std::ofstream o(out, std::ios::binary | std::ios::trunc);
  o.write(kPackMagic, kMagicBytes);
  for (const std::string& s : inputs) {
    const auto n = static_cast<std::uint32_t>(s.size());
    const char len[4] = {char(n & 0xff), char((n >> 8) & 0xff), char((n >> 16) & 0xff), char(n >> 24)};
    o.write(len, 4);
    o.write(s.data(), std::streamsize(s.size()));
  }
  std::printf("pack: %zu inputs -> %s\n", inputs.size(), out.c_str());
  return o.good() ? 0 : 1;
}

int unpack(const fs::path& pack_file, const fs::path& dir) {
  std::vector<std::string> inputs;
  if (!read_pack(pack_file, inputs)) {
    std::fprintf(stderr, "unpack: %s is not a corpus pack\n", pack_file.c_str());
    return 1;
  }
  fs::create_directories(dir);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "packed-%06zu", i);
    std::ofstream(dir / name, std::ios::binary).write(inputs[i].data(), std::streamsize(inputs[i].size()));
  }
  return 0;
}

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--pack") == 0)
    return pack(argv[2], std::vector<fs::path>(argv + 3, argv + argc));
  if (argc == 4 && std::strcmp(argv[1], "--unpack") == 0) return unpack(argv[2], argv[3]);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (!fs::exists(p)) {
      std::fprintf(stderr, "replay: %s does not exist\n", p.c_str());
      return 1;
    }
    if (fs::is_directory(p)) {
      for (const fs::path& f : files_in(p)) run(read_all(f)), ++count;
    } else if (is_pack(p)) {
      std::vector<std::string> inputs;
      if (!read_pack(p, inputs)) {
        std::fprintf(stderr, "replay: %s is not a corpus pack\n", p.c_str());
        return 1;
      }
      for (const std::string& s : inputs) run(s), ++count;
    } else {
      run(read_all(p)), ++count;
    }
  }
  if (count == 0) {
    std::fprintf(stderr, "replay: no inputs (give files, directories or corpus packs)\n");
    return 1;
  }
  std::printf("replay: %zu inputs, no failure\n", count);
  return 0;
}
