#include "analysis/chunked_run.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "io/errors.h"

namespace mumoe::analysis {
namespace {

// The one thread that finishes and writes every chunk of a run, one task at a time. (A thread per
// chunk paid the per-thread start of LibTorch's and OpenMP's state on every chunk.) Destroying it
// waits for the task in hand, so leaving fill_chunked_run_in_two_stages by an exception still
// waits for a write in flight.
class WriterThread {
 public:
  WriterThread() : thread_([this] { run(); }) {}
  ~WriterThread() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  /// Runs `work` on the thread. One task at a time: the caller waits for the previous task's
  /// future before submitting the next.
  std::future<bool> submit(std::function<bool()> work) {
    std::packaged_task<bool()> task(std::move(work));
    auto done = task.get_future();
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (next_.valid()) throw std::logic_error("WriterThread::submit: the previous task has not started");
      next_ = std::move(task);
    }
    wake_.notify_all();
    return done;
  }

 private:
  void run() {
    for (;;) {
      std::packaged_task<bool()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return next_.valid() || stopping_; });
        if (!next_.valid()) return;  // stopping, nothing left to do
        task = std::move(next_);
      }
      task();  // an exception is kept in the task's future
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::packaged_task<bool()> next_;  // valid while a task waits to run
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace

ExtractionSummary fill_chunked_run(cache::AnalysisCache& cache, const cache::RunKey& key, const cache::RunInfo& info,
                                   const std::function<cache::ChunkRecord(int64_t chunk)>& compute_chunk,
                                   const ExtractionCallback& progress, const ChunkBatching& batching) {
  return fill_chunked_run_in_two_stages(
      cache, key, info,
      [&](int64_t c) -> FinishChunk {
        // std::function needs a copyable callable: the record travels in a shared pointer.
        auto record = std::make_shared<cache::ChunkRecord>(compute_chunk(c));
        return [record] { return std::move(*record); };
      },
      progress, batching);
}

ExtractionSummary fill_chunked_run_in_two_stages(cache::AnalysisCache& cache, const cache::RunKey& key,
                                                 const cache::RunInfo& info,
                                                 const std::function<FinishChunk(int64_t chunk)>& start_chunk,
                                                 const ExtractionCallback& progress, const ChunkBatching& batching) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  ExtractionSummary summary;
  summary.run_id = cache.begin_run(key, info);
  const auto present = cache.chunk_indices(summary.run_id);
  const std::set<int64_t> done(present.begin(), present.end());
  const auto& shard = batching.shard;
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw UsageError("shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                     " does not exist: K/N needs 0 ≤ K < N");
  // This process's chunks: [first, chunks) — all of them, or a shard's.
  const int64_t first = shard.first_chunk(info.chunk_count()), chunks = shard.end_chunk(info.chunk_count());
  const int64_t first_sample = std::min(info.sample_count, first * info.chunk_size);
  for (const int64_t c : done) summary.chunks_reused += c >= first && c < chunks;
  if (!shard.whole())
    cache.put_result(summary.run_id, kShardResultKind, std::to_string(shard.index) + "/" + std::to_string(shard.count),
                     "{\"index\": " + std::to_string(shard.index) + ", \"count\": " + std::to_string(shard.count) +
                         ", \"first_chunk\": " + std::to_string(first) + ", \"end_chunk\": " + std::to_string(chunks) + "}");

  ExtractionProgress p;
  p.samples_total = std::min(info.sample_count, chunks * info.chunk_size) - first_sample;
  p.chunks_total = chunks - first;
  // Chunk c and every one before it are stored; `computed_after` chunks after it are computed
  // already (later chunks of its batch), which the ETA does not count as left.
  const auto report = [&](int64_t c, int64_t computed_after = 0) {
    p.chunks_done = c + 1 - first;
    p.samples_done = std::min(info.sample_count, (c + 1) * info.chunk_size) - first_sample;
    p.elapsed_seconds = seconds_since(start);
    p.eta_seconds = summary.chunks_computed
                        ? p.elapsed_seconds / summary.chunks_computed * (chunks - c - 1 - computed_after)
                        : -1;  // unknown until a chunk has been computed
    if (progress && !progress(p)) throw Cancelled();
  };
  // A chunk is finished and written on a second thread while the next chunk starts (the writes
  // were ~15 % of a bare head's extraction), into a batch that is committed as ChunkBatching
  // says. At most one write is in flight, the cache is touched by one thread at a time, and a
  // chunk is reported only once committed, so cancelling or a failed write loses nothing already
  // reported. A cancel is seen after the chunk in hand is started (that chunk is then neither
  // finished nor stored). A failed finishing stage or write first commits the chunks of its batch
  // before it, which are then reported. Leaving by an exception waits for the write in flight (the
  // writer thread's destructor); if the computation failed, that error is the one reported, the
  // write's own is dropped, and so is a batch it left open (rolled back: at most a batch of chunks
  // to compute again; a batch the write committed stays, unreported). The write lock is held
  // while a batch is open, which includes the calling thread's next start: at most batch_seconds
  // and one chunk's two stages, or a chunk's start where it suddenly takes longer than the last.
  std::unique_ptr<cache::AnalysisCache::ChunkBatch> batch;  // the writer thread's; outlives it
  Clock::time_point batch_began;
  bool kept_before_failure = false;  // set by the writer before its task fails
  std::future<bool> writing;         // true: the batch was committed after this chunk
  std::optional<int64_t> written;    // the chunk being written
  std::vector<int64_t> uncommitted;  // written, in the open batch
  WriterThread writer;               // joined before this function returns or unwinds
  const auto finish_write = [&] {
    if (!written) return;
    bool committed = false;
    try {
      committed = writing.get();  // rethrows the task's error (a full disk: io/errors.h)
    } catch (...) {
      written.reset();
      // Stored by the failed task's batch: reported as usual, before the error that ends the run
      // (a cancel there changes nothing).
      if (kept_before_failure) {
        for (const int64_t c : uncommitted) try {
            report(c);
          } catch (const Cancelled&) {
          }
      }
      uncommitted.clear();
      throw;
    }
    ++summary.chunks_computed;
    uncommitted.push_back(*written);
    written.reset();
    if (!committed) return;
    const auto stored = std::move(uncommitted);
    uncommitted.clear();
    for (size_t k = 0; k < stored.size(); ++k) report(stored[k], static_cast<int64_t>(stored.size() - k - 1));
  };
  for (int64_t c = first; c < chunks; ++c) {
    if (done.count(c)) {
      finish_write();
      report(c);
      continue;
    }
    const auto started = Clock::now();
    auto finish = start_chunk(c);
    // Commit after this chunk where it was slow to start, where the next chunk is stored already
    // (reports stay in order) and after the last.
    const bool commit_after = seconds_since(started) >= batching.commit_each_after_seconds || c + 1 == chunks ||
                              done.count(c + 1) > 0;
    finish_write();
    writing = writer.submit([&cache, &batch, &batch_began, &kept_before_failure, &batching, id = summary.run_id,
                             finish = std::move(finish), commit_after, seconds_since] {
      const auto began = Clock::now();
      try {
        auto record = finish();
        if (!batch) {
          batch = std::make_unique<cache::AnalysisCache::ChunkBatch>(cache);
          batch_began = began;
        }
        cache.put_chunk(id, record);
      } catch (...) {
        // The chunks put before this one are whole: keep them where SQLite still can.
        if (batch) try {
            batch->commit();
            kept_before_failure = true;
          } catch (...) {
          }
        batch.reset();
        throw;
      }
      if (!commit_after && seconds_since(batch_began) < batching.batch_seconds) return false;
      const auto committing = std::move(batch);
      committing->commit();  // an error drops the batch (its destructor rolls back)
      return true;
    });
    written = c;
  }
  finish_write();
  // A shard's run is complete only when the other shards' chunks are there too (a merge).
  if (shard.whole() || static_cast<int64_t>(cache.chunk_indices(summary.run_id).size()) == info.chunk_count())
    cache.complete_run(summary.run_id);
  summary.seconds = seconds_since(start);
  return summary;
}

}  // namespace mumoe::analysis
