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
  std::future<void> submit(std::function<void()> work) {
    std::packaged_task<void()> task(std::move(work));
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
      std::packaged_task<void()> task;
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
  std::packaged_task<void()> next_;  // valid while a task waits to run
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace

ExtractionSummary fill_chunked_run(cache::AnalysisCache& cache, const cache::RunKey& key, const cache::RunInfo& info,
                                   const std::function<cache::ChunkRecord(int64_t chunk)>& compute_chunk,
                                   const ExtractionCallback& progress) {
  return fill_chunked_run_in_two_stages(
      cache, key, info,
      [&](int64_t c) -> FinishChunk {
        // std::function needs a copyable callable: the record travels in a shared pointer.
        auto record = std::make_shared<cache::ChunkRecord>(compute_chunk(c));
        return [record] { return std::move(*record); };
      },
      progress);
}

ExtractionSummary fill_chunked_run_in_two_stages(cache::AnalysisCache& cache, const cache::RunKey& key,
                                                 const cache::RunInfo& info,
                                                 const std::function<FinishChunk(int64_t chunk)>& start_chunk,
                                                 const ExtractionCallback& progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  ExtractionSummary summary;
  summary.run_id = cache.begin_run(key, info);
  const auto present = cache.chunk_indices(summary.run_id);
  const std::set<int64_t> done(present.begin(), present.end());
  const int64_t chunks = info.chunk_count();
  summary.chunks_reused = static_cast<int64_t>(done.size());

  ExtractionProgress p;
  p.samples_total = info.sample_count;
  p.chunks_total = chunks;
  const auto report = [&](int64_t c) {  // chunk c and every one before it are stored
    p.chunks_done = c + 1;
    p.samples_done = std::min(info.sample_count, (c + 1) * info.chunk_size);
    p.elapsed_seconds = seconds_since_start();
    p.eta_seconds = summary.chunks_computed ? p.elapsed_seconds / summary.chunks_computed * (chunks - c - 1) : 0;
    if (progress && !progress(p)) throw Cancelled();
  };
  // A chunk is finished and its transaction written on a second thread while the next chunk
  // starts (the writes were ~15 % of a bare head's extraction). At most one write is in flight,
  // the cache is touched by one thread at a time, and a chunk is reported only once it is stored,
  // so cancelling or a failed write loses nothing already reported. A cancel is seen after the
  // chunk in hand is started (that chunk is then neither finished nor stored). Leaving by an
  // exception waits for the write (the writer thread's destructor); if the computation failed,
  // that error is the one reported and the write's own, if any, is dropped (its transaction
  // rolled back).
  std::future<void> writing;
  std::optional<int64_t> written;  // the chunk being written
  WriterThread writer;             // joined before this function returns or unwinds
  const auto finish_write = [&] {
    if (!written) return;
    writing.get();  // rethrows the write's error (a full disk: io/errors.h)
    ++summary.chunks_computed;
    const int64_t c = *written;
    written.reset();
    report(c);
  };
  for (int64_t c = 0; c < chunks; ++c) {
    if (done.count(c)) {
      finish_write();
      report(c);
      continue;
    }
    auto finish = start_chunk(c);
    finish_write();
    writing = writer.submit([&cache, id = summary.run_id, finish = std::move(finish)] { cache.put_chunk(id, finish()); });
    written = c;
  }
  finish_write();
  cache.complete_run(summary.run_id);
  summary.seconds = seconds_since_start();
  return summary;
}

}  // namespace mumoe::analysis
