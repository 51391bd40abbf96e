#include "kernel_manifest.hpp"

#include "sha256.hpp"

#include <toml++/toml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace arbiter::generated {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A strict reader of one table: consumed keys are remembered, the rest is an error.
class Reader {
 public:
  Reader(const toml::table& table, std::string prefix, const std::string& path)
      : table_(table), prefix_(std::move(prefix)), path_(path) {}

  [[noreturn]] void error(const toml::node& node, const std::string& what) const { error_at(node.source().begin, what); }
  [[noreturn]] void error_at(const toml::source_position& pos, const std::string& what) const {
    throw std::runtime_error(path_ + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column) + ": " + what);
  }
  const toml::node* find(std::string_view key) {
    seen_.insert(std::string(key));
    return table_.get(key);
  }
  std::string string(std::string_view key, bool required) {
    const toml::node* n = find(key);
    if (n == nullptr) {
      if (required) error(table_, "'" + name(key) + "' is missing");
      return "";
    }
    if (!n->is_string()) error(*n, "'" + name(key) + "' must be a string");
    return n->as_string()->get();
  }
  std::optional<int64_t> integer(std::string_view key) {
    const toml::node* n = find(key);
    if (n == nullptr) return std::nullopt;
    if (!n->is_integer()) error(*n, "'" + name(key) + "' must be an integer");
    return n->as_integer()->get();
  }
  std::optional<bool> boolean(std::string_view key) {
    const toml::node* n = find(key);
    if (n == nullptr) return std::nullopt;
    if (!n->is_boolean()) error(*n, "'" + name(key) + "' must be true or false");
    return n->as_boolean()->get();
  }
  std::vector<std::string> strings(std::string_view key, bool required) {
    const toml::node* n = find(key);
    std::vector<std::string> out;
    if (n == nullptr) {
      if (required) error(table_, "'" + name(key) + "' is missing");
      return out;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr) error(*n, "'" + name(key) + "' must be an array of strings");
    for (const toml::node& item : *a) {
      if (!item.is_string()) error(item, "'" + name(key) + "' must be an array of strings");
      out.push_back(item.as_string()->get());
    }
    return out;
  }
  const toml::table* table(std::string_view key) {
    const toml::node* n = find(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) error(*n, "'" + name(key) + "' must be a table");
    return n->as_table();
  }
  void finish() const {
    for (const auto& [key, node] : table_)
      if (!seen_.count(std::string(key.str()))) error_at(key.source().begin, "unknown key '" + name(key.str()) + "'");
  }
  const toml::table& node() const { return table_; }
  std::string name(std::string_view key) const { return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key); }

 private:
  const toml::table& table_;
  std::string prefix_;
  const std::string& path_;
  std::set<std::string> seen_;
};

int32_t parse_op_name(const std::string& op) {
  if (op == "gemm") return ARB_OP_GEMM;
  if (op == "rmsnorm") return ARB_OP_RMSNORM;
  if (op == "softmax") return ARB_OP_SOFTMAX;
  return ARB_OP_INVALID;
}

int32_t parse_dtype_name(const std::string& dtype) {
  if (dtype == "f32") return ARB_DTYPE_F32;
  if (dtype == "f16") return ARB_DTYPE_F16;
  if (dtype == "bf16") return ARB_DTYPE_BF16;
  return ARB_DTYPE_INVALID;
}

int32_t parse_activation_name(const std::string& act) {
  if (act == "none") return ARB_ACT_NONE;
  if (act == "relu") return ARB_ACT_RELU;
  if (act == "gelu_tanh") return ARB_ACT_GELU_TANH;
  if (act == "gelu" || act == "gelu_erf") return ARB_ACT_GELU_ERF;
  if (act == "silu") return ARB_ACT_SILU;
  return -1;
}

// "grid = ["ceil_div(n, 8)", "m"]" -> up to three formulas.
int read_dims(Reader& r, std::string_view key, Formula out[3]) {
  const std::vector<std::string> texts = r.strings(key, true);
  if (texts.empty() || texts.size() > 3) r.error(*r.find(key), "'" + r.name(key) + "' needs one to three formulas");
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out[i] = Formula::parse(texts[i]);
    } catch (const std::invalid_argument& e) {
      r.error(*r.find(key), e.what());
    }
  }
  for (size_t i = texts.size(); i < 3; ++i) out[i] = Formula::parse("1");
  return static_cast<int>(texts.size());
}

void read_constraints(Reader& r, Constraints& c) {
  auto positive = [&](const char* key, std::optional<int64_t>& field) {
    if (auto v = r.integer(key)) {
      if (*v < 1) r.error(*r.find(key), std::string("'") + key + "' must be at least 1");
      field = *v;
    }
  };
  positive("min_m", c.min_m);
  positive("max_m", c.max_m);
  positive("min_n", c.min_n);
  positive("max_n", c.max_n);
  positive("min_k", c.min_k);
  positive("max_k", c.max_k);
  positive("min_rows", c.min_rows);
  positive("max_rows", c.max_rows);
  positive("min_cols", c.min_cols);
  positive("max_cols", c.max_cols);
  auto multiple = [&](const char* key, int64_t& field) {
    std::optional<int64_t> v;
    positive(key, v);
    if (v) field = *v;
  };
  multiple("m_multiple_of", c.m_multiple_of);
  multiple("n_multiple_of", c.n_multiple_of);
  multiple("k_multiple_of", c.k_multiple_of);
  multiple("cols_multiple_of", c.cols_multiple_of);
  for (const char* key : {"trans_a", "trans_b"}) {
    if (auto v = r.integer(key)) {
      if (*v != 0 && *v != 1) r.error(*r.find(key), std::string("'") + key + "' must be 0 or 1");
      (std::string(key) == "trans_a" ? c.trans_a : c.trans_b) = static_cast<int32_t>(*v);
    }
  }
  for (const std::string& a : r.strings("activations", false)) {
    const int32_t code = parse_activation_name(a);
    if (code < 0) r.error(*r.find("activations"), "unknown activation '" + a + "'");
    c.activations.push_back(code);
  }
  if (auto v = r.boolean("bias")) c.bias = *v;
  if (auto v = r.boolean("c")) c.c = *v;
  if (auto v = r.boolean("residual")) c.residual = *v;
  if (auto v = r.integer("alignment")) {
    if (*v < 1 || *v > 256 || (*v & (*v - 1)) != 0) r.error(*r.find("alignment"), "'alignment' must be a power of two up to 256");
    c.alignment = static_cast<int32_t>(*v);
  }
  r.finish();
}

}  // namespace

const char* signature_for(int32_t op) {
  switch (op) {
    case ARB_OP_GEMM: return "gemm.v1";
    case ARB_OP_RMSNORM: return "rmsnorm.v1";
    case ARB_OP_SOFTMAX: return "softmax.v1";
    default: return "";
  }
}

Manifest load_manifest(const std::string& path) {
  Manifest m;
  m.path = path;
  toml::table document;
  try {
    document = toml::parse(read_file(path), path);
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    throw std::runtime_error(path + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column) + ": " +
                             std::string(e.description()));
  }
  Reader r(document, "", path);
  m.name = r.string("name", true);
  for (char ch : m.name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-'))
      r.error(*r.find("name"), "'name' may use letters, digits, '_' and '-' only");
  const std::string op = r.string("op", true);
  m.op = parse_op_name(op);
  if (m.op == ARB_OP_INVALID) r.error(*r.find("op"), "unknown op '" + op + "' (gemm, rmsnorm, softmax)");
  m.signature = r.string("signature", true);
  if (m.signature != signature_for(m.op))
    r.error(*r.find("signature"), "op " + op + " uses signature '" + signature_for(m.op) + "', not '" + m.signature + "'");
  m.entry = r.string("entry", true);
  m.description = r.string("description", false);
  m.source_path = (fs::path(path).parent_path() / r.string("source", true)).string();
  for (const std::string& d : r.strings("dtypes", true)) {
    const int32_t code = parse_dtype_name(d);
    if (code == ARB_DTYPE_INVALID) r.error(*r.find("dtypes"), "unknown dtype '" + d + "' (f32, f16, bf16)");
    m.dtypes.push_back(code);
  }
  if (auto v = r.boolean("deterministic")) m.deterministic = *v;

  const toml::table* launch = r.table("launch");
  if (launch == nullptr) r.error(document, "'[launch]' is missing");
  Reader l(*launch, "launch", path);
  m.grid_dims = read_dims(l, "grid", m.grid);
  m.block_dims = read_dims(l, "block", m.block);
  const std::string shared = l.string("shared_bytes", false);
  try {
    m.shared_bytes = Formula::parse(shared.empty() ? "0" : shared);
  } catch (const std::invalid_argument& e) {
    l.error(*l.find("shared_bytes"), e.what());
  }
  l.finish();

  if (const toml::table* constraints = r.table("constraints")) {
    Reader c(*constraints, "constraints", path);
    read_constraints(c, m.constraints);
  }

  const toml::table* provenance = r.table("provenance");
  if (provenance == nullptr) r.error(document, "'[provenance]' is missing: generator, date and source_sha256 are required");
  Reader p(*provenance, "provenance", path);
  m.provenance.generator = p.string("generator", true);
  m.provenance.date = p.string("date", true);
  m.provenance.source_sha256 = p.string("source_sha256", true);
  m.provenance.notes = p.string("notes", false);
  p.finish();

  if (const toml::node* shapes = r.find("shape")) {
    const toml::array* a = shapes->as_array();
    if (a == nullptr) r.error(*shapes, "'shape' must be an array of tables ([[shape]])");
    for (const toml::node& item : *a) {
      if (!item.is_table()) r.error(item, "'shape' must be an array of tables ([[shape]])");
      Reader s(*item.as_table(), "shape", path);
      m.shapes.push_back(s.string("problem", true));
      s.finish();
    }
  }
  r.finish();

  m.source = read_file(m.source_path);
  const std::string actual = sha256_hex(m.source);
  if (actual != m.provenance.source_sha256)
    p.error(*p.find("source_sha256"), "the source " + m.source_path + " has SHA-256 " + actual +
                                          ", not the one recorded: a changed kernel must be declared again");
  return m;
}

bool satisfies(const Manifest& m, const arb_problem& p, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (p.op != m.op) return no("another op");
  if (p.device_type != kDLCUDA) return no("CUDA tensors only");
  bool dtype_ok = false;
  for (int32_t d : m.dtypes) dtype_ok |= d == p.dtype;
  if (!dtype_ok) return no("dtype not in the manifest's dtypes");
  const Constraints& c = m.constraints;
  if (p.alignment < c.alignment) return no("needs " + std::to_string(c.alignment) + "-byte alignment");
  auto range = [&](const char* name, int64_t v, const std::optional<int64_t>& lo, const std::optional<int64_t>& hi,
                   int64_t multiple) {
    if (lo && v < *lo) return no(std::string(name) + " below " + std::to_string(*lo));
    if (hi && v > *hi) return no(std::string(name) + " above " + std::to_string(*hi));
    if (v % multiple != 0) return no(std::string(name) + " not a multiple of " + std::to_string(multiple));
    return true;
  };
  if (p.op == ARB_OP_GEMM) {
    if (!range("m", p.m, c.min_m, c.max_m, c.m_multiple_of) || !range("n", p.n, c.min_n, c.max_n, c.n_multiple_of) ||
        !range("k", p.k, c.min_k, c.max_k, c.k_multiple_of))
      return false;
    if (c.trans_a && p.trans_a != *c.trans_a) return no("trans_a must be " + std::to_string(*c.trans_a));
    if (c.trans_b && p.trans_b != *c.trans_b) return no("trans_b must be " + std::to_string(*c.trans_b));
    if (!c.activations.empty()) {
      bool ok = false;
      for (int32_t a : c.activations) ok |= a == p.activation;
      if (!ok) return no("activation not supported");
    }
    if (p.has_bias && !c.bias) return no("no bias");
    if (p.has_c && !c.c) return no("no C (beta must be 0)");
  } else {
    if (!range("rows", p.rows, c.min_rows, c.max_rows, 1) ||
        !range("cols", p.cols, c.min_cols, c.max_cols, c.cols_multiple_of))
      return false;
    if (p.has_residual && !c.residual) return no("no fused residual");
  }
  return true;
}

}  // namespace arbiter::generated
