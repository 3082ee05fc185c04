// Declarative command-line flags for `freetoken <command>`: each command lists its flags (name,
// value, default, help); the parser rejects unknown flags and missing values with exit code 2.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ft::cli {

struct Flag {
  std::string name;           // without the leading "--"
  std::string value_name;     // e.g. "DIR"; empty for a boolean switch
  std::string help;           // one line; say the unit and the default
  std::string default_value;  // used when the flag is absent (empty: no default)
  bool required = false;
};

class Args {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The flag's value, its default, or "".
  std::string get(const std::string& name) const;
  int get_int(const std::string& name) const;  // call only after validate(); exits 2 on bad ints
  double get_double(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Everything after a literal "--", verbatim (commands with Command::pass_through only).
  const std::vector<std::string>& pass_through() const { return pass_through_; }

 private:
  friend class Parser;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;
  std::vector<std::string> positional_;
  std::vector<std::string> pass_through_;
  std::string command_;
};

struct Command {
  std::string name;
  std::string summary;                // one line for `freetoken --help`
  std::string usage;                  // e.g. "freetoken logits --model DIR --tokens IDS --out FILE"
  std::vector<Flag> flags;
  int max_positional = 0;             // positional arguments allowed
  int (*run)(const Args& args) = nullptr;
  bool pass_through = false;          // "-- ARGS..." ends flag parsing; ARGS go to Args::pass_through()
};

// Parses argv for `command`; on --help prints help and returns exit 0 via `exit_code`; on a bad
// command line prints a one-line error and sets exit_code 2.
std::optional<Args> parse(const Command& command, const std::vector<std::string>& argv, int& exit_code);
std::string help_text(const Command& command);

// Prints "freetoken <cmd>: <message>" to stderr and returns 2 (usage error) or 1 (runtime error).
int usage_error(const std::string& command, const std::string& message);
// A flag's comma-separated list ("a,b,,c" -> a, b, c: empty items dropped).
std::vector<std::string> split_commas(const std::string& s);
int runtime_error(const std::string& command, const std::string& message);

}  // namespace ft::cli
