#include "session_controller.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <exception>

#include "analysis/analysis_session.h"
#include "analysis/contact_sheet.h"
#include "io/errors.h"

namespace mumoe::ui {

using analysis::AnalysisSession;

/// The session, touched on the worker thread only (jobs run one at a time, in order).
struct SessionController::Slot {
  std::unique_ptr<AnalysisSession> session;
  AnalysisSession& get() {
    if (!session) throw UsageError("no analysis session is open");
    return *session;
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
  slot_->session.reset();
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
        slot.session.reset();
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
        slot.session.reset();
        auto session = AnalysisSession::open(options);
        SessionInfo info;
        info.extractedNow = !session->extracted();
        if (info.extractedNow) {
          postProgress(QStringLiteral("extract"), 0, session->sample_count(), -1);
          session->extract([&](const analysis::ExtractionProgress& p) {
            postProgress(QStringLiteral("extract"), p.samples_done, p.samples_total, p.eta_seconds);
            return !cancelled();
          });
        }
        info.modelPath = QString::fromStdString(options.model_path);
        info.dataSpec = QString::fromStdString(options.data_spec);
        info.layer = QString::fromStdString(session->layer_name());
        info.cachePath = QString::fromStdString(session->cache_path());
        info.classNames = toQStringList(session->class_names());
        for (auto d : session->expert_dims()) info.expertDims << d;
        info.samples = session->sample_count();
        info.hasImages = session->has_gallery_images();
        info.accuracy = session->accuracy();
        const auto& report = session->cache_report();
        if (report.set_aside)
          info.cacheNote = tr("The cache file was unusable (%1) and was moved to %2; a new one was started.")
                               .arg(QString::fromStdString(report.set_aside_reason),
                                    QString::fromStdString(report.set_aside_path));
        info.openSeconds = static_cast<double>(clock.nsecsElapsed()) / 1e9;
        slot.session = std::move(session);
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
    auto answer = slot.get().statistics(mode, threshold);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT statisticsReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestGallery(const analysis::GalleryRequest& request) {
  submit(QStringLiteral("gallery"), [this, request](Slot& slot, const std::function<bool()>&) -> Deliver {
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
  submit(QStringLiteral("ablation"), [this, mode, list](Slot& slot, const std::function<bool()>&) -> Deliver {
    auto answer = slot.get().ablate(mode, list);
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT ablationReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestSweep(qint64 mode) {
  submit(QStringLiteral("sweep"), [this, mode](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
    auto answer = slot.get().sweep(mode, analysis::AblationMethod::Sparse, [&](int64_t done, int64_t total) {
      postProgress(QStringLiteral("sweep"), done, total, -1);
      return !cancelled();
    });
    return [this, answer = std::move(answer)](double ms) {
      Q_EMIT sweepReady(answer.value, timing(answer.from_cache, answer.seconds, ms));
    };
  });
}

void SessionController::requestCoefficients(qint64 mode, qint64 sample) {
  submit(
      QStringLiteral("coefficients"),
      [this, mode, sample](Slot& slot, const std::function<bool()>&) -> Deliver {
        auto& session = slot.get();
        const auto& run = session.run();
        if (mode < 0 || mode >= run.modes() || sample < 0 || sample >= run.samples())
          throw UsageError("sample " + std::to_string(sample) + " of mode " + std::to_string(mode) + " does not exist");
        const auto& rows = run.coefficients[static_cast<size_t>(mode)];
        QVector<double> dense(static_cast<int>(run.info.expert_dims[static_cast<size_t>(mode)]), 0.0);
        for (auto k = rows.offsets[static_cast<size_t>(sample)]; k < rows.offsets[static_cast<size_t>(sample) + 1]; ++k)
          dense[rows.indices[static_cast<size_t>(k)]] = rows.values[static_cast<size_t>(k)];
        return [this, mode, sample, dense](double) { Q_EMIT coefficientsReady(mode, sample, dense); };
      },
      JobFlags{true, false, false});
}

void SessionController::exportGallery(const QString& path, const analysis::Gallery& gallery) {
  submit(
      QStringLiteral("export gallery"),
      [this, path, gallery](Slot& slot, const std::function<bool()>& cancelled) -> Deliver {
        auto& session = slot.get();
        if (!session.has_gallery_images())
          throw UsageError(session.options().data_spec + " holds no images to draw a contact sheet from");
        if (gallery.items.empty()) throw UsageError("the gallery is empty");
        const auto& names = session.class_names();
        std::vector<analysis::ContactSheetTile> tiles;
        tiles.reserve(gallery.items.size());
        const auto total = static_cast<qint64>(gallery.items.size());
        for (const auto& item : gallery.items) {
          if (cancelled()) throw Cancelled();
          const auto label = item.label >= 0 && static_cast<size_t>(item.label) < names.size()
                                 ? names[static_cast<size_t>(item.label)]
                                 : std::to_string(item.label);
          tiles.push_back({session.sample_image(item.sample), label,
                           QString::number(item.coefficient, 'f', 2).toStdString()});
          if (tiles.size() % 256 == 0) postProgress(QStringLiteral("export gallery"), static_cast<qint64>(tiles.size()), total, -1);
        }
        const auto& r = gallery.request;
        const std::string title =
            "expert " + std::to_string(r.expert) + " (mode " + std::to_string(r.mode) + "), " +
            (r.order == analysis::GalleryOrder::Top
                 ? "top " + std::to_string(tiles.size())
                 : std::to_string(tiles.size()) + " random with a >= " + QString::number(r.threshold, 'f', 2).toStdString()) +
            " of " + std::to_string(gallery.eligible) + " · " + session.options().data_spec;
        analysis::write_contact_sheet(path.toStdString(), title, tiles);  // atomic; names the path on failure
        const int count = static_cast<int>(tiles.size());
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
        auto& session = slot.get();
        QHash<qint64, QImage> images;
        QString error;
        for (auto s : batch) {
          // An unreadable image becomes a null one (the store asks again on a later paint)
          // rather than failing the batch, whose other samples would never be asked again.
          try {
            const auto image = session.sample_image(s);
            images.insert(s, toQImage(image.height, image.width, image.channels, image.pixels.data()));
          } catch (const std::exception& e) {
            images.insert(s, QImage());
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
