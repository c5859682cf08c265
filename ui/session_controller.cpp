#include "session_controller.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <exception>

#include "analysis/analysis_session.h"
#include "analysis/contact_sheet.h"
#include "analysis/vit_block_analysis.h"
#include "io/errors.h"
#include "thumbnail_store.h"

namespace mumoe::ui {

using analysis::AnalysisSession;
using analysis::VitBlockAnalysis;

/// The session, touched on the worker thread only (jobs run one at a time, in order): a head's
/// AnalysisSession, or a ViT block's VitBlockAnalysis.
struct SessionController::Slot {
  std::unique_ptr<AnalysisSession> session;
  std::unique_ptr<VitBlockAnalysis> block;
  AnalysisSession& get() {
    if (!session) throw UsageError("no analysis session is open");
    return *session;
  }
  void reset() {
    session.reset();
    block.reset();
  }
};

namespace {

QStringList toQStringList(const std::vector<std::string>& names) {
  QStringList out;
  for (const auto& n : names) out << QString::fromStdString(n);
  return out;
}

AnswerTiming timing(bool fromCache, double coreSeconds, double latencyMs) {
  return AnswerTiming{fromCache, coreSeconds, latencyMs};
}

double secondsSince(const QElapsedTimer& clock) { return static_cast<double>(clock.nsecsElapsed()) / 1e9; }

void checkBlockMode(const VitBlockAnalysis& block, qint64 mode) {
  if (mode != 0) throw UsageError(block.layer_name() + " has one expert mode (0), not " + std::to_string(mode));
}

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

SessionController::SessionController(QObject* parent) : QObject(parent), slot_(std::make_shared<Slot>()) {
  pool_.setMaxThreadCount(1);  // the session is not thread-safe: one job at a time, in order
  pool_.setExpiryTimeout(-1);
}

SessionController::~SessionController() {
  cancel();
  pool_.waitForDone();
  // The session dies here, on the GUI thread, after the worker let go of it.
  slot_->reset();
}

void SessionController::submit(const QString& task, Job job, JobFlags flags) {
  if (flags.needsSession && !hasSession_) {
    Q_EMIT jobFailed(task, tr("No data set is analysed yet: open a model and a data set first."));
    return;
  }
  const int epoch = cancelEpoch_.load();
  const int generation = generation_;
  ++pending_;
  if (flags.visible && ++visiblePending_ == 1) Q_EMIT busyChanged(true);
  auto slot = slot_;
  QElapsedTimer clock;
  clock.start();
  auto run = [this, slot, job = std::move(job), task, epoch, generation, flags, clock] {
    const std::function<bool()> cancelled = [this, epoch] { return cancelEpoch_.load() != epoch; };
    Deliver deliver;
    try {
      if (flags.cancellable && cancelled()) throw Cancelled();
      deliver = job(*slot, cancelled);
    } catch (const Cancelled&) {
      deliver = [this, task](double) { Q_EMIT jobCancelled(task); };
    } catch (const std::exception& e) {
      const QString message = QString::fromUtf8(e.what());
      deliver = [this, task, message](double) { Q_EMIT jobFailed(task, message); };
    } catch (...) {
      deliver = [this, task](double) { Q_EMIT jobFailed(task, tr("unknown error")); };
    }
    QMetaObject::invokeMethod(
        this,
        [this, deliver = std::move(deliver), generation, flags, clock] {
          if (generation == generation_ && deliver) deliver(static_cast<double>(clock.nsecsElapsed()) / 1e6);
          jobDone(flags.visible);
        },
        Qt::QueuedConnection);
  };
  (void)QtConcurrent::run(&pool_, std::move(run));
}

void SessionController::jobDone(bool visible) {
  --pending_;
  if (visible && --visiblePending_ == 0) Q_EMIT busyChanged(false);
}

void SessionController::postProgress(const QString& task, qint64 done, qint64 total, double eta) {
  QMetaObject::invokeMethod(
      this, [this, task, done, total, eta] { Q_EMIT progress(task, done, total, eta); }, Qt::QueuedConnection);
}

void SessionController::close() {
  cancel();
  ++generation_;  // answers of the old session's jobs still running are dropped
  hasSession_ = false;
  info_ = SessionInfo{};
  imageErrorReported_ = false;
  imagesAsked_.clear();
  imageQueue_.clear();
  submit(
      QStringLiteral("close"), [](Slot& slot, const std::function<bool()>&) -> Deliver {
        slot.reset();
        return {};
      },
      JobFlags{false, false, false});
}

void SessionController::open(const QString& modelPath, const QString& dataSpec, const QString& layer) {
  cancel();  // what runs belongs to the old session
  ++generation_;
  hasSession_ = false;
  info_ = SessionInfo{};
  imageErrorReported_ = false;
  imagesAsked_.clear();
  imageQueue_.clear();
  analysis::SessionOptions options;
  options.model_path = modelPath.toStdString();
  options.data_spec = dataSpec.toStdString();
  options.layer = layer.toStdString();
  options.cache_path = cachePath_.toStdString();
  submit(
      QStringLiteral("open"),
      [this, options](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
        QElapsedTimer clock;
        clock.start();
        slot.reset();
        SessionInfo info;
        info.modelPath = QString::fromStdString(options.model_path);
        info.dataSpec = QString::fromStdString(options.data_spec);
        if (analysis::names_vit_block(options)) {
          // A ViT block's μMoE MLP: not cached, so its baseline pass (every image through the
          // ViT) runs at every open.
          // Where the kept streams of every image would not fit (4 GB), the first images that do.
          analysis::VitBlockOptions blockOptions;
          blockOptions.fit_in_memory = true;
          auto block = VitBlockAnalysis::open(options, blockOptions, [&](int64_t done, int64_t total) {
            postProgress(QStringLiteral("block"), done, total, -1);
            return !cancelled();
          });
          info.extractedNow = true;
          info.layer = QString::fromStdString(block->layer_name());
          info.classNames = toQStringList(block->class_names());
          info.expertDims << block->experts();
          info.samples = block->samples();
          if (block->images_available() > block->samples()) info.samplesAvailable = block->images_available();
          info.hasImages = true;
          info.accuracy = block->accuracy_before();
          info.patchGrid = block->grid();
          info.sweepIsCheap = block->class_tokens_only();
          slot.block = std::move(block);
        } else {
          analysis::ExtractionSummary extraction;
          auto session = AnalysisSession::open_extracted(
              options,
              [&](const analysis::ExtractionProgress& p) {
                postProgress(QStringLiteral("extract"), p.samples_done, p.samples_total, p.eta_seconds);
                return !cancelled();
              },
              &extraction);
          info.extractedNow = extraction.chunks_computed > 0;
          info.layer = QString::fromStdString(session->layer_name());
          info.cachePath = QString::fromStdString(session->cache_path());
          info.classNames = toQStringList(session->class_names());
          for (auto d : session->expert_dims()) info.expertDims << d;
          info.samples = session->sample_count();
          info.hasImages = session->has_gallery_images();
          info.accuracy = session->accuracy();
          info.cacheNote = QString::fromStdString(cache::opening_note(session->cache_report()));
          if (!info.cacheNote.isEmpty()) info.cacheNote[0] = info.cacheNote[0].toUpper();
          slot.session = std::move(session);
        }
        info.openSeconds = secondsSince(clock);
        return [this, info](double) {
          info_ = info;
          hasSession_ = true;
          Q_EMIT sessionOpened(info_);
        };
      },
      JobFlags{false, true, true});
}

void SessionController::requestStatistics(qint64 mode, double threshold) {
  submit(QStringLiteral("statistics"), [this, mode, threshold](Slot& slot, const std::function<bool()>&) -> Deliver {
    if (slot.block) {
      checkBlockMode(*slot.block, mode);
      QElapsedTimer clock;
      clock.start();
      auto statistics = slot.block->statistics(threshold);
      return [this, statistics = std::move(statistics), seconds = secondsSince(clock)](double ms) {
        Q_EMIT statisticsReady(statistics, timing(false, seconds, ms));
      };
    }
    auto answer = slot.get().statistics(mode, threshold);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT statisticsReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestGallery(const analysis::GalleryRequest& request) {
  submit(QStringLiteral("gallery"), [this, request](Slot& slot, const std::function<bool()>&) -> Deliver {
    if (slot.block) {
      QElapsedTimer clock;
      clock.start();
      auto gallery = slot.block->gallery(request);
      return [this, gallery = std::move(gallery), seconds = secondsSince(clock)](double ms) {
        Q_EMIT galleryReady(gallery, timing(false, seconds, ms));
      };
    }
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
  submit(QStringLiteral("ablation"), [this, mode, list](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
    if (slot.block) {
      checkBlockMode(*slot.block, mode);
      QElapsedTimer clock;
      clock.start();
      auto outcome = slot.block->ablate(list, analysis::AblationMethod::Sparse, cancelled);
      return [this, outcome = std::move(outcome), seconds = secondsSince(clock)](double ms) {
        Q_EMIT ablationReady(outcome, timing(false, seconds, ms));
      };
    }
    auto answer = slot.get().ablate(mode, list);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT ablationReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestSweep(qint64 mode) {
  submit(QStringLiteral("sweep"), [this, mode](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
    const auto progress = [&](int64_t done, int64_t total) {
      postProgress(QStringLiteral("sweep"), done, total, -1);
      return !cancelled();
    };
    if (slot.block) {
      checkBlockMode(*slot.block, mode);
      QElapsedTimer clock;
      clock.start();
      auto sweep = slot.block->sweep(analysis::AblationMethod::Sparse, progress);
      return [this, sweep = std::move(sweep), seconds = secondsSince(clock)](double ms) {
        Q_EMIT sweepReady(sweep, timing(false, seconds, ms));
      };
    }
    auto answer = slot.get().sweep(mode, analysis::AblationMethod::Sparse, progress);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT sweepReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestCoefficients(qint64 mode, qint64 sample) {
  submit(
      QStringLiteral("coefficients"),
      [this, mode, sample](Slot& slot, const std::function<bool()>&) -> Deliver {
        // A ViT block's images count by their strongest patch: its image run has one mode.
        const auto& run = slot.block ? slot.block->image_run() : slot.get().run();
        const auto row = analysis::dense_coefficients(run, mode, sample);
        const QVector<double> dense(row.begin(), row.end());
        return [this, mode, sample, dense](double) { Q_EMIT coefficientsReady(mode, sample, dense); };
      },
      JobFlags{true, false, false});
}

void SessionController::exportGallery(const QString& path, const analysis::Gallery& gallery) {
  submit(
      QStringLiteral("export gallery"),
      [this, path, gallery](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
        std::function<analysis::SampleImage(const analysis::GalleryItem&)> imageOf;
        std::vector<std::string> classNames;
        std::string source;
        if (slot.block) {
          imageOf = [block = slot.block.get()](const analysis::GalleryItem& item) { return block->image(item.sample, item.patch); };
          classNames = slot.block->class_names();
          source = slot.block->layer_name() + ", strongest patch per image";
        } else {
          auto& session = slot.get();
          if (!session.has_gallery_images())
            throw UsageError(session.options().data_spec + " holds no images to draw a contact sheet from");
          imageOf = [&session](const analysis::GalleryItem& item) { return session.sample_image(item.sample); };
          classNames = session.class_names();
          source = session.options().data_spec;
        }
        const auto total = static_cast<qint64>(gallery.items.size());
        qint64 drawn = 0;
        analysis::write_gallery_sheet(  // atomic; names the path on failure
            path.toStdString(), gallery, classNames,
            [&](const analysis::GalleryItem& item) {
              if (++drawn % 256 == 0) postProgress(QStringLiteral("export gallery"), drawn, total, -1);
              return imageOf(item);
            },
            source, cancelled);
        const int count = static_cast<int>(total);
        return [this, path, count](double) { Q_EMIT galleryExported(path, count); };
      },
      JobFlags{true, true, true});
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
      QStringLiteral("images"),
      [this, batch](Slot& slot, const std::function<bool()>&) -> Deliver {
        QHash<qint64, QImage> images;
        QString error;
        for (auto key : batch) {
          // An unreadable image becomes a null one (the store asks again on a later paint)
          // rather than failing the batch, whose other samples would never be asked again.
          try {
            const auto [sample, patch] = thumbnailSource(key);
            const auto image = slot.block ? slot.block->image(sample, patch) : slot.get().sample_image(sample);
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
            Q_EMIT jobFailed(QStringLiteral("images"), error);
          }
        };
      },
      JobFlags{true, false, false});
}

void SessionController::cancel() { ++cancelEpoch_; }

void SessionController::waitForIdle() {
  while (pending_ > 0 || imageFlushScheduled_) {
    pool_.waitForDone();
    QCoreApplication::sendPostedEvents(this);
    QCoreApplication::processEvents();
  }
}

}  // namespace mumoe::ui
