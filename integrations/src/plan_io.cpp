#include "ft/integrations/plan_io.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ft::integrations {
namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string describe_plan(const LaunchPlan& plan, const fs::path& program) {
  // The here-document delimiter; no generated file has it as a line.
  const std::string eof = "FREETOKEN_EOF";
  std::ostringstream os;
  for (const FileToWrite& f : plan.files) {
    os << "mkdir -p " << shell_quote(f.path.parent_path().string()) << "\n"
       << "cat > " << shell_quote(f.path.string()) << " <<'" << eof << "'\n"
       << f.content << (f.content.empty() || f.content.back() == '\n' ? "" : "\n") << eof << "\n";
  }
  for (const EnvVar& v : plan.set_env) os << "export " << v.name << "=" << shell_quote(v.value) << "\n";
  for (const std::string& name : plan.unset_env) os << "unset " << name << "\n";
  os << "exec " << shell_quote(program.string());
  for (size_t i = 1; i < plan.argv.size(); ++i) os << " " << shell_quote(plan.argv[i]);
  os << "\n";
  return os.str();
}

Status write_plan_files(const LaunchPlan& plan) {
  for (const FileToWrite& f : plan.files) {
    std::error_code ec;
    fs::create_directories(f.path.parent_path(), ec);
    if (ec) return io_error("creating " + f.path.parent_path().string() + ": " + ec.message());
    const fs::path tmp = f.path.string() + ".tmp." + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) return io_error("cannot write " + tmp.string());
      fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, ec);
      out << f.content;
      if (!out.flush()) return io_error("writing " + tmp.string() + " failed");
    }
    fs::rename(tmp, f.path, ec);
    if (ec) {
      fs::remove(tmp, ec);
      return io_error("replacing " + f.path.string() + ": " + ec.message());
    }
  }
  return {};
}

void apply_plan_env(const LaunchPlan& plan) {
  for (const EnvVar& v : plan.set_env) setenv(v.name.c_str(), v.value.c_str(), 1);
  for (const std::string& name : plan.unset_env) unsetenv(name.c_str());
}

}  // namespace ft::integrations
