#include "commands.h"

namespace ft::cli {

const std::vector<const Command*>& all_commands() {
  static const std::vector<const Command*> kCommands = {
      &kServeCommand,          &kEngineCommand,   &kProxyCommand,  &kGenerateCommand, &kLogitsCommand, &kMakeDemoModelCommand,
      &kMakeSyntheticModelCommand, &kTokenizeCommand,       &kRenderCommand,   &kBenchCommand,  &kDeviceCommand,
      &kCtlCommand,            &kLaunchCommand,   &kModelsCommand,   &kVersionCommand,
  };
  return kCommands;
}

}  // namespace ft::cli
