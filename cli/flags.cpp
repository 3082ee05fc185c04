#include "flags.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ft::cli {

std::string Args::get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  return "";
}

int Args::get_int(const std::string& name) const {
  const std::string v = get(name);
  int out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size()) {
    std::exit(usage_error(command_, "--" + name + " expects an integer, got '" + v + "'"));
  }
  return out;
}

double Args::get_double(const std::string& name) const {
  const std::string v = get(name);
  char* end = nullptr;
  double out = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size()) {
    std::exit(usage_error(command_, "--" + name + " expects a number, got '" + v + "'"));
  }
  return out;
}

class Parser {
 public:
  static std::optional<Args> run(const Command& cmd, const std::vector<std::string>& argv, int& exit_code) {
    Args args;
    args.command_ = cmd.name;
    for (const Flag& f : cmd.flags)
      if (!f.default_value.empty()) args.defaults_[f.name] = f.default_value;
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a == "--" && cmd.pass_through) {
        args.pass_through_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
        break;
      }
      if (a == "--help" || a == "-h") {
        std::fputs(help_text(cmd).c_str(), stdout);
        exit_code = 0;
        return std::nullopt;
      }
      if (a.rfind("--", 0) != 0 || a == "--") {
        if (static_cast<int>(args.positional_.size()) >= cmd.max_positional) {
          exit_code = usage_error(cmd.name, "unexpected argument '" + a + "' (see --help)");
          return std::nullopt;
        }
        args.positional_.push_back(a);
        continue;
      }
      std::string name = a.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      const Flag* flag = nullptr;
      for (const Flag& f : cmd.flags)
        if (f.name == name) flag = &f;
      if (!flag) {
        exit_code = usage_error(cmd.name, "unknown flag --" + name + " (see freetoken " + cmd.name + " --help)");
        return std::nullopt;
      }
      if (flag->value_name.empty()) {
        if (inline_value) {
          exit_code = usage_error(cmd.name, "--" + name + " takes no value");
          return std::nullopt;
        }
        args.values_[name] = "1";
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argv.size()) {
          exit_code = usage_error(cmd.name, "--" + name + " needs a value " + flag->value_name);
          return std::nullopt;
        }
        value = argv[++i];
      }
      args.values_[name] = value;
    }
    for (const Flag& f : cmd.flags) {
      if (f.required && !args.has(f.name)) {
        exit_code = usage_error(cmd.name, "missing required flag --" + f.name + " " + f.value_name);
        return std::nullopt;
      }
    }
    exit_code = 0;
    return args;
  }
};

std::optional<Args> parse(const Command& command, const std::vector<std::string>& argv, int& exit_code) {
  return Parser::run(command, argv, exit_code);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string help_text(const Command& cmd) {
  std::ostringstream os;
  os << cmd.summary << "\n\nUsage: " << cmd.usage << "\n";
  if (!cmd.flags.empty()) os << "\nFlags:\n";
  for (const Flag& f : cmd.flags) {
    std::string left = "  --" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    else left += "  ";
    os << left << f.help;
    if (f.required) os << " (required)";
    if (!f.default_value.empty()) os << " [default: " << f.default_value << "]";
    os << "\n";
  }
  os << "  --help                    show this help\n";
  return os.str();
}

int usage_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "freetoken %s: %s\n", command.c_str(), message.c_str());
  return 2;
}

int runtime_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "freetoken %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

}  // namespace ft::cli
