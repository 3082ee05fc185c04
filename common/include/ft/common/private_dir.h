// Directories only their owner can enter: the checkpoint store and request captures hold KV state
// and prompts (state can be turned back into the text it came from), so other local users must
// not read them whatever the umask.
#pragma once

#include <filesystem>

#include "ft/common/result.h"

namespace ft {

// Creates `dir` (and its parents, with the umask's modes) if missing and makes `dir` itself mode
// 0700. Refused (kUnavailable, saying why): `dir` is a symbolic link, not a directory, or owned by
// another user — a directory someone else prepared (e.g. in /tmp) is not ours to write into.
Status make_private_dir(const std::filesystem::path& dir);

}  // namespace ft
