#include "openblas_memo.hpp"

#include "cpu_features.hpp"

#include <arbiter_base/sha256.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

namespace arbiter::plugins::openblas {
namespace {

constexpr const char* kHeader = "arbiter openblas memo 1";
constexpr size_t kMaxMemos = 16;  // situations remembered (environments, CPUs of a shared home)
constexpr time_t kRacySeconds = 3;  // a file changed this recently may change again unseen

std::string folder() {
  if (const char* dir = std::getenv("ARBITER_CACHE_DIR")) return dir;  // "" turns it off
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/') return std::string(xdg) + "/arbiter";
  if (const char* home = std::getenv("HOME"); home && home[0] == '/') return std::string(home) + "/.cache/arbiter";
  return "";
}

bool this_user_only(const struct stat& st) {
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// "dev ino size mtime.s mtime.ns ctime.s ctime.ns" of the file a path names (links followed).
std::string identity_text(const std::string& path, const struct stat* known = nullptr) {
  struct stat st {};
  if (known != nullptr) {
    st = *known;
  } else if (::stat(path.c_str(), &st) != 0) {
    return "";
  }
  std::ostringstream text;
  text << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << st.st_mtim.tv_sec << ' ' << st.st_mtim.tv_nsec
       << ' ' << st.st_ctim.tv_sec << ' ' << st.st_ctim.tv_nsec;
  return text.str();
}

std::string this_plugin_file() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&memo_key), &info) == 0 || info.dli_fname == nullptr) return "";
  char real[PATH_MAX];
  return ::realpath(info.dli_fname, real) != nullptr ? std::string(real) : std::string();
}

std::string cpu_text() {
  std::string text;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {0};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    text += vendor;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) text += " signature " + std::to_string(a);
#endif
  const CpuFeatures f = this_cpu_features();
  for (bool bit : {f.avx, f.avx2, f.fma, f.avx512f, f.avx512bw, f.avx512vl, f.avx512dq, f.avx512cd, f.avx512vnni,
                   f.avx512bf16})
    text += bit ? '1' : '0';
  return text;
}

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return std::string(name) + (value ? "=" + std::string(value) : std::string(" unset"));
}

struct Line {
  std::string key_hash, loaded_as, identity;
  Memo memo;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  for (size_t at = 0;;) {
    const size_t tab = line.find('\t', at);
    fields.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
    if (tab == std::string::npos) return fields;
    at = tab + 1;
  }
}

// The memo file's lines; none when it is missing, not this user's alone, or does not parse.
std::vector<Line> read_lines(const std::string& path) {
  std::vector<Line> lines;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0) return lines;
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && this_user_only(st) && st.st_size < (1 << 16)) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return lines;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != 7 || (f[4] != "keep" && f[4] != "reload")) return {};  // corrupt: rewritten at the next load
    Line parsed{f[0], f[1], f[2], {f[1], f[5], {}}};
    parsed.memo.decision = {f[4] == "reload" ? CoreAction::reload : CoreAction::keep, f[3], f[6]};
    lines.push_back(std::move(parsed));
  }
  return lines;
}

// The folder, made if missing (0700), and writable by this user alone.
bool private_folder(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    if (::mkdir(path.substr(0, slash).c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && this_user_only(st);
}

bool write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool good = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  good = ::close(fd) == 0 && good;
  if (good && ::rename(temporary.c_str(), path.c_str()) == 0) return true;
  ::unlink(temporary.c_str());
  return false;
}

}  // namespace

std::string memo_path() {
  const std::string dir = folder();
  return dir.empty() || dir[0] != '/' ? std::string() : dir + "/openblas-config";
}

std::string memo_key() {
  const std::string plugin = this_plugin_file();
  if (plugin.empty()) return "";
  std::string key = "plugin " + plugin + " " + identity_text(plugin) + "\ncpu " + cpu_text() + "\n";
  for (const char* name : {"OPENBLAS_CORETYPE", "ARBITER_OPENBLAS_SIMULATE_CORE", "LD_LIBRARY_PATH"})
    key += variable(name) + "\n";
  return key + "ld.so.cache " + identity_text("/etc/ld.so.cache") + "\n";
}

std::optional<Memo> find_memo(const std::string& key) {
  const std::string path = memo_path();
  if (key.empty() || path.empty()) return std::nullopt;
  Sha256 hash;
  hash.update(key);
  const std::string key_hash = hash.hex_digest();
  for (const Line& line : read_lines(path))
    if (line.key_hash == key_hash && !line.identity.empty() && identity_text(line.loaded_as) == line.identity)
      return line.memo;
  return std::nullopt;
}

bool remember_memo(const std::string& key, const Memo& memo) {
  const std::string path = memo_path();
  if (key.empty() || path.empty() || memo.loaded_as.empty() || memo.config.empty()) return false;
  for (const std::string* field : {&memo.loaded_as, &memo.config, &memo.decision.core, &memo.decision.reason})
    if (field->find_first_of("\t\n") != std::string::npos) return false;
  struct stat st {};
  if (::stat(memo.loaded_as.c_str(), &st) != 0) return false;
  const time_t now = std::time(nullptr);
  if (st.st_mtim.tv_sec + kRacySeconds > now || st.st_ctim.tv_sec + kRacySeconds > now) return false;
  if (!private_folder(path.substr(0, path.rfind('/')))) return false;

  Sha256 hash;
  hash.update(key);
  Line fresh{hash.hex_digest(), memo.loaded_as, identity_text(memo.loaded_as, &st), memo};
  std::vector<Line> lines = read_lines(path);
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0 && !(S_ISREG(existing.st_mode) && this_user_only(existing)))
    return false;  // another's file, or not a file: neither read nor replaced
  std::string text = std::string(kHeader) + "\n";
  auto add = [&text](const Line& l) {
    text += l.key_hash + "\t" + l.loaded_as + "\t" + l.identity + "\t" + l.memo.decision.core + "\t" +
            (l.memo.decision.action == CoreAction::reload ? "reload" : "keep") + "\t" + l.memo.config + "\t" +
            l.memo.decision.reason + "\n";
  };
  add(fresh);  // newest first; the oldest fall off
  size_t kept = 1;
  for (const Line& line : lines)
    if (line.key_hash != fresh.key_hash && kept++ < kMaxMemos) add(line);
  return write_atomically(path, text);
}

bool root_only_file(const std::string& path) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return false;
  for (std::string at = real;;) {
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return false;
    if (at == "/") return true;
    const size_t slash = at.rfind('/');
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
}

}  // namespace arbiter::plugins::openblas
