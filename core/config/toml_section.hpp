// The host's side of the shared strict TOML reader (arbiter_base/strict_toml.hpp): the same
// reader, with its errors thrown as Failure(status) with the status the caller chose (config
// or tuning-table errors).
#pragma once

#include <arbiter/types.h>

#include "arbiter_base/strict_toml.hpp"

#include <string>
#include <string_view>

namespace arbiter {

// A whole TOML document; a syntax error becomes Failure(status) at "source:line:column".
toml::table parse_toml(std::string_view text, const std::string& source, arb_status status);

class Section : public StrictTable {
 public:
  Section(const toml::table& table, std::string path, std::string source, arb_status status)
      : StrictTable(table, std::move(path), std::move(source)), status_(status) {}

 private:
  void raise(const std::string& message) const override;

  arb_status status_;
};

}  // namespace arbiter
