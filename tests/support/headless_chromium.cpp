#include "headless_chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "test_support.h"

namespace ft::test {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;  // '=' and anything else
  };
  std::string out;
  unsigned bits = 0;
  int held = 0;
  for (const char c : text) {
    const int v = value(c);
    if (v < 0) continue;
    bits = (bits << 6) | unsigned(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out += char((bits >> held) & 0xff);
    }
  }
  return out;
}

// The text of a console call's arguments, as DevTools would print them.
std::string console_text(const json& args) {
  std::string text;
  for (const json& a : args) {
    if (!text.empty()) text += ' ';
    if (a.contains("value")) text += a["value"].is_string() ? a["value"].get<std::string>() : a["value"].dump();
    else text += a.value("description", a.value("type", "?"));
  }
  return text;
}

}  // namespace

std::string chromium_binary() {
  if (const char* env = std::getenv("FT_CHROMIUM"); env && *env) return access(env, X_OK) == 0 ? env : "";
  return access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : "";
}

std::unique_ptr<HeadlessChromium> HeadlessChromium::start(const std::filesystem::path& work_dir, std::string* error) {
  const std::string binary = chromium_binary();
  if (binary.empty()) {
    *error = "Chromium is not installed (scripts/setup.sh installs Debian's chromium)";
    return nullptr;
  }
  std::filesystem::create_directories(work_dir);
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    *error = "socketpair failed";
    return nullptr;
  }
  const std::string profile = (work_dir / "profile").string(), log = (work_dir / "chromium.log").string();
  std::vector<std::string> args = {
      binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      "--remote-debugging-pipe", "--user-data-dir=" + profile, "--disk-cache-dir=" + (work_dir / "cache").string(),
      "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--disable-default-apps", "--disable-extensions", "--disable-breakpad", "--mute-audio",
      "--window-size=1280,1000",
      // Offline whatever the page does: a request to any other host fails (and is still recorded).
      "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost", "about:blank"};
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own group: the renderers and helpers it starts go with it
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    // Above 4 first, so neither dup2 below is handed the descriptor it copies from.
    const int pipe_end = fcntl(sockets[1], F_DUPFD_CLOEXEC, 10);
    if (out < 0 || in < 0 || pipe_end < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
        dup2(pipe_end, 3) < 0 || dup2(pipe_end, 4) < 0)
      _exit(126);
    setenv("XDG_CONFIG_HOME", work_dir.c_str(), 1);
    setenv("XDG_CACHE_HOME", work_dir.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(sockets[1]);
  if (pid < 0) {
    close(sockets[0]);
    *error = "fork failed";
    return nullptr;
  }
  std::unique_ptr<HeadlessChromium> browser(new HeadlessChromium(pid, sockets[0]));  // private constructor
  const json version = browser->call("Browser.getVersion", json::object(), false);
  if (!version.contains("product")) {
    *error = "Chromium did not answer on its DevTools pipe; its log (" + log + "):\n" + read_file(log);
    return nullptr;
  }
  return browser;
}

HeadlessChromium::~HeadlessChromium() {
  const std::string close_message = json{{"id", ++next_id_}, {"method", "Browser.close"}}.dump() + '\0';
  send(fd_, close_message.data(), close_message.size(), MSG_NOSIGNAL);
  close(fd_);  // its pipe closing ends it too
  siginfo_t info{};
  for (int i = 0; i < 100; ++i) {  // up to 10 s; WNOWAIT keeps its pid (and group id) ours until reaped
    info.si_pid = 0;
    if (waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-pid_, SIGKILL);  // whatever is left of its group
  waitpid(pid_, nullptr, 0);
}

bool HeadlessChromium::open(const std::string& url) {
  const json target = call("Target.createTarget", {{"url", "about:blank"}}, false);
  if (!target.contains("targetId")) return false;
  const json attached = call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}}, false);
  if (!attached.contains("sessionId")) return false;
  session_ = attached["sessionId"].get<std::string>();
  for (const char* domain : {"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"})
    if (call(domain, json::object()).contains("error")) return false;
  const json navigated = call("Page.navigate", {{"url", url}});
  if (!navigated.contains("frameId") || navigated.contains("errorText")) return false;
  return wait_until("document.readyState === 'complete'", std::chrono::seconds(15));
}

json HeadlessChromium::evaluate(const std::string& expression) {
  const json reply = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
  if (reply.contains("exceptionDetails")) {
    const json& e = reply["exceptionDetails"];
    return {{"exception", e.contains("exception") ? e["exception"].value("description", "") : e.value("text", "")}};
  }
  if (reply.contains("error")) return {{"exception", reply["error"].dump()}};
  return reply.contains("result") ? reply["result"].value("value", json()) : json();
}

bool HeadlessChromium::wait_until(const std::string& expression, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (evaluate(expression) == json(true)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool HeadlessChromium::insert_text(const std::string& text) {
  return !call("Input.insertText", {{"text", text}}).contains("error");
}

bool HeadlessChromium::screenshot(const std::filesystem::path& png) {
  const json shot = call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}});
  if (!shot.contains("data")) return false;
  std::ofstream(png, std::ios::binary) << base64_decode(shot["data"].get<std::string>());
  return std::filesystem::file_size(png) > 0;
}

json HeadlessChromium::call(const std::string& method, const json& params, bool to_page,
                            std::chrono::milliseconds timeout) {
  const int id = ++next_id_;
  json message = {{"id", id}, {"method", method}, {"params", params}};
  if (to_page) message["sessionId"] = session_;
  const std::string bytes = message.dump() + '\0';
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return {{"error", "the browser's pipe is closed"}};
    sent += std::size_t(n);
  }
  const auto deadline = Clock::now() + timeout;
  json reply;
  while (read_message(reply, deadline)) {
    if (reply.value("id", -1) == id) return reply.contains("error") ? json{{"error", reply["error"]}} : reply["result"];
    record_event(reply);
  }
  return {{"error", method + ": no answer from the browser"}};
}

bool HeadlessChromium::read_message(json& message, Clock::time_point deadline) {
  for (;;) {
    if (const auto end = pending_.find('\0'); end != std::string::npos) {
      message = json::parse(pending_.substr(0, end), nullptr, false);
      pending_.erase(0, end + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, int(left)) <= 0) return false;
    char buffer[65536];
    const ssize_t n = read(fd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    pending_.append(buffer, std::size_t(n));
  }
}

void HeadlessChromium::record_event(const json& event) {
  if (event.value("sessionId", "") != session_ || session_.empty()) return;
  const std::string method = event.value("method", "");
  const json& params = event.contains("params") ? event["params"] : json::object();
  if (method == "Network.requestWillBeSent") {
    requested_urls_.push_back(params["request"].value("url", ""));
  } else if (method == "Runtime.consoleAPICalled") {
    const std::string type = params.value("type", "");
    if (type == "error" || type == "assert") errors_.push_back("console." + type + ": " + console_text(params["args"]));
  } else if (method == "Runtime.exceptionThrown") {
    const json& e = params["exceptionDetails"];
    errors_.push_back("uncaught: " +
                      (e.contains("exception") ? e["exception"].value("description", "") : e.value("text", "")));
  } else if (method == "Log.entryAdded" && params["entry"].value("level", "") == "error") {
    const json& e = params["entry"];
    errors_.push_back(e.value("source", "log") + ": " + e.value("text", "") + " (" + e.value("url", "") + ")");
  }
}

}  // namespace ft::test
