#include "kernel_manifest.hpp"

#include "arbiter_base/sha256.hpp"

#include "arbiter_base/abi_names.hpp"
#include "arbiter_base/strict_toml.hpp"
#include "arbiter_base/text_file.hpp"

#include <cctype>
#include <filesystem>
#include <stdexcept>

namespace arbiter::generated {
namespace {

namespace fs = std::filesystem;

int32_t parse_op_name(const std::string& op) {
  if (op == "gemm") return ARB_OP_GEMM;
  if (op == "rmsnorm") return ARB_OP_RMSNORM;
  if (op == "softmax") return ARB_OP_SOFTMAX;
  if (op == "attention") return ARB_OP_ATTENTION;
  return ARB_OP_INVALID;
}

// "grid = ["ceil_div(n, 8)", "m"]" -> up to three formulas.
int read_dims(StrictTable& r, std::string_view key, Formula out[3]) {
  const std::vector<std::string> texts = r.required_strings(key);
  if (texts.empty() || texts.size() > 3) r.error_at(key, "'" + r.qualified(key) + "' needs one to three formulas");
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out[i] = Formula::parse(texts[i]);
    } catch (const std::invalid_argument& e) {
      r.error_at(key, e.what());
    }
  }
  for (size_t i = texts.size(); i < 3; ++i) out[i] = Formula::parse("1");
  return static_cast<int>(texts.size());
}

void read_constraints(StrictTable& r, Constraints& c) {
  auto positive = [&](const char* key, std::optional<int64_t>& field) {
    if (auto v = r.integer(key)) {
      if (*v < 1) r.error_at(key, std::string("'") + key + "' must be at least 1");
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
      if (*v != 0 && *v != 1) r.error_at(key, std::string("'") + key + "' must be 0 or 1");
      (std::string(key) == "trans_a" ? c.trans_a : c.trans_b) = static_cast<int32_t>(*v);
    }
  }
  for (const std::string& a : r.strings("activations")) {
    const std::optional<arb_activation> code = parse_activation(a);
    if (!code) r.error_at("activations", "unknown activation '" + a + "'");
    c.activations.push_back(*code);
  }
  if (auto v = r.boolean("bias")) c.bias = *v;
  if (auto v = r.boolean("c")) c.c = *v;
  if (auto v = r.boolean("residual")) c.residual = *v;
  if (auto v = r.integer("alignment")) {
    if (*v < 1 || *v > 256 || (*v & (*v - 1)) != 0) r.error_at("alignment", "'alignment' must be a power of two up to 256");
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
    case ARB_OP_ATTENTION: return "attention.v1";
    default: return "";
  }
}

Manifest load_manifest(const std::string& path) {
  Manifest m;
  m.path = path;
  const std::string text = read_text_file(path, "kernel manifest");
  const toml::table document = parse_toml_document(text, path);
  StrictTable r(document, "", path);
  m.name = r.required_string("name");
  for (char ch : m.name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-'))
      r.error_at("name", "'name' may use letters, digits, '_' and '-' only");
  const std::string op = r.required_string("op");
  m.op = parse_op_name(op);
  if (m.op == ARB_OP_INVALID) r.error_at("op", "unknown op '" + op + "' (gemm, rmsnorm, softmax, attention)");
  m.signature = r.required_string("signature");
  if (m.signature != signature_for(m.op))
    r.error_at("signature", "op " + op + " uses signature '" + signature_for(m.op) + "', not '" + m.signature + "'");
  m.entry = r.required_string("entry");
  m.description = r.string("description").value_or("");
  m.source_path = (fs::path(path).parent_path() / r.required_string("source")).string();
  for (const std::string& d : r.required_strings("dtypes")) {
    const std::optional<arb_dtype> code = parse_dtype(d);
    if (!code) r.error_at("dtypes", "unknown dtype '" + d + "' (f32, f16, bf16)");
    m.dtypes.push_back(*code);
  }
  if (auto v = r.boolean("deterministic")) m.deterministic = *v;

  const toml::table* launch = r.table("launch");
  if (launch == nullptr) r.error(document, "'[launch]' is missing");
  StrictTable l(*launch, "launch", path);
  m.grid_dims = read_dims(l, "grid", m.grid);
  m.block_dims = read_dims(l, "block", m.block);
  const std::string shared = l.string("shared_bytes").value_or("");
  try {
    m.shared_bytes = Formula::parse(shared.empty() ? "0" : shared);
  } catch (const std::invalid_argument& e) {
    l.error_at("shared_bytes", e.what());
  }
  l.finish();

  if (const toml::table* constraints = r.table("constraints")) {
    StrictTable c(*constraints, "constraints", path);
    read_constraints(c, m.constraints);
  }

  const toml::table* provenance = r.table("provenance");
  if (provenance == nullptr) r.error(document, "'[provenance]' is missing: generator, date and source_sha256 are required");
  StrictTable p(*provenance, "provenance", path);
  m.provenance.generator = p.required_string("generator");
  m.provenance.date = p.required_string("date");
  m.provenance.source_sha256 = p.required_string("source_sha256");
  m.provenance.notes = p.string("notes").value_or("");
  p.finish();

  if (const toml::node* shapes = r.find("shape")) {
    const toml::array* a = shapes->as_array();
    if (a == nullptr) r.error(*shapes, "'shape' must be an array of tables ([[shape]])");
    for (const toml::node& item : *a) {
      if (!item.is_table()) r.error(item, "'shape' must be an array of tables ([[shape]])");
      StrictTable s(*item.as_table(), "shape", path);
      m.shapes.push_back(s.required_string("problem"));
      s.finish();
    }
  }
  r.finish();

  m.source = read_text_file(m.source_path, "kernel source");
  const std::string actual = sha256_hex(m.source);
  if (actual != m.provenance.source_sha256)
    p.error_at("source_sha256", "the source " + m.source_path + " has SHA-256 " + actual +
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
  } else if (p.op == ARB_OP_ATTENTION) {  // cols is head_dim
    if (!range("head_dim", p.cols, c.min_cols, c.max_cols, c.cols_multiple_of)) return false;
  } else {
    if (!range("rows", p.rows, c.min_rows, c.max_rows, 1) ||
        !range("cols", p.cols, c.min_cols, c.max_cols, c.cols_multiple_of))
      return false;
    if (p.has_residual && !c.residual) return no("no fused residual");
  }
  // A problem the launch formulas give no valid launch for is refused here, before any launch.
  std::string launch_why;
  if (!launch_dims(m.grid, m.block, m.shared_bytes, p, launch_why)) return no("no launch for it: " + launch_why);
  return true;
}

}  // namespace arbiter::generated
