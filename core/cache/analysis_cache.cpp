#include "cache/analysis_cache.h"

#include <pwd.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "cache/cache_schema.h"
#include "cache/chunk_codec.h"
#include "cache/sqlite_database.h"
#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::cache {
namespace fs = std::filesystem;

namespace {

constexpr int kOpenFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
// A GUI and a CLI job may share the file; a writer holds the lock for one chunk at a time.
constexpr int kBusyTimeoutMs = 30000;
// The side files SQLite keeps beside a database; they belong to it and move with it.
constexpr const char* kSideFiles[] = {"-wal", "-shm", "-journal"};

std::string utc_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

// Creates the parent directories and checks that SQLite will be able to create its files there
// (a WAL database needs -wal and -shm beside it even when the file itself exists).
void prepare_directory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FileError(path, "cannot create the cache directory " + dir.string() + ": " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw FileError(path, "the cache directory " + dir.string() + " is not writable");
  if (fs::is_directory(path, ec)) throw FileError(path, "is a directory, not a cache file");
}

// Moves `path` and its side files to "<path>.unusable-<UTC stamp>[-N]"; returns the new path.
std::string set_aside(const std::string& path, const std::string& reason) {
  const std::string base = path + ".unusable-" + utc_stamp();
  std::string target = base;
  for (int n = 2; exists(target) || exists(target + "-wal") || exists(target + "-shm"); ++n)
    target = base + "-" + std::to_string(n);
  // Side files first: a stale -wal left beside a fresh cache would be replayed into it.
  for (const char* side : kSideFiles) {
    if (!exists(path + side)) continue;
    std::error_code ec;
    fs::rename(path + side, target + side, ec);
    if (ec)
      throw FileError(path, "unusable cache (" + reason + ") cannot be moved aside: " + path + side + ": " +
                                ec.message());
  }
  std::error_code ec;
  fs::rename(path, target, ec);
  if (ec) throw FileError(path, "unusable cache (" + reason + ") cannot be moved aside: " + ec.message());
  return target;
}

// True when `path` lies in the directory of the default cache, which holds nothing but caches
// (so an unusable file there is a damaged cache of ours, whatever its bytes say).
bool in_default_cache_directory(const std::string& path) {
  std::error_code ec;
  const auto dir = fs::weakly_canonical(fs::absolute(path, ec), ec).parent_path();
  const auto ours = fs::weakly_canonical(fs::absolute(default_cache_path(), ec), ec).parent_path();
  return !ec && dir == ours;
}

std::unique_ptr<Database> connect(const std::string& path) {
  auto db = std::make_unique<Database>(path, kOpenFlags);
  if (db->read_only()) throw FileError(path, "the cache file is not writable");
  db->exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
  return db;
}

}  // namespace

struct AnalysisCache::Impl {
  std::string path;
  std::unique_ptr<Database> db;
  // The open ChunkBatch's state: whether one is open, and the shapes of the run its chunks went
  // to, read once under its write lock (no other connection can change them while it is held).
  bool batch_open = false;
  std::optional<std::pair<int64_t, RunInfo>> batch_run;

  // The writes other than put_chunk would join an open batch, and be rolled back with it.
  void refuse_inside_batch(const char* method) const {
    if (batch_open)
      throw std::logic_error(std::string("AnalysisCache::") + method + ": a ChunkBatch is open on this connection");
  }

  [[noreturn]] void no_run(int64_t run_id) const {
    throw UsageError("analysis cache " + path + ": no run with id " + std::to_string(run_id));
  }

  void require_run(int64_t run_id) const {
    Statement s = db->prepare("SELECT 1 FROM runs WHERE id = ?1");
    s.bind_int64(1, run_id);
    if (!s.step()) no_run(run_id);
  }

  RunInfo load_info(int64_t run_id) const {
    Statement s = db->prepare_cached(
        "SELECT sample_count, chunk_size, input_dim, output_dim, expert_dims, attribute_count FROM runs "
        "WHERE id = ?1");
    s.bind_int64(1, run_id);
    if (!s.step()) no_run(run_id);
    RunInfo info;
    info.sample_count = s.column_int64(0);
    info.chunk_size = s.column_int64(1);
    info.input_dim = s.column_int64(2);
    info.output_dim = s.column_int64(3);
    const std::string dims = s.column_text(4);
    info.attribute_count = s.column_int64(5);
    auto parsed = parse_dims(dims);
    if (!parsed)
      throw FileError(path, "run " + std::to_string(run_id) + ": expert_dims is not a list of integers: " + dims);
    info.expert_dims = *parsed;
    // The sizes get_chunk computes from these must not overflow, whatever the file holds.
    if (auto problem = run_info_problem(info); !problem.empty())
      throw FileError(path, "run " + std::to_string(run_id) + ": " + problem);
    return info;
  }
};

AnalysisCache::AnalysisCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AnalysisCache::~AnalysisCache() = default;

std::string opening_note(const CacheOpenReport& report) {
  if (!report.set_aside) return {};
  return "the cache file was unusable (" + report.set_aside_reason + "); it was moved to " + report.set_aside_path +
         " and a new cache was started";
}

std::unique_ptr<AnalysisCache> AnalysisCache::open(const std::string& path, CacheOpenReport* report) {
  CacheOpenReport local;
  CacheOpenReport& r = report ? *report : local;
  r = CacheOpenReport{};
  prepare_directory(path);
  // A regular file or nothing yet: SQLite must never open a FIFO or a device.
  io::regular_file_exists(path);

  auto db = connect(path);
  if (auto reason = unusable_reason(*db)) {
    // Only a cache of ours may be moved aside; anything else at a --cache path is the user's.
    bool ours = false;
    try {
      ours = db->query_int("PRAGMA application_id") == kApplicationId;
    } catch (const SqliteError&) {
      // Not even a SQLite header: not recognisably ours.
    }
    if (!ours && !in_default_cache_directory(path))
      throw FileError(path, "is not a mumoe analysis cache (" + *reason +
                                "); it was left untouched: give --cache a new file or an existing cache");
    // Closed before the rename so no lock or pending checkpoint follows the file.
    db->keep_wal_on_close();
    db.reset();
    r.set_aside = true;
    r.set_aside_reason = *reason;
    r.set_aside_path = set_aside(path, *reason);
    db = connect(path);
  }
  // 16 KiB pages for a new file (an existing one keeps its own; SQLite ignores this then). A
  // chunk's blobs span hundreds of pages, and a WAL commit writes each page as a frame of its
  // own: with SQLite's default 4 KiB a softmax N = 128 head's chunk (330 KB) took 0.85 ms to
  // commit, with 16 KiB 0.24 ms, and its extraction 36 → 20 ms (64 KiB: no better; 2026-11-26).
  db->exec("PRAGMA page_size = " + std::to_string(kPageSize));
  // WAL: readers never block the writer, and a killed writer leaves only uncommitted frames,
  // which the next open ignores. NORMAL is crash-safe in WAL mode (a power loss may lose the last
  // chunks, never consistency). A file system without shared memory keeps the rollback journal,
  // which is just as consistent, so a refusal is not an error.
  db->query_text("PRAGMA journal_mode = WAL");
  db->exec("PRAGMA synchronous = NORMAL");
  db->exec("PRAGMA foreign_keys = ON");

  const int from = migrate(*db);
  r.created = from == 0;
  if (from > 0 && from < kSchemaVersion) r.migrated_from = from;

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->db = std::move(db);
  return std::unique_ptr<AnalysisCache>(new AnalysisCache(std::move(impl)));
}

const std::string& AnalysisCache::path() const { return impl_->path; }

int64_t AnalysisCache::begin_run(const RunKey& key, const RunInfo& info) {
  if (auto problem = run_info_problem(info); !problem.empty())
    throw UsageError("analysis cache " + impl_->path + ": invalid run shape: " + problem);
  Database& db = *impl_->db;
  Transaction tx(db);

  // A different hash under the same path means the model or data file changed: everything
  // computed from the old content is stale. Other models, layers and data sets keep their rows.
  Statement stale = db.prepare(
      "DELETE FROM runs WHERE model_path = ?1 AND layer = ?2 AND data_identity = ?3 "
      "AND (model_hash <> ?4 OR data_hash <> ?5)");
  stale.bind_text(1, key.model_path).bind_text(2, key.layer).bind_text(3, key.data_identity);
  stale.bind_text(4, key.model_hash).bind_text(5, key.data_hash).run();

  if (auto id = find_run(key)) {
    RunInfo stored = impl_->load_info(*id);
    if (stored.sample_count == info.sample_count && stored.chunk_size == info.chunk_size &&
        stored.input_dim == info.input_dim && stored.output_dim == info.output_dim &&
        stored.expert_dims == info.expert_dims && stored.attribute_count == info.attribute_count) {
      tx.commit();
      return *id;
    }
    // Chunks of another shape cannot be reused; the cascade drops them and the results.
    Statement drop = db.prepare("DELETE FROM runs WHERE id = ?1");
    drop.bind_int64(1, *id).run();
  }

  Statement insert = db.prepare(
      "INSERT INTO runs (model_hash, model_path, data_identity, data_hash, layer, parameters, sample_count, "
      "chunk_size, input_dim, output_dim, expert_dims, attribute_count, status, created) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'partial', "
      "strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))");
  insert.bind_text(1, key.model_hash).bind_text(2, key.model_path).bind_text(3, key.data_identity);
  insert.bind_text(4, key.data_hash).bind_text(5, key.layer).bind_text(6, key.parameters);
  insert.bind_int64(7, info.sample_count).bind_int64(8, info.chunk_size).bind_int64(9, info.input_dim);
  insert.bind_int64(10, info.output_dim).bind_text(11, format_dims(info.expert_dims));
  insert.bind_int64(12, info.attribute_count).run();
  const int64_t id = db.last_insert_rowid();
  tx.commit();
  return id;
}

std::optional<int64_t> AnalysisCache::find_run(const RunKey& key) const {
  Statement s = impl_->db->prepare(
      "SELECT id FROM runs WHERE model_hash = ?1 AND model_path = ?2 AND data_identity = ?3 AND data_hash = ?4 "
      "AND layer = ?5 AND parameters = ?6");
  s.bind_text(1, key.model_hash).bind_text(2, key.model_path).bind_text(3, key.data_identity);
  s.bind_text(4, key.data_hash).bind_text(5, key.layer).bind_text(6, key.parameters);
  if (!s.step()) return std::nullopt;
  return s.column_int64(0);
}

RunInfo AnalysisCache::run_info(int64_t run_id) const { return impl_->load_info(run_id); }

RunKey AnalysisCache::run_key(int64_t run_id) const {
  Statement s = impl_->db->prepare(
      "SELECT model_hash, model_path, data_identity, data_hash, layer, parameters FROM runs WHERE id = ?1");
  s.bind_int64(1, run_id);
  if (!s.step()) impl_->no_run(run_id);
  return RunKey{s.column_text(0), s.column_text(1), s.column_text(2),
                s.column_text(3), s.column_text(4), s.column_text(5)};
}

bool AnalysisCache::run_complete(int64_t run_id) const {
  Statement s = impl_->db->prepare("SELECT status FROM runs WHERE id = ?1");
  s.bind_int64(1, run_id);
  if (!s.step()) impl_->no_run(run_id);
  return s.column_text(0) == "complete";
}

void AnalysisCache::complete_run(int64_t run_id) {
  Database& db = *impl_->db;
  Transaction tx(db);
  const RunInfo info = impl_->load_info(run_id);
  const std::vector<int64_t> present = chunk_indices(run_id);
  // put_chunk admits only indices in [0, chunk_count), so equal counts mean every chunk is there.
  if (static_cast<int64_t>(present.size()) != info.chunk_count()) {
    const int64_t absent = info.chunk_count() - static_cast<int64_t>(present.size());
    std::string missing;
    int64_t listed = 0;
    for (int64_t i = 0, k = 0; i < info.chunk_count() && listed < 5; ++i) {
      if (k < static_cast<int64_t>(present.size()) && present[k] == i) {
        ++k;
        continue;
      }
      missing += (listed++ ? ", " : "") + std::to_string(i);
    }
    if (absent > listed) missing += ", …";
    throw UsageError("analysis cache " + impl_->path + ": run " + std::to_string(run_id) + " is missing " +
                     std::to_string(absent) + " of " + std::to_string(info.chunk_count()) + " chunks (" +
                     missing + ")");
  }
  Statement s = db.prepare("UPDATE runs SET status = 'complete' WHERE id = ?1");
  s.bind_int64(1, run_id).run();
  tx.commit();
}

std::vector<int64_t> AnalysisCache::chunk_indices(int64_t run_id) const {
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare("SELECT chunk_index FROM chunks WHERE run_id = ?1 ORDER BY chunk_index");
  s.bind_int64(1, run_id);
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.column_int64(0));
  return out;
}

void AnalysisCache::put_chunk(int64_t run_id, const ChunkRecord& chunk) {
  Database& db = *impl_->db;
  // One chunk, one transaction, unless a batch is open: a job killed at any point leaves whole
  // chunks only. The run's shapes are read under the write lock: between a read before it and the
  // write, another connection could delete the run (the foreign key then fails the insert).
  std::optional<Transaction> own;
  RunInfo info;
  if (!impl_->batch_open) {
    own.emplace(db);
    info = impl_->load_info(run_id);
  } else {
    // SQLite rolls a transaction back by itself after some errors (a full disk): the batch is gone.
    if (sqlite3_get_autocommit(db.handle()))
      throw FileError(impl_->path, "run " + std::to_string(run_id) + ", chunk " + std::to_string(chunk.chunk_index) +
                                       ": the batch of chunks it joined was rolled back after an earlier error");
    if (!impl_->batch_run || impl_->batch_run->first != run_id)
      impl_->batch_run.emplace(run_id, impl_->load_info(run_id));
    info = impl_->batch_run->second;
  }
  if (auto problem = chunk_problem(info, chunk); !problem.empty())
    throw UsageError("analysis cache " + impl_->path + ": run " + std::to_string(run_id) + ", chunk " +
                     std::to_string(chunk.chunk_index) + ": " + problem);
  const CoefficientBlobs coef = encode_coefficients(chunk.coefficients, info.expert_dims, chunk.left_to_model);
  Statement s = db.prepare_cached(
      "INSERT OR REPLACE INTO chunks (run_id, chunk_index, first_sample, count, labels, predictions, scores, "
      "inputs, attributes, coef_offsets, coef_indices, coef_values, coef_left_to_model) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  s.bind_int64(1, run_id).bind_int64(2, chunk.chunk_index).bind_int64(3, chunk.first_sample);
  s.bind_int64(4, chunk.count);
  const BlobView blobs[] = {raw_bytes(chunk.labels), raw_bytes(chunk.predictions), raw_bytes(chunk.scores),
                            raw_bytes(chunk.inputs), raw_bytes(chunk.attributes),  raw_bytes(coef.offsets),
                            raw_bytes(coef.indices), coef.values_blob(),   raw_bytes(coef.left_to_model)};
  int index = 5;
  for (const BlobView& b : blobs) s.bind_blob(index++, b.data, b.size);
  s.run();
  if (own) own->commit();
}

AnalysisCache::ChunkBatch::ChunkBatch(AnalysisCache& cache) : cache_(cache) {
  if (cache_.impl_->batch_open) throw std::logic_error("AnalysisCache::ChunkBatch: a batch is open already");
  transaction_ = std::make_unique<Transaction>(*cache_.impl_->db);
  cache_.impl_->batch_open = true;
  cache_.impl_->batch_run.reset();
}

AnalysisCache::ChunkBatch::~ChunkBatch() {
  if (transaction_) end();  // the transaction's destructor rolls back
}

void AnalysisCache::ChunkBatch::end() {
  transaction_.reset();
  cache_.impl_->batch_open = false;
  cache_.impl_->batch_run.reset();
}

void AnalysisCache::ChunkBatch::commit() {
  if (!transaction_) throw std::logic_error("AnalysisCache::ChunkBatch::commit: committed already");
  if (sqlite3_get_autocommit(cache_.impl_->db->handle()))  // SQLite rolled it back (after a full disk)
    throw FileError(cache_.impl_->path, "a batch of chunks was rolled back after an earlier error");
  transaction_->commit();  // on an error the destructor rolls back
  end();
}

ChunkRecord AnalysisCache::get_chunk(int64_t run_id, int64_t chunk_index) const {
  const RunInfo info = impl_->load_info(run_id);
  Statement s = impl_->db->prepare_cached(
      "SELECT first_sample, count, labels, predictions, scores, inputs, attributes, coef_offsets, coef_indices, "
      "coef_values, coef_left_to_model FROM chunks WHERE run_id = ?1 AND chunk_index = ?2");
  s.bind_int64(1, run_id).bind_int64(2, chunk_index);
  const std::string where = "run " + std::to_string(run_id) + ", chunk " + std::to_string(chunk_index);
  if (!s.step()) throw FileError(impl_->path, where + ": not in the cache");
  StoredChunk stored;
  stored.first_sample = s.column_int64(0);
  stored.count = s.column_int64(1);
  stored.labels = s.column_blob(2);
  stored.predictions = s.column_blob(3);
  stored.scores = s.column_blob(4);
  stored.inputs = s.column_blob(5);
  stored.attributes = s.column_blob(6);
  stored.coef_offsets = s.column_blob(7);
  stored.coef_indices = s.column_blob(8);
  stored.coef_values = s.column_blob(9);
  stored.coef_left_to_model = s.column_blob(10);
  try {
    return decode_chunk(info, chunk_index, stored);
  } catch (const ChunkFormatError& e) {
    throw FileError(impl_->path, where + ": " + e.what());
  }
}

void AnalysisCache::put_result(int64_t run_id, const std::string& kind, const std::string& key,
                               const std::string& json) {
  impl_->refuse_inside_batch("put_result");
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare(
      "INSERT OR REPLACE INTO results (run_id, kind, key, json, created) "
      "VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))");
  s.bind_int64(1, run_id).bind_text(2, kind).bind_text(3, key).bind_text(4, json).run();
}

std::optional<std::string> AnalysisCache::get_result(int64_t run_id, const std::string& kind,
                                                     const std::string& key) const {
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare("SELECT json FROM results WHERE run_id = ?1 AND kind = ?2 AND key = ?3");
  s.bind_int64(1, run_id).bind_text(2, kind).bind_text(3, key);
  if (!s.step()) return std::nullopt;
  return s.column_text(0);
}

void AnalysisCache::clear_results(int64_t run_id, const std::string& kind) {
  impl_->refuse_inside_batch("clear_results");
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare("DELETE FROM results WHERE run_id = ?1 AND (?2 = '' OR kind = ?2)");
  s.bind_int64(1, run_id).bind_text(2, kind).run();
}

void AnalysisCache::delete_chunk(int64_t run_id, int64_t chunk_index) {
  Database& db = *impl_->db;
  impl_->require_run(run_id);
  Transaction tx(db);
  Statement drop = db.prepare("DELETE FROM chunks WHERE run_id = ?1 AND chunk_index = ?2");
  drop.bind_int64(1, run_id).bind_int64(2, chunk_index).run();
  Statement partial = db.prepare("UPDATE runs SET status = 'partial' WHERE id = ?1");
  partial.bind_int64(1, run_id).run();
  tx.commit();
}

void AnalysisCache::delete_result(int64_t run_id, const std::string& kind, const std::string& key) {
  impl_->refuse_inside_batch("delete_result");
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare("DELETE FROM results WHERE run_id = ?1 AND kind = ?2 AND key = ?3");
  s.bind_int64(1, run_id).bind_text(2, kind).bind_text(3, key).run();
}

std::vector<std::pair<std::string, std::string>> AnalysisCache::result_keys(int64_t run_id) const {
  impl_->require_run(run_id);
  Statement s = impl_->db->prepare("SELECT kind, key FROM results WHERE run_id = ?1 ORDER BY kind, key");
  s.bind_int64(1, run_id);
  std::vector<std::pair<std::string, std::string>> out;
  while (s.step()) out.emplace_back(s.column_text(0), s.column_text(1));
  return out;
}

std::vector<int64_t> AnalysisCache::run_ids() const {
  Statement s = impl_->db->prepare("SELECT id FROM runs ORDER BY id");
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.column_int64(0));
  return out;
}

void AnalysisCache::delete_run(int64_t run_id) {
  impl_->refuse_inside_batch("delete_run");
  Statement s = impl_->db->prepare("DELETE FROM runs WHERE id = ?1");
  s.bind_int64(1, run_id).run();
}

std::string default_cache_path() {
  if (const char* env = std::getenv("MUMOE_CACHE"); env && *env) return env;
  // The XDG spec says to ignore relative paths in its variables.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
    return (fs::path(xdg) / "mumoe-studio" / "analysis.sqlite").string();
  std::string home;
  if (const char* env = std::getenv("HOME"); env && *env) {
    home = env;
  } else if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) {
    home = pw->pw_dir;
  }
  if (home.empty()) home = fs::temp_directory_path().string();  // no home at all: still somewhere writable
  return (fs::path(home) / ".cache" / "mumoe-studio" / "analysis.sqlite").string();
}

}  // namespace mumoe::cache
