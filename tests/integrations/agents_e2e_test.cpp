// The real agents (Claude Code, OpenCode, OpenClaw, Codex; npm-installed by scripts/setup.sh), each
// run headless through `freetoken launch <agent> -- <args>` against `freetoken serve` on the demo
// model over loopback. Each run must exit 0, and text the model streamed (recorded by serve
// --capture) must reach the agent's output. The demo model's output is noise, so the check is a
// whitespace-normalised substring, not an expected answer.
//
// Every agent gets a fresh HOME and XDG directories under a temp dir, so nothing here reads or
// writes the user's own agent state; every run has a deadline after which its process group dies.
// With the environment `freetoken launch` sets (and OpenCode's plugin install pre-empted, see
// launch()), `strace -f -e trace=connect` shows the agents connecting to nothing but the server.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "ft/integrations/agent_install.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const fs::path kNpmPrefix = fs::path(FT_SOURCE_DIR) / "scripts/npm";
constexpr const char* kModel = "freetoken-demo";
// Output tokens per request, both the agents' own limit and serve's cap. The demo model as made
// would never end a turn by itself (2 end tokens in a 151936 vocabulary), and Claude Code treats
// a turn cut at max_tokens as an error (so does Codex); so the test's copy of it also ends a turn
// on every 32nd token id (about 32 tokens per answer). Then ~2% of the answers still reach this
// cap and ~3% are empty; expect_round_trip runs an agent up to three times for either (the
// sampling seed differs per request), so a test fails by bad luck ~1 time in 10,000.
constexpr int kOutputCap = 128;
constexpr int kEndTokenStride = 32;
constexpr int kAttempts = 3;

// Whether an agent's output says its turn was cut at the output cap (the noise model's bad luck,
// not a fault of the server).
bool cut_at_output_cap(const std::string& out, const std::string& err) {
  for (const char* s : {"max_output_tokens", "max_tokens", "output token maximum"})
    if (out.find(s) != std::string::npos || err.find(s) != std::string::npos) return true;
  return false;
}

// ---- small process and HTTP helpers ------------------------------------------------------------

// Whether GET /health on loopback:port answers 200 (plain HTTP/1.0 over a socket).
bool healthy(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[64] = {};
      ok = read(fd, buf, sizeof buf - 1) > 12 && std::string(buf).find(" 200 ") != std::string::npos;
    }
  }
  close(fd);
  return ok;
}

// This process's environment with `overrides` ("NAME=value") replacing or adding variables.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('=') + 1);
    bool replaced = false;
    for (const std::string& o : overrides) replaced = replaced || o.rfind(name, 0) == 0;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

// A child in its own process group with stdout/stderr in files; killed (the whole group) when
// destroyed, so an agent's helpers never outlive the test.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env_overrides, const fs::path& cwd,
        const fs::path& out, const fs::path& err) {
    // Everything the child needs is built before fork: after it, only exec-safe calls.
    std::vector<std::string> env = environment_with(env_overrides);
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ != 0) return;
    setpgid(0, 0);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    const int in = open("/dev/null", O_RDONLY);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  ~Child() { kill_group(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The exit code, or nullopt when the deadline passed first (the group is then killed).
  std::optional<int> wait_for(std::chrono::seconds deadline) {
    const auto end = Clock::now() + deadline;
    while (Clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        kill_group();  // helpers the agent left behind
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill_group();
    return std::nullopt;
  }
  bool running() {
    int status = 0;
    return !reaped_ && waitpid(pid_, &status, WNOHANG) == 0;
  }
  void terminate(std::chrono::seconds grace) {
    if (reaped_) return;
    kill(-pid_, SIGTERM);
    wait_for(grace);
  }

 private:
  void kill_group() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    if (!reaped_) {
      waitpid(pid_, nullptr, 0);
      reaped_ = true;
    }
  }
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// ---- comparing what the model streamed with what the agent printed -----------------------------

std::string normalise_space(const std::string& s) {
  std::string out;
  bool space = false;
  for (unsigned char c : s) {
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(c);
  }
  return out;
}

void collect_strings(const json& j, std::string& out) {
  if (j.is_string()) {
    out += j.get<std::string>();
    out += '\n';
  } else if (j.is_structured()) {
    for (const json& v : j) collect_strings(v, out);
  }
}

// The agent's output as text: every string inside its JSON output (whole or line by line), and the
// raw bytes, so that escaped and unescaped text both match.
std::string agent_text(const std::string& stdout_text) {
  std::string out = stdout_text + "\n";
  if (auto whole = json::parse(stdout_text, nullptr, false); !whole.is_discarded()) collect_strings(whole, out);
  std::stringstream lines(stdout_text);
  for (std::string line; std::getline(lines, line);)
    if (auto j = json::parse(line, nullptr, false); !j.is_discarded()) collect_strings(j, out);
  return normalise_space(out);
}

struct Capture {
  std::string name, path, response_text, model;  // model: what the request asked for
  int status = 0;
  std::string scope;  // the X-FreeToken-Scope header it carried, "" without one
};

std::vector<Capture> read_captures(const fs::path& dir) {
  std::vector<Capture> out;
  if (!fs::exists(dir)) return out;
  std::set<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path());
  for (const fs::path& f : files) {
    auto j = json::parse(read_file(f), nullptr, false);
    if (j.is_discarded()) continue;
    std::string model, scope;
    if (j.contains("request") && j["request"].is_object()) model = j["request"].value("model", "");
    if (j.contains("headers") && j["headers"].is_object())
      for (const auto& [name, value] : j["headers"].items())
        if (strcasecmp(name.c_str(), "X-FreeToken-Scope") == 0 && value.is_string()) scope = value.get<std::string>();
    out.push_back(
        {f.filename().string(), j.value("path", ""), j.value("response_text", ""), model, j.value("status", 0), scope});
  }
  return out;
}

// The answer text of a capture, whitespace-normalised, if the agent's output contains it (or, for a
// long answer, a 48-character stretch of it: an agent may trim or wrap the ends).
bool output_contains(const std::string& normalised_output, const std::string& response_text) {
  const std::string want = normalise_space(response_text);
  if (want.empty()) return false;
  if (normalised_output.find(want) != std::string::npos) return true;
  constexpr size_t kWindow = 48;
  for (size_t i = 0; want.size() > kWindow && i + kWindow <= want.size(); ++i)
    if (normalised_output.find(want.substr(i, kWindow)) != std::string::npos) return true;
  return false;
}

// ---- the fixture: one server per test process, one temp home per agent run ---------------------

struct AgentRun {
  std::optional<int> exit_code;  // nullopt: killed at the deadline
  std::string out, err;
  double seconds = 0;
};

class AgentsE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (integrations::bundled_node_bin_dir(kNpmPrefix).empty()) return;  // each test skips, saying why
    root_ = std::make_unique<TempDir>();
    fs::create_directories(root_->path() / "xdg-data");
    port_ = unused_loopback_port();
    const fs::path model = root_->path() / "model";
    // The demo model in the test's own directory, so the user's data dir is left alone.
    auto made = run_freetoken({"make-demo-model", model.string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    json gen = json::parse(read_file(model / "generation_config.json"));
    json eos = gen["eos_token_id"].is_array() ? gen["eos_token_id"] : json::array({gen["eos_token_id"]});
    for (int id = 7; id < 151643; id += kEndTokenStride) eos.push_back(id);
    gen["eos_token_id"] = eos;
    std::ofstream(model / "generation_config.json") << gen.dump();
    server_ = std::make_unique<Child>(
        std::vector<std::string>{freetoken_binary(), "serve", "--model", model.string(), "--model-name", kModel,
                                 "--port", std::to_string(port_), "--max-output-tokens", std::to_string(kOutputCap),
                                 "--no-store", "--capture", (root_->path() / "capture").string()},
        std::vector<std::string>{"XDG_DATA_HOME=" + (root_->path() / "xdg-data").string()}, root_->path(),
        root_->path() / "serve.out", root_->path() / "serve.err");
    const auto end = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < end && server_->running() && !healthy(port_))
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server_up_ = healthy(port_);
  }
  static void TearDownTestSuite() {
    if (server_) server_->terminate(std::chrono::seconds(10));
    server_.reset();
    root_.reset();
  }

  void SetUp() override {
    if (!root_) GTEST_SKIP() << "Node 24 is not installed under " << kNpmPrefix << " (run scripts/setup.sh)";
    ASSERT_TRUE(server_up_) << "freetoken serve did not come up on port " << port_ << ":\n"
                            << read_file(root_->path() / "serve.err");
  }

  // `freetoken launch <agent> ... -- <args>` with a fresh HOME and XDG dirs and a work directory
  // holding one small file.
  AgentRun launch(const std::string& agent, const std::vector<std::string>& agent_args, int deadline_s) {
    // No --model: launch asks the server which model it serves. Each agent gets a sharing scope
    // of its own, which every request it sends must carry (expect_round_trip).
    std::vector<std::string> argv = {
        freetoken_binary(),         "launch",  agent,          "--port", std::to_string(port_), "--max-output-tokens",
        std::to_string(kOutputCap), "--scope", "e2e-" + agent, "--"};
    argv.insert(argv.end(), agent_args.begin(), agent_args.end());
    return run_agent(agent, argv, {}, deadline_s);
  }

  // `argv` with a fresh HOME and XDG dirs (under `name`) and a work directory holding one small
  // file, plus `env` on top of this process's environment.
  AgentRun run_agent(const std::string& name, const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, int deadline_s) {
    const fs::path run = root_->path() / name;
    for (const char* d : {"home", "xdg-data", "xdg-config", "xdg-cache", "xdg-state", "work"})
      fs::create_directories(run / d);
    std::ofstream(run / "work/notes.txt") << "FreeToken end-to-end test workspace.\n";
    // OpenCode's first start in a config dir runs `npm install @opencode-ai/plugin` there (for
    // user plugins). The fresh XDG_CONFIG_HOME is marked as done so that it stays off the network.
    const fs::path oc = run / "xdg-config/opencode";
    fs::create_directories(oc / "node_modules");
    std::ofstream(oc / "package.json") << R"({"dependencies":{"@opencode-ai/plugin":"*"}})";
    std::ofstream(oc / "package-lock.json") << R"({"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}})";
    std::vector<std::string> env = {
        "HOME=" + (run / "home").string(),
        "XDG_DATA_HOME=" + (run / "xdg-data").string(),
        "XDG_CONFIG_HOME=" + (run / "xdg-config").string(),
        "XDG_CACHE_HOME=" + (run / "xdg-cache").string(),
        "XDG_STATE_HOME=" + (run / "xdg-state").string(),
        "NO_COLOR=1",
        // Loopback needs no proxy; an inherited one must not see the traffic.
        "NO_PROXY=127.0.0.1,localhost",
        "no_proxy=127.0.0.1,localhost",
    };
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    const auto start = Clock::now();
    Child child(argv, env, run / "work", run / "out", run / "err");
    AgentRun r;
    r.exit_code = child.wait_for(std::chrono::seconds(deadline_s));
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.out = read_file(run / "out");
    r.err = read_file(run / "err");
    return r;
  }

  // run_agent, repeated (kAttempts in all) while the agent fails on an answer cut at the cap.
  AgentRun run_agent_past_bad_luck(const std::string& name, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& extra_env, int deadline_s) {
    for (int attempt = 1;; ++attempt) {
      AgentRun r = run_agent(name, argv, extra_env, deadline_s);
      if (attempt == kAttempts || !r.exit_code || *r.exit_code == 0 || !cut_at_output_cap(r.out, r.err)) return r;
      std::printf("[ agent    ] %s: the answer reached the output cap; running once more\n", name.c_str());
    }
  }

  std::size_t captures_so_far() { return read_captures(root_->path() / "capture").size(); }
  // The exchanges captured after the first `before` (what one agent run sent).
  std::vector<Capture> captures_since(std::size_t before) {
    std::vector<Capture> all = read_captures(root_->path() / "capture");
    all.erase(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(before, all.size())));
    return all;
  }

  // An agent set up by hand with only a base URL (no launch): it ended, exit 0, every chat
  // completion it sent after `before` asked for `model` and was answered, and at least one was.
  void expect_served_as_asked(const std::string& agent, const AgentRun& r, std::size_t before,
                              const std::string& model) {
    ASSERT_TRUE(r.exit_code) << agent << " ran past its deadline\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
    int answered = 0;
    for (const Capture& c : captures_since(before)) {
      if (c.path != "/v1/chat/completions") continue;
      EXPECT_EQ(c.model, model);
      EXPECT_EQ(c.status, 200) << "a request for model '" << c.model << "' was refused (" << c.name << ")";
      answered += c.status == 200;
    }
    std::printf("[ agent    ] %s (base URL in its own config): exit %d, %d requests answered\n", agent.c_str(),
                *r.exit_code, answered);
    ASSERT_GT(answered, 0) << "no /v1/chat/completions request was answered\nstdout:\n" << r.out << "\nstderr:\n"
                           << r.err;
    EXPECT_EQ(*r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  }

  // Runs one agent and checks: exit 0, at least one successful exchange on `api_path`, and the
  // text of one of them in the agent's output. A noise model may end an answer at its first token;
  // when an empty answer leaves nothing to find, the run is repeated once.
  void expect_round_trip(const std::string& agent, const std::vector<std::string>& args, int deadline_s,
                         const std::string& api_path) {
    if (auto program = integrations::find_agent_program(*integrations::parse_agent(agent), kNpmPrefix, ""); !program)
      GTEST_SKIP() << program.status().message();
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
      const size_t before = captures_so_far();
      AgentRun r = launch(agent, args, deadline_s);
      std::printf("[ agent    ] %s: %.1f s, exit %s\n", agent.c_str(), r.seconds,
                  r.exit_code ? std::to_string(*r.exit_code).c_str() : "none (killed at the deadline)");
      std::fflush(stdout);
      ASSERT_TRUE(r.exit_code) << agent << " ran past " << deadline_s << " s\nstdout:\n"
                               << r.out << "\nstderr:\n" << r.err;
      if (*r.exit_code != 0 && attempt < kAttempts && cut_at_output_cap(r.out, r.err)) {
        std::printf("[ agent    ] %s: the answer reached the output cap; running once more\n", agent.c_str());
        continue;
      }
      ASSERT_EQ(*r.exit_code, 0) << agent << " failed\nstdout:\n" << r.out << "\nstderr:\n" << r.err;

      const std::vector<Capture> all = captures_since(before);
      const std::string output = agent_text(r.out);
      int answered = 0;
      bool found = false, empty_answer = false;
      std::string seen;
      for (const Capture& c : all) {
        seen += "  " + c.name + " " + c.path + " " + std::to_string(c.status) + " " + json(c.response_text).dump() + "\n";
        if (c.path.rfind(api_path, 0) != 0 || c.status != 200) continue;
        EXPECT_EQ(c.scope, "e2e-" + agent) << "a request without the scope `launch --scope` set (" << c.name << ")";
        ++answered;
        empty_answer = empty_answer || normalise_space(c.response_text).empty();
        found = found || output_contains(output, c.response_text);
      }
      ASSERT_GT(answered, 0) << agent << " made no successful " << api_path << " request; captured:\n" << seen;
      if (found) return;
      if (attempt < kAttempts && empty_answer) {
        std::printf("[ agent    ] %s: the model gave an empty answer; running once more\n", agent.c_str());
        continue;
      }
      FAIL() << "no streamed text reached " << agent << "'s output\ncaptured:\n"
             << seen << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
    }
  }

  static inline std::unique_ptr<TempDir> root_;
  static inline std::unique_ptr<Child> server_;
  static inline int port_ = 0;
  static inline bool server_up_ = false;
};

TEST_F(AgentsE2E, ClaudeCodePrint) {
  expect_round_trip("claude", {"-p", "Say hello in five words.", "--output-format", "json", "--allowedTools", "Read"},
                    240, "/v1/messages");
}

// Claude Code as a user sets it up by hand: its base URL and a key, no model variables, no
// `freetoken launch`. It asks for its own model names: its default (an opus/sonnet name) and, run
// with its `haiku` alias, the haiku name it uses for side calls and sub-agents (a one-shot `-p`
// turn against a model that never calls tools makes no side call by itself). The server serves
// every one of them (no 404) and the answer reaches the output. The other variables only keep it
// off the network in this sandbox and within the test's output cap.
TEST_F(AgentsE2E, ClaudeCodeWithOnlyABaseUrlAndKey) {
  auto program = integrations::find_agent_program(integrations::Agent::kClaudeCode, kNpmPrefix, "");
  if (!program) GTEST_SKIP() << program.status().message();
  std::set<std::string> models;
  for (const std::vector<std::string>& model_flag : {std::vector<std::string>{}, {"--model", "haiku"}}) {
    const std::size_t before = captures_so_far();
    std::vector<std::string> argv = {program->string(), "-p", "Say hello in five words.", "--output-format", "json"};
    argv.insert(argv.end(), model_flag.begin(), model_flag.end());
    AgentRun r = run_agent_past_bad_luck(
        "claude-direct", argv,
        {"ANTHROPIC_BASE_URL=http://127.0.0.1:" + std::to_string(port_), "ANTHROPIC_API_KEY=any-key",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=" + std::to_string(kOutputCap)},
        240);
    ASSERT_TRUE(r.exit_code) << "claude ran past its deadline\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
    int answered = 0;
    for (const Capture& c : captures_since(before)) {
      if (c.path.rfind("/v1/messages", 0) != 0 || c.path.rfind("/v1/messages/count_tokens", 0) == 0) continue;
      models.insert(c.model);
      EXPECT_EQ(c.status, 200) << "a request for model '" << c.model << "' was refused (" << c.name << ")";
      answered += c.status == 200;
    }
    ASSERT_GT(answered, 0) << "no /v1/messages request was answered\nstderr:\n" << r.err;
    EXPECT_EQ(*r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  }
  std::string names;
  for (const std::string& m : models) names += " " + m;
  std::printf("[ agent    ] claude (base URL only): models asked for and served:%s\n", names.c_str());
  for (const std::string& m : models) EXPECT_NE(m, kModel) << "Claude Code was not left to its own model names";
  EXPECT_TRUE(std::any_of(models.begin(), models.end(),
                          [](const std::string& m) { return m.find("haiku") != std::string::npos; }))
      << "no request named a haiku model:" << names;
}

// OpenCode as its documentation sets up a local OpenAI-compatible server: a provider with a base
// URL in the user's own global config, a model name of the user's choosing — no `launch`, no
// OPENCODE_CONFIG. The server serves that name and the answer reaches the output.
TEST_F(AgentsE2E, OpenCodeWithOnlyABaseUrlInItsOwnConfig) {
  auto program = integrations::find_agent_program(integrations::Agent::kOpenCode, kNpmPrefix, "");
  if (!program) GTEST_SKIP() << program.status().message();
  const fs::path config_dir = root_->path() / "opencode-direct" / "xdg-config" / "opencode";
  fs::create_directories(config_dir);
  std::ofstream(config_dir / "opencode.json") << R"({
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "local": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "My local server",
      "options": {"baseURL": "http://127.0.0.1:)" + std::to_string(port_) + R"(/v1", "apiKey": "any-key"},
      "models": {"qwen3-coder-local": {}}
    }
  },
  "model": "local/qwen3-coder-local"
})";
  const std::size_t before = captures_so_far();
  const AgentRun r = run_agent_past_bad_luck("opencode-direct",
                                             {program->string(), "run", "--format", "json", "Say hello in five words."},
                                             {"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1"}, 240);
  expect_served_as_asked("opencode", r, before, "qwen3-coder-local");
}

TEST_F(AgentsE2E, OpenCodeRun) {
  expect_round_trip("opencode", {"run", "--format", "json", "Say hello in five words."}, 240, "/v1/chat/completions");
}

// OpenClaw as a user points it at a local server: a provider with a base URL and key in its own
// ~/.openclaw/openclaw.json, a model id of the user's choosing — no `launch`, no config variables.
TEST_F(AgentsE2E, OpenClawWithOnlyABaseUrlInItsOwnConfig) {
  auto program = integrations::find_agent_program(integrations::Agent::kOpenClaw, kNpmPrefix, "");
  if (!program) GTEST_SKIP() << program.status().message();
  const fs::path config_dir = root_->path() / "openclaw-direct" / "home" / ".openclaw";
  fs::create_directories(config_dir);
  std::ofstream(config_dir / "openclaw.json") << R"({
  "models": {"providers": {"local": {
    "baseUrl": "http://127.0.0.1:)" + std::to_string(port_) + R"(/v1", "apiKey": "any-key",
    "api": "openai-completions",
    "models": [{"id": "my-local-model", "name": "My local model"}]
  }}},
  "agents": {"defaults": {"model": {"primary": "local/my-local-model"}}}
})";
  // OpenClaw itself needs Node 24 (node:sqlite): the one setup.sh installs, first on PATH.
  const fs::path node = integrations::bundled_node_bin_dir(kNpmPrefix);
  if (node.empty()) GTEST_SKIP() << "no Node 24 under " << kNpmPrefix << " (scripts/setup.sh installs it)";
  const char* path = std::getenv("PATH");
  const std::size_t before = captures_so_far();
  const AgentRun r = run_agent_past_bad_luck("openclaw-direct",
                                             {program->string(), "agent", "--local", "--session-id", "ft-direct",
                                              "--message", "Say hello in five words.", "--json", "--timeout", "300"},
                                             {"PATH=" + node.string() + ":" + (path ? path : "/usr/bin:/bin")}, 360);
  expect_served_as_asked("openclaw", r, before, "my-local-model");
}

TEST_F(AgentsE2E, OpenClawLocalAgent) {
  expect_round_trip("openclaw",
                    {"agent", "--local", "--session-id", "ft-e2e", "--message", "Say hello in five words.", "--json",
                     "--timeout", "300"},
                    360, "/v1/chat/completions");
}

TEST_F(AgentsE2E, CodexExec) {
  expect_round_trip("codex", {"exec", "--json", "--skip-git-repo-check", "Say hello in five words."}, 240,
                    "/v1/responses");
}

}  // namespace
}  // namespace ft::test
