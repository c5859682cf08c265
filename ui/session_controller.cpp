#include "session_controller.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>

#include <algorithm>
#include <exception>

#include "analysis/analysis_session.h"
#include "analysis/expert_report.h"
#include "analysis/layer_analysis.h"
#include "analysis/vit_block_analysis.h"
#include "editing/export_request.h"
#include "format.h"
#include "io/errors.h"
#include "session_slot.h"
#include "thumbnail_store.h"
#include "worker_queue.h"

namespace mumoe::ui {


/// The layer analysis, touched on the worker thread only (jobs run one at a time, in order):
/// a head's cached session or a backbone layer's, behind one interface (analysis/layer_analysis.h).
struct SessionController::Slot : SessionSlot<analysis::LayerAnalysis> {
  Slot() : SessionSlot("analysis session") {}
};

namespace {

AnswerTiming timing(bool fromCache, double coreSeconds, double latencyMs) {
  return AnswerTiming{fromCache, coreSeconds, latencyMs};
}

double secondsSince(const QElapsedTimer& clock) { return static_cast<double>(clock.nsecsElapsed()) / 1e9; }

}  // namespace

QImage toQImage(int64_t height, int64_t width, int64_t channels, const uint8_t* pixels) {
  if (height <= 0 || width <= 0 || (channels != 1 && channels != 3) || !pixels) return {};
  const auto format = channels == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888;
  QImage image(static_cast<int>(width), static_cast<int>(height), format);
  const auto rowBytes = static_cast<size_t>(width * channels);
  for (int64_t y = 0; y < height; ++y)
    std::copy_n(pixels + y * static_cast<int64_t>(rowBytes), rowBytes, image.scanLine(static_cast<int>(y)));
  return image;
}

SessionController::SessionController(QObject* parent)
    : QObject(parent), worker_(new WorkerQueue(this)), slot_(std::make_shared<Slot>()) {
  connect(worker_, &WorkerQueue::progress, this, &SessionController::progress);
  connect(worker_, &WorkerQueue::busyChanged, this, &SessionController::busyChanged);
}

SessionController::~SessionController() {
  worker_->shutdown();
  // The session dies here, on the GUI thread, after the worker let go of it.
  slot_->reset();
}

bool SessionController::isBusy() const { return worker_->isBusy(); }

void SessionController::submit(const QString& task, Job job, JobFlags flags) {
  if (!hasSession_) {
    Q_EMIT jobFailed(task, tr("No data set is analysed yet: open a model and a data set first."));
    return;
  }
  WorkerQueue::Handlers handlers;
  handlers.failed = [this, task](const QString& message) { Q_EMIT jobFailed(task, message); };
  handlers.cancelled = [this, task] { Q_EMIT jobCancelled(task); };
  worker_->submit(
      task, [slot = slot_, job = std::move(job)](const std::function<bool()>& cancelled) { return job(*slot, cancelled); },
      flags.cancellable, flags.visible, std::move(handlers));
}

void SessionController::forgetSession() {
  cancel();
  worker_->invalidate();  // answers of the old session's jobs still running are dropped
  hasSession_ = false;
  info_ = SessionInfo{};
  imageErrorReported_ = false;
  imagesAsked_.clear();
  imageQueue_.clear();
}

void SessionController::close() {
  forgetSession();
  worker_->submit(
      tr("Closing"),
      [slot = slot_](const std::function<bool()>&) -> WorkerQueue::Deliver {
        slot->reset();
        return {};
      },
      false, false);
}

void SessionController::open(const QString& modelPath, const QString& dataSpec, const QString& layer) {
  forgetSession();  // what runs belongs to the old session
  analysis::SessionOptions options;
  options.model_path = modelPath.toStdString();
  options.data_spec = dataSpec.toStdString();
  options.layer = layer.toStdString();
  options.cache_path = cachePath_.toStdString();
  submitOpen(options);
}

void SessionController::submitOpen(const analysis::SessionOptions& options) {
  WorkerQueue::Handlers handlers;
  handlers.failed = [this](const QString& message) { Q_EMIT openFailed(message); };
  handlers.cancelled = [this] { Q_EMIT openCancelled(); };
  worker_->submit(
      tr("Opening"),
      [this, options, slot = slot_](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
        QElapsedTimer clock;
        clock.start();
        slot->reset();
        SessionInfo info;
        info.modelPath = QString::fromStdString(options.model_path);
        info.dataSpec = QString::fromStdString(options.data_spec);
        // A backbone layer's baseline pass (every image through the backbone) runs at every open
        // (only its sweeps are cached); where the kept streams of every image would not fit
        // (4 GB), the first images that do.
        analysis::LayerAnalysisOptions layerOptions;
        layerOptions.fit_in_memory = true;
        analysis::ExtractionSummary extraction;
        const QString task = tr("Reading samples");
        auto layer = analysis::LayerAnalysis::open(
            options, layerOptions,
            [&](const analysis::ExtractionProgress& p) {
              worker_->postProgress(task, p.samples_done, p.samples_total, p.eta_seconds);
              return !cancelled();
            },
            {}, &extraction);
        info.layer = QString::fromStdString(layer->layer_name());
        info.classNames = toQStringList(layer->class_names());
        info.multilabel = layer->multilabel();
        info.attributeNames = toQStringList(layer->attribute_names());
        for (auto d : layer->expert_dims()) info.expertDims << d;
        info.samples = layer->samples();
        info.accuracy = layer->accuracy();
        // Whatever the layer's kind (a head, or one inside a ViT or Mixer): its answers say it.
        const auto rows = layer->sample_rows();
        // A backbone layer's baseline pass runs at every open; a head's extraction is cached.
        info.extractedNow = !layer->cached() || extraction.chunks_computed > 0;
        if (layer->samples_available() > layer->samples()) info.samplesAvailable = layer->samples_available();
        info.hasImages = layer->has_images();
        info.patchGrid = rows.patch_grid;
        info.rowsArePatches = rows.rows_are_patches;
        info.sweepIsCheap = layer->sweep_is_cheap(0);  // a stored (e.g. merged) sweep shows at once
        info.cachePath = QString::fromStdString(layer->cache_path());
        info.cacheNote = QString::fromStdString(layer->cache_note());
        if (!info.cacheNote.isEmpty()) info.cacheNote[0] = info.cacheNote[0].toUpper();
        slot->open(std::move(layer));
        info.openSeconds = secondsSince(clock);
        return [this, info](double) {
          info_ = info;
          hasSession_ = true;
          Q_EMIT sessionOpened(info_);
        };
      },
      true, true, std::move(handlers));
}

void SessionController::requestStatistics(qint64 mode, double threshold) {
  submit(tr("Statistics"), [this, mode, threshold](Slot& slot, const std::function<bool()>&) -> Deliver {
    auto answer = slot.get().statistics(mode, threshold);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT statisticsReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestGallery(const analysis::GalleryRequest& request) {
  submit(tr("Gallery"), [this, request](Slot& slot, const std::function<bool()>&) -> Deliver {
    auto answer = slot.get().gallery(request);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT galleryReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestAblation(qint64 mode, const QVector<qint64>& experts) {
  std::vector<int64_t> list(experts.begin(), experts.end());
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  submit(tr("Ablation"), [this, mode, list](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
    auto answer = slot.get().ablate(mode, list, analysis::AblationMethod::Sparse, cancelled);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT ablationReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestSweep(qint64 mode) {
  submit(tr("Sweep"), [this, mode](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
    const QString task = tr("Sweep");
    const auto progress = [&](int64_t done, int64_t total) {
      worker_->postProgress(task, done, total, -1);
      return !cancelled();
    };
    auto answer = slot.get().sweep(mode, analysis::AblationMethod::Sparse, progress);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT sweepReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestCoefficients(qint64 mode, qint64 sample) {
  submit(
      tr("Coefficients"),
      [this, mode, sample](Slot& slot, const std::function<bool()>&) -> Deliver {
        // A backbone layer's images count by their strongest row: its run has one mode.
        const auto row = analysis::dense_coefficients(slot.get().run(), mode, sample);
        const QVector<double> dense(row.begin(), row.end());
        return [this, mode, sample, dense](double) { Q_EMIT coefficientsReady(mode, sample, dense); };
      },
      JobFlags{false, false});
}

void SessionController::exportGallery(const QString& path, const analysis::Gallery& gallery) {
  submit(
      tr("Exporting the gallery"),
      [this, path, gallery](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
        const auto total = static_cast<qint64>(gallery.items.size());
        const QString task = tr("Exporting the gallery");
        const analysis::SweepCallback progress = [&](int64_t drawn, int64_t all) {
          if (drawn % 256 == 0) worker_->postProgress(task, drawn, all, -1);
          return !cancelled();
        };
        // The CLI's drawing, title included (atomic; names the path on failure).
        slot.get().write_gallery_sheet(path.toStdString(), gallery, progress);
        const int count = static_cast<int>(total);
        return [this, path, count](double) { Q_EMIT galleryExported(path, count); };
      },
      JobFlags{true, true});
}

void SessionController::exportReport(const QString& path, const QString& experts) {
  const QString task = tr("Writing the report");
  submit(
      task,
      [this, path, experts, task, model = info_.modelPath, data = info_.dataSpec, cache = cachePath_.isEmpty() ? cache::default_cache_path() : cachePath_.toStdString()](
          Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
        analysis::ReportRequest request;
        request.model_path = model.toStdString();
        request.data_spec = data.toStdString();
        request.experts = experts.toStdString();
        request.app_version = MUMOE_VERSION;
        const auto report = analysis::make_expert_report(slot.get(), request, [&](int64_t done, int64_t total) {
          worker_->postProgress(task, done, total, -1);
          return !cancelled();
        });
        const auto bytes = static_cast<qint64>(analysis::write_report(
            report, path.toStdString(), {{request.model_path, "the model"}, {cache, "the analysis cache"}}));
        const int sections = static_cast<int>(report.details.size());
        return [this, path, sections, bytes](double) { Q_EMIT reportExported(path, sections, bytes); };
      },
      JobFlags{true, true});
}

void SessionController::exportWithoutExperts(const QString& path, const QVector<qint64>& experts) {
  if (!hasSession_ || experts.isEmpty()) return;
  const QString task = tr("Export model");
  submit(
      task,
      [this, path, model = info_.modelPath, data = info_.dataSpec, layer = info_.layer,
       removed = std::vector<int64_t>(experts.begin(), experts.end())](Slot&, const std::function<bool()>&) -> Deliver {
        if (QFileInfo(path) == QFileInfo(model))
          throw UsageError(path.toStdString() + " is the open model: choose another file to write the model to");
        editing::ExportRequest request;
        request.output = path.toStdString();
        request.overwrite = true;  // the file dialog asked before replacing a file
        const auto report = editing::export_model_without_experts(
            model.toStdString(), {editing::ExpertRemoval{layer.toStdString(), removed}}, data.toStdString(), request);
        QStringList numbers;
        for (const auto n : report.removed.front().experts) numbers << QString::number(n);
        const QString summary = tr("%1 layout; removed %2 expert(s) %3; max |difference| %4 on %5 samples")
                                    .arg(QString::fromStdString(editing::to_string(report.layout)), layer,
                                         numbers.join(QLatin1Char(',')))
                                    .arg(report.max_abs_difference)
                                    .arg(report.verified_samples);
        return [this, path, summary](double) { Q_EMIT modelExported(path, summary); };
      },
      JobFlags{false, true});
}

void SessionController::requestImages(const QVector<qint64>& samples) {
  if (!hasSession_ || !info_.hasImages) return;
  for (auto s : samples) {
    if (imagesAsked_.contains(s)) continue;
    imagesAsked_.insert(s, true);
    imageQueue_ << s;
  }
  if (!imageQueue_.isEmpty() && !imageFlushScheduled_) {
    imageFlushScheduled_ = true;
    QTimer::singleShot(0, this, [this] { flushImageRequests(); });
  }
}

void SessionController::flushImageRequests() {
  imageFlushScheduled_ = false;
  if (imageQueue_.isEmpty() || !hasSession_) return;
  const QVector<qint64> batch = std::exchange(imageQueue_, {});
  submit(
      tr("Images"),
      [this, batch](Slot& slot, const std::function<bool()>&) -> Deliver {
        QHash<qint64, QImage> images;
        QString error;
        for (auto key : batch) {
          // An unreadable image becomes a null one (the store asks again on a later paint)
          // rather than failing the batch, whose other samples would never be asked again.
          try {
            const auto [sample, patch] = thumbnailSource(key);
            const auto image = slot.get().image(sample, patch);
            images.insert(key, toQImage(image.height, image.width, image.channels, image.pixels.data()));
          } catch (const std::exception& e) {
            images.insert(key, QImage());
            if (error.isEmpty()) error = QString::fromUtf8(e.what());
          }
        }
        return [this, images, error](double) {
          for (auto it = images.cbegin(); it != images.cend(); ++it) imagesAsked_.remove(it.key());
          Q_EMIT imagesReady(images);
          if (!error.isEmpty() && !imageErrorReported_) {
            imageErrorReported_ = true;  // once per session, not once per painted page
            Q_EMIT jobFailed(tr("Images"), error);
          }
        };
      },
      JobFlags{false, false});
}

void SessionController::cancel() { worker_->cancel(); }

void SessionController::waitForIdle() {
  while (worker_->pending() > 0 || imageFlushScheduled_) {
    worker_->waitForIdle();
    QCoreApplication::sendPostedEvents(this);
    QCoreApplication::processEvents();
  }
}

}  // namespace mumoe::ui
