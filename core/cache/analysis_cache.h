// The analysis cache: one SQLite file that keeps everything an analysis run extracted from a
// model and a data set, and every answer derived from it, so that nothing is computed twice and
// a reopened session is instant.
//
// Plain C++ and SQLite only (no LibTorch, no Qt): the CLI, the GUI and the tests share it.
//
// Layout (schema version kSchemaVersion, migrations from every older version):
//   meta     key → value (creation time, writer version)
//   runs     one row per (model content hash, data identity + content hash, layer, parameters):
//            the RunKey, the RunInfo shapes, status partial|complete
//   chunks   one row per extracted chunk of a run: CSR coefficients per expert mode, labels,
//            predictions, output scores, the layer's inputs (unless they are the data's own),
//            attributes (as little-endian blobs;
//            chunk_codec.h has the layout, schema 3 its compact coefficient forms, schema 4
//            the modes left to the model)
//   results  derived answers of a run (statistics, galleries, ablations) as JSON text, keyed by
//            (kind, key)
//
// Robustness:
//   * WAL journal, whole chunks per transaction (one, or a ChunkBatch of several): a job killed
//     half-way (even kill -9) leaves a consistent file; the next run sees which chunks exist and
//     computes only the missing ones.
//   * A cache of ours (our application_id) that is corrupt (PRAGMA quick_check fails) or has a
//     schema newer than this program is never used: open() renames it to
//     "<path>.unusable-<UTC timestamp>" and starts a fresh cache, and tells the caller through
//     CacheOpenReport so the boundary can say so. So is anything unusable in the program's own
//     cache directory (that of default_cache_path()), which holds nothing but caches.
//   * Any other file that is not a cache — a model, an edit-session database, somebody's notes,
//     a FIFO — is refused with a FileError and never touched: a mistyped --cache must not move
//     the user's files.
//   * Damaged rows inside a sound file (a chunk whose blobs do not match its run, a result that
//     is not JSON) are found by cache_repair.h, which drops just them.
//   * Errors are mumoe::FileError naming the cache path and SQLite's message.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mumoe::cache {

class Transaction;

inline constexpr int kSchemaVersion = 4;
/// SQLite page size of the cache files this version creates (older files keep theirs).
inline constexpr int kPageSize = 16384;
/// PRAGMA application_id of every mumoe cache file ("MuMo" in ASCII).
inline constexpr int32_t kApplicationId = 0x4D754D6F;

/// What identifies a run. Two runs with equal keys have equal content.
struct RunKey {
  std::string model_hash;     ///< content hash of the model file (hex)
  std::string model_path;     ///< where it was read from (for invalidation and display)
  std::string data_identity;  ///< the data SPEC, e.g. "fashion-mnist:test"
  std::string data_hash;      ///< content hash of the loaded samples (hex)
  std::string layer;          ///< the μMoE layer analysed, e.g. "head"
  std::string parameters;     ///< canonical JSON of everything else that changes the numbers
};

/// Shapes of what each chunk of a run holds.
struct RunInfo {
  int64_t sample_count = 0;        ///< S
  int64_t chunk_size = 0;          ///< samples per chunk (the last one may be shorter)
  int64_t input_dim = 0;           ///< I: floats per sample in ChunkRecord::inputs
  int64_t output_dim = 0;          ///< C: doubles per sample in ChunkRecord::scores
  std::vector<int64_t> expert_dims;  ///< N_e per expert mode
  int64_t attribute_count = 0;     ///< K: bytes per sample in ChunkRecord::attributes
  int64_t chunk_count() const { return chunk_size > 0 ? (sample_count + chunk_size - 1) / chunk_size : 0; }
};

/// Non-zero coefficients of one expert mode for the samples of a chunk, in CSR form:
/// sample i's entries are indices/values[offsets[i] .. offsets[i+1]).
struct SparseRows {
  std::vector<int64_t> offsets;  ///< count + 1 entries, offsets[0] = 0, non-decreasing
  std::vector<int32_t> indices;  ///< expert index, in [0, N_e), increasing within a row
  std::vector<double> values;    ///< a_n > 0
};

/// Everything extracted for the samples [first_sample, first_sample + count) of a run.
struct ChunkRecord {
  int64_t chunk_index = 0;
  int64_t first_sample = 0;
  int64_t count = 0;
  std::vector<int64_t> labels;        ///< [count]
  std::vector<int64_t> predictions;   ///< [count]
  std::vector<double> scores;         ///< [count × output_dim] the model's outputs (logits)
  /// [count × input_dim] the μMoE layer's inputs — or empty: not stored, because they are the
  /// run's data set's own features (a head without backbone; the run key hashes the data), which
  /// the loader copies in (analysis/extraction.h, load_extracted_run).
  std::vector<float> inputs;
  std::vector<uint8_t> attributes;    ///< [count × attribute_count] 0/1
  std::vector<SparseRows> coefficients;  ///< one per expert mode
  /// Empty when every mode's coefficients are stored; else one entry per mode: 0 where they are,
  /// and otherwise the mode is left to the model — a dense gate (softmax: every row holds all
  /// N_e experts), whose coefficients the model's gates give again from the layer's inputs, so
  /// that extraction need not write them (the most of what a softmax head's extraction wrote;
  /// analysis/extraction.h recomputes them when it loads the run). Such a mode's SparseRows hold
  /// only its offsets (N_e per row), and the entry is the checksum of the values the extraction
  /// computed, which the loader compares with what it recomputes. Non-zero; opaque to the cache.
  std::vector<uint64_t> left_to_model;
  bool leaves_modes_to_model() const {
    for (auto checksum : left_to_model)
      if (checksum) return true;
    return false;
  }
};

struct CacheOpenReport {
  bool created = false;            ///< a new, empty cache file was made
  bool set_aside = false;          ///< an unusable file was moved away (see set_aside_path)
  std::string set_aside_path;      ///< where it went
  std::string set_aside_reason;    ///< why ("not a mumoe cache", "corrupt: …", "schema 9 is newer than 2")
  int migrated_from = 0;           ///< > 0: the schema was upgraded from this version
};

/// What a front end tells the user about an opening: "the cache file was unusable (REASON); it
/// was moved to PATH and a new cache was started", or "" when nothing needs saying.
std::string opening_note(const CacheOpenReport& report);

/// One AnalysisCache is one SQLite connection: use it from one thread at a time. Several objects
/// (threads or processes, e.g. the GUI and a CLI job) may share one file. A run id that does not
/// exist is a UsageError in every method that takes one, except delete_run.
class AnalysisCache {
 public:
  /// Opens or creates the cache at `path` (parent directories are created). See the header
  /// comment for what happens to unusable files. Throws FileError when the file cannot be opened
  /// or created at all (e.g. unwritable directory), or is not a cache and is not ours to move.
  static std::unique_ptr<AnalysisCache> open(const std::string& path, CacheOpenReport* report = nullptr);
  ~AnalysisCache();
  AnalysisCache(const AnalysisCache&) = delete;
  AnalysisCache& operator=(const AnalysisCache&) = delete;

  const std::string& path() const;

  /// The run with this key, created (status partial) with `info` if it does not exist. When it
  /// exists with a different RunInfo, its chunks and results are dropped and it is recreated.
  /// Runs of the same model_path + layer + data_identity whose model_hash or data_hash differ
  /// (the file changed) are deleted with their chunks and results: a changed model invalidates
  /// its own rows only. Returns the run id (a new one when the run was recreated). Throws
  /// UsageError for an impossible RunInfo (chunk_size < 1, negative sizes, no expert mode).
  int64_t begin_run(const RunKey& key, const RunInfo& info);
  /// The id of a run with this key, if any (any status).
  std::optional<int64_t> find_run(const RunKey& key) const;
  RunInfo run_info(int64_t run_id) const;
  RunKey run_key(int64_t run_id) const;
  bool run_complete(int64_t run_id) const;
  /// Marks the run complete; throws UsageError unless every chunk is present.
  void complete_run(int64_t run_id);

  /// Chunk indices present, ascending.
  std::vector<int64_t> chunk_indices(int64_t run_id) const;
  /// Writes one chunk in its own transaction (replacing an existing chunk of that index), or in
  /// the open ChunkBatch's. Validates the record against the run's RunInfo first (sizes, CSR offsets, index ranges)
  /// and throws UsageError naming the field. Also checked: first_sample and count match
  /// chunk_index, expert indices increase within a row, a_n is finite and > 0, attributes are 0/1,
  /// and a mode left to the model holds full offsets and nothing else.
  void put_chunk(int64_t run_id, const ChunkRecord& chunk);
  /// Chunks stored together: while a batch is open, put_chunk adds each chunk to the batch's one
  /// write transaction, and commit() stores them all; a batch dropped uncommitted stores none.
  /// Why: a commit per chunk cost ~100 µs of SQLite's work (it writes and checksums the pages of
  /// the write-ahead log at each commit) — about a fifth of the writer thread's share of a bare
  /// head's 500-sample chunk (progress.h, ChunkBatching, has the measured gain). A batch holds the
  /// file's write lock while it is open (another connection's write waits, up to the busy
  /// timeout): keep it short. One batch at a time per cache; while it is open, use only put_chunk
  /// and the reading methods (the other writes throw std::logic_error: they would join the batch).
  /// A put_chunk that throws leaves the chunks put before it in the batch, for commit() to keep —
  /// unless SQLite rolled the transaction back (after an I/O error such as a full disk): then
  /// put_chunk and commit() throw FileError. In a cache that could not enter WAL mode (a file
  /// system without shared memory) a long batch may lock out readers while it is written.
  class ChunkBatch {
   public:
    explicit ChunkBatch(AnalysisCache& cache);
    ~ChunkBatch();  ///< rolls back what commit() did not store
    ChunkBatch(const ChunkBatch&) = delete;
    ChunkBatch& operator=(const ChunkBatch&) = delete;
    /// Stores every chunk put since the batch opened and ends the batch (later puts open their
    /// own transactions). Throws FileError where SQLite cannot (a full disk).
    void commit();

   private:
    void end();  // the batch closed: this connection's puts have their own transactions again
    AnalysisCache& cache_;
    std::unique_ptr<Transaction> transaction_;  // null once committed
  };

  /// Reads one chunk; throws FileError if it is missing or its blobs have the wrong sizes.
  ChunkRecord get_chunk(int64_t run_id, int64_t chunk_index) const;

  /// Derived results (JSON text), e.g. kind "ablation", key "mode0:3,17".
  void put_result(int64_t run_id, const std::string& kind, const std::string& key, const std::string& json);
  std::optional<std::string> get_result(int64_t run_id, const std::string& kind, const std::string& key) const;
  /// Deletes every result of `kind` for the run ("" = every kind).
  void clear_results(int64_t run_id, const std::string& kind = "");

  /// Deletes one chunk and marks its run partial, so that the next extraction recomputes just
  /// that chunk (how a damaged chunk is repaired). Nothing happens for an absent chunk.
  void delete_chunk(int64_t run_id, int64_t chunk_index);
  /// Deletes one derived result (nothing happens when there is none).
  void delete_result(int64_t run_id, const std::string& kind, const std::string& key);
  /// (kind, key) of every result of the run, in key order.
  std::vector<std::pair<std::string, std::string>> result_keys(int64_t run_id) const;

  /// Every run in the file (for `mumoe cache list`), ascending id.
  std::vector<int64_t> run_ids() const;
  /// Deletes a run with its chunks and results (nothing happens for an unknown id).
  void delete_run(int64_t run_id);

 private:
  struct Impl;
  explicit AnalysisCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The default cache path: $MUMOE_CACHE if set, else $XDG_CACHE_HOME/mumoe-studio/analysis.sqlite,
/// else ~/.cache/mumoe-studio/analysis.sqlite.
std::string default_cache_path();

}  // namespace mumoe::cache
