#include "commands.h"

namespace ft::cli {

const std::vector<const Command*>& all_commands() {
  static const std::vector<const Command*> kCommands = {
      &kBenchCommand,
      &kDeviceCommand,
      &kRenderCommand,
      &kVersionCommand,
      &kLogitsCommand,
      &kGenerateCommand,
      &kMakeDemoModelCommand,
      &kServeCommand,
      &kTokenizeCommand,
  };
  return kCommands;
}

}  // namespace ft::cli
