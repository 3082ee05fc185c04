// Showing and carrying out a LaunchPlan (launch_plan.h): the side-effecting half of
// `freetoken launch`, kept apart so the plans themselves stay pure.
#pragma once

#include <filesystem>
#include <string>

#include "ft/common/result.h"
#include "ft/integrations/launch_plan.h"

namespace ft::integrations {

// The plan as a POSIX shell script that does exactly what launching would: mkdir + a quoted
// here-document per file, `export`/`unset` per variable, then `exec program argv[1..]`. This is
// what --dry-run prints.
std::string describe_plan(const LaunchPlan& plan, const std::filesystem::path& program);

// Writes every file of the plan (parents created; owner-only permissions, since files may hold the
// API key), each through a temporary file and a rename so a running agent never reads half a file.
Status write_plan_files(const LaunchPlan& plan);

// Sets and unsets the plan's variables in this process's environment (inherited by an exec).
void apply_plan_env(const LaunchPlan& plan);

// `s` in single quotes for a POSIX shell.
std::string shell_quote(const std::string& s);

}  // namespace ft::integrations
