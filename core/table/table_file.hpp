// The tuning table on disk. Readers never see a half-written file: a writer takes an
// advisory lock (flock on "<path>.lock"), re-reads the file, merges its entries in,
// writes a temporary file beside it, flushes it, renames it over the table and flushes
// the folder. A writer killed at any point leaves the previous table (and perhaps a
// stray temporary file). Concurrent writers are serialised and lose no entry.
#pragma once

#include "arbiter_base/text_file.hpp"
#include "table/tuning_table.hpp"

#include <functional>
#include <string>
#include <vector>

namespace arbiter {

// An empty table if the file does not exist; Failure(ARB_ERR_TABLE) if it cannot be read
// or parsed, or is larger than `limit` bytes (table.max_file_mib).
TuningTable load_table_file(const std::string& path, size_t limit = kTextFileLimit);

// The same, keeping only the entries of the devices in `keep` (the rest are checked, counted in
// left_out() and dropped as they are read): memory in proportion to what is kept. The file is
// read in pieces through WrittenTableReader; text it does not know is read whole by toml++.
// For readers only: a table loaded so must never be written back.
TuningTable load_table_file(const std::string& path, size_t limit, const std::vector<std::string>& keep);

// Feeds the file's lines to `reader` in pieces of 1 MiB (the caller calls finish()). False
// where the reader gave up, or the file cannot be read so; read_text_file then says why.
bool feed_table_file(const std::string& path, size_t limit, WrittenTableReader& reader);

// Under the lock: reads the current table (empty if absent), lets `update` change it,
// writes it back atomically. If the current file is corrupt the update fails
// (Failure(ARB_ERR_TABLE)) and the file is left for a person to look at.
void update_table_file(const std::string& path, const std::function<void(TuningTable&)>& update,
                       size_t limit = kTextFileLimit);

// The table at `path` (empty if the file does not exist), after checking that
// update_table_file could write it: Failure(ARB_ERR_TABLE) if it cannot be read or parsed, or
// its file or folder is not writable. For a writer that reads first and writes much later.
TuningTable open_table_for_update(const std::string& path, size_t limit = kTextFileLimit);

// Writes a table to a path atomically (temporary file, flush, rename), without locking.
void write_table_file(const std::string& path, const TuningTable& table);

}  // namespace arbiter
