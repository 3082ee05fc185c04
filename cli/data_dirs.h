// Where freetoken keeps its data by default, in one place so every command agrees on it.
#pragma once

#include <filesystem>

namespace ft::cli {

// $XDG_DATA_HOME/freetoken, else ~/.local/share/freetoken (XDG base-directory spec; without HOME
// the home directory the user database gives), else <temp dir>/freetoken-<uid>.
std::filesystem::path freetoken_data_dir();

// The checkpoint store (a RocksDB directory): freetoken_data_dir()/store.
std::filesystem::path default_store_dir();

}  // namespace ft::cli
