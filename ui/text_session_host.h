// TextSessionHost: the one TextAnalysisSession of the open GPT (core/analysis/
// text_analysis_session.h), shared by the Tokens and Steering pages, and the one WorkerQueue
// their jobs run on.
//
// Why one: a session holds the model and the layer's extracted arrays; two pages each opening
// their own on the same GPT held the model twice and ran two extractions of the same layer at
// once. Here jobs of both pages run one at a time on one worker, and each takes the session it
// needs from session(): the open one when it reads the same model, text, layer and cache, else
// the host closes it and opens that one (from the cache once the layer was extracted). The pages
// keep their jobs apart with the queue's topics (cancel(topic), invalidate(topic)): opening
// another layer on the Tokens page never cancels a steering generation.
//
// Lifetime: the owner (the main window, or a page constructed without a host) calls shutdown()
// before the pages whose jobs are queued are destroyed.
//
// Torch-free header.
#pragma once

#include <QObject>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace mumoe::analysis {
struct TextSessionOptions;
class TextAnalysisSession;
}  // namespace mumoe::analysis

namespace mumoe::ui {

class WorkerQueue;

class TextSessionHost : public QObject {
  Q_OBJECT

 public:
  explicit TextSessionHost(QObject* parent = nullptr);
  ~TextSessionHost() override;  ///< shuts the queue down (the session dies after its last job)

  /// The queue every job that uses the session runs on (the main window tracks it once).
  WorkerQueue* worker() const { return worker_; }

  /// Worker thread only (inside a job of worker()). The session of `options`: the open one when
  /// it reads the same model, text, layer (by name or by index) and cache; otherwise the open one
  /// is closed first (the two are never in memory together) and this one opened, extracting the
  /// layer if the cache lacks it: its progress is posted on worker() as "Extracting tokens", and
  /// `cancelled` (the job's) stops it. Throws what TextAnalysisSession::open_extracted throws.
  analysis::TextAnalysisSession& session(const analysis::TextSessionOptions& options,
                                         const std::function<bool()>& cancelled);
  /// Worker thread only: closes the session, freeing the model and its arrays (another kind of
  /// model is open now).
  void release();
  /// Cancels every job, drops every answer and waits for the worker (for an owner's destructor).
  void shutdown();
  /// How many sessions session() has opened so far (any thread; tests: a shared layer is opened once).
  int sessionsOpened() const { return opened_.load(); }

 private:
  WorkerQueue* worker_ = nullptr;
  /// Worker thread only. Its options() are those it was opened with, the layer as it was asked
  /// for (a name or an index).
  std::unique_ptr<analysis::TextAnalysisSession> session_;
  std::atomic<int> opened_{0};
};

}  // namespace mumoe::ui
