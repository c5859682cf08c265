// SessionController: the one owner of the analysis session (core/analysis/analysis_session.h)
// in the GUI: it turns the Experts and Ablation pages' requests into jobs on its WorkerQueue
// (the GUI's one job runner, worker_queue.h) and announces their typed answers.
//
// Threads: every call into the AnalysisSession runs on the queue's worker thread, so the
// session — which is not thread-safe — is only ever touched by one thread at a time, and jobs
// run in the order they were asked for. Answers come back to the GUI thread and are announced
// by the signals below; every public method returns at once.
//
// Cancel: cancel() stops the running and the queued jobs (as does the main window's JobMonitor,
// which tracks worker()). Long jobs (opening with extraction, the sweep) poll the cancel flag in
// the core's progress callbacks, which then throw mumoe::Cancelled. Opening another model also
// cancels what runs.
//
// Staleness: opening or closing invalidates the queue; answers of a session that was replaced
// in the meantime are dropped, so a view never shows numbers of the wrong model.
//
// Torch-free (the core's public analysis headers are plain C++).
#pragma once

#include <QHash>
#include <QImage>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>

#include <functional>
#include <memory>

#include "analysis/ablation_results.h"
#include "analysis/expert_statistics.h"
#include "analysis/gallery.h"

namespace mumoe::analysis {
class AnalysisSession;
struct SessionOptions;
class VitBlockAnalysis;
}

namespace mumoe::ui {

class WorkerQueue;

/// What the GUI knows about an open session (copied out of the session once, on the worker).
struct SessionInfo {
  QString modelPath;
  QString dataSpec;
  QString layer;
  QString cachePath;
  QStringList classNames;
  QVector<qint64> expertDims;
  qint64 samples = 0;
  /// The data's samples when fewer were analysed (a ViT block keeps the first images whose
  /// streams fit in memory); 0 when every sample was.
  qint64 samplesAvailable = 0;
  bool hasImages = false;
  bool extractedNow = false;       ///< false: the run was already in the cache
  double openSeconds = 0;          ///< open + extraction
  analysis::ClassAccuracy accuracy;  ///< the unablated model
  QString cacheNote;               ///< non-empty when an unusable cache file was set aside
  /// A ViT block's μMoE MLP (analysis::VitBlockAnalysis, not cached): the side of its images'
  /// patch grid. Its samples are images, each counted by its strongest patch for an expert;
  /// gallery tiles outline that patch. 0 for a head's session.
  qint64 patchGrid = 0;
  /// The sweep takes about a second (LayerAnalysis::sweep_is_cheap: a head's; a ViT block's when
  /// it is stored — asked before, or merged from sweep shards — or the last block of a class-token
  /// ViT): the window runs it at once. Otherwise (an earlier ViT block re-runs the blocks after
  /// it: minutes) it waits for Run Sweep.
  bool sweepIsCheap = true;
  /// A backbone layer whose coefficients are per patch (false: a Mixer's token mixing, per channel).
  bool rowsArePatches = true;
  /// A multi-label model's head (LayerAnalysis::multilabel): classNames are its outputs, accuracy
  /// and ablation are per output, gallery labels are output bitmasks (analysis::label_text).
  bool multilabel = false;
  /// The data's binary attributes, which a gallery's subpopulation filter may name.
  QStringList attributeNames;
};

/// How an answer was obtained: from the cache or computed, the core's time, and the time from
/// the request to the answer arriving on the GUI thread (what a user waits).
struct AnswerTiming {
  bool fromCache = false;
  double coreSeconds = 0;
  double latencyMs = 0;
};

class SessionController : public QObject {
  Q_OBJECT

 public:
  explicit SessionController(QObject* parent = nullptr);
  /// Cancels and waits for the running job.
  ~SessionController() override;

  /// Cache file for every session opened from now on ("" = the core's default path, which
  /// honours $MUMOE_CACHE). Tests point it at a temporary file.
  void setCachePath(const QString& path) { cachePath_ = path; }
  QString cachePath() const { return cachePath_; }

  /// Opens model + data (+ layer, "" = the only μMoE layer) on the worker and extracts what the
  /// cache lacks, with progress. sessionOpened(), openFailed() or openCancelled() follows. A layer that
  /// names a ViT block's μMoE MLP ("blocks.L.mlp") opens a VitBlockAnalysis instead (its baseline
  /// pass reported, like an extraction, as "Reading samples"): every request below then answers
  /// for that block's experts.
  void open(const QString& modelPath, const QString& dataSpec, const QString& layer = {});
  bool hasSession() const { return hasSession_; }
  const SessionInfo& info() const { return info_; }
  /// Forgets the session (another kind of model is open): cancels its jobs, drops their
  /// answers, and releases the session and its arrays on the worker. Requests fail until open().
  void close();

  void requestStatistics(qint64 mode, double threshold = 0.5);
  void requestGallery(const analysis::GalleryRequest& request);
  void requestAblation(qint64 mode, const QVector<qint64>& experts);
  void requestSweep(qint64 mode);
  /// The full coefficient vector of one sample (dense, one entry per expert of `mode`).
  void requestCoefficients(qint64 mode, qint64 sample);
  /// Gallery images (8-bit gray or RGB) by ThumbnailStore key (thumbnailKey: a sample, or a ViT
  /// block's tile with a patch outlined). Requests made in one event-loop turn are batched into
  /// one job; a key already asked for and not yet answered is not asked twice.
  void requestImages(const QVector<qint64>& samples);

  /// Writes the whole gallery (every item, not only what is on screen) as a PNG contact sheet:
  /// the images with class label and coefficient overlaid, under a title. galleryExported() or
  /// jobFailed("export gallery", …) follows. Cancellable between images.
  void exportGallery(const QString& path, const analysis::Gallery& gallery);

  /// Writes the self-contained HTML report of the layer's experts (analysis/expert_report.h, the
  /// same as `mumoe report`): the table of every expert with its ablation, and a section for
  /// each of `experts` ("top-16", "all", "3,7,12"). reportExported() or jobFailed("export report",
  /// …) follows. Cancellable between experts.
  void exportReport(const QString& path, const QString& experts = QStringLiteral("top-16"));

  /// Writes the model with `experts` of the analysed layer removed for good (W_n := 0, what Ablate
  /// computes; editing/export_request.h), in the user's own layout when the model was opened from
  /// theirs, verified against the live ablation on the open data set. An existing file at `path`
  /// is replaced (the file dialog asked), never the open model. modelExported() or
  /// jobFailed("Export model", …) follows.
  void exportWithoutExperts(const QString& path, const QVector<qint64>& experts);

  /// Stops the running job and drops the queued ones.
  void cancel();
  bool isBusy() const;
  /// Blocks until every queued job has finished and its answer is delivered (tests, shutdown).
  void waitForIdle();
  /// The queue the session's jobs run on (for the JobMonitor: progress, busy state, cancel).
  WorkerQueue* worker() const { return worker_; }

 Q_SIGNALS:
  void sessionOpened(const mumoe::ui::SessionInfo& info);
  void statisticsReady(const mumoe::analysis::ModeStatistics& statistics, const mumoe::ui::AnswerTiming& timing);
  void galleryReady(const mumoe::analysis::Gallery& gallery, const mumoe::ui::AnswerTiming& timing);
  void ablationReady(const mumoe::analysis::AblationOutcome& outcome, const mumoe::ui::AnswerTiming& timing);
  void sweepReady(const mumoe::analysis::SweepOutcome& sweep, const mumoe::ui::AnswerTiming& timing);
  void coefficientsReady(qint64 mode, qint64 sample, const QVector<double>& coefficients);
  void imagesReady(const QHash<qint64, QImage>& images);
  void galleryExported(const QString& path, int images);
  void reportExported(const QString& path, int sections, qint64 bytes);
  /// `summary`: the layout, the experts removed and the verification ("source layout; removed
  /// head experts 3,7; max |difference| 0 on 256 samples").
  void modelExported(const QString& path, const QString& summary);
  /// Progress of a long job (`task` is its display name); etaSeconds < 0 when unknown. The same
  /// as worker()'s.
  void progress(const QString& task, qint64 done, qint64 total, double etaSeconds);
  void busyChanged(bool busy);
  /// Opening the session failed (the message names the file and the problem) or was cancelled.
  void openFailed(const QString& message);
  void openCancelled();
  /// Any other request failed or was cancelled (`task` is its display name: "Ablation", …).
  void jobFailed(const QString& task, const QString& message);
  void jobCancelled(const QString& task);

 private:
  struct Slot;
  /// Runs on the GUI thread with the request-to-answer latency in ms.
  using Deliver = std::function<void(double latencyMs)>;
  /// Runs on the worker; `cancelled` polls the cancel flag. Throws to fail the job.
  using Job = std::function<Deliver(Slot& slot, const std::function<bool()>& cancelled)>;
  struct JobFlags {
    bool cancellable = true;  ///< dropped by cancel() when still queued
    bool visible = true;      ///< counts for busyChanged (the progress bar)
  };
  /// A request to the open session: refused at once (jobFailed) when none is open.
  void submit(const QString& task, Job job, JobFlags flags);
  void submit(const QString& task, Job job) { submit(task, std::move(job), JobFlags{true, true}); }
  void submitOpen(const analysis::SessionOptions& options);
  void forgetSession();
  void flushImageRequests();

  WorkerQueue* worker_ = nullptr;
  std::shared_ptr<Slot> slot_;
  bool hasSession_ = false;
  bool imageErrorReported_ = false;
  SessionInfo info_;
  QString cachePath_;
  QVector<qint64> imageQueue_;
  QHash<qint64, bool> imagesAsked_;
  bool imageFlushScheduled_ = false;
};

/// Converts a core sample image to a QImage (Grayscale8 or RGB888); null for an empty one.
QImage toQImage(int64_t height, int64_t width, int64_t channels, const uint8_t* pixels);

}  // namespace mumoe::ui

Q_DECLARE_METATYPE(mumoe::ui::SessionInfo)
Q_DECLARE_METATYPE(mumoe::ui::AnswerTiming)
Q_DECLARE_METATYPE(mumoe::analysis::ModeStatistics)
Q_DECLARE_METATYPE(mumoe::analysis::Gallery)
Q_DECLARE_METATYPE(mumoe::analysis::AblationOutcome)
Q_DECLARE_METATYPE(mumoe::analysis::SweepOutcome)
