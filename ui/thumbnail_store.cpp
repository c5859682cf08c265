#include "thumbnail_store.h"

#include <QPixmapCache>
#include <QTimer>

#include <algorithm>
#include <atomic>

namespace mumoe::ui {
namespace {
std::atomic<quint64> nextGeneration{1};
}

QImage scaleForThumbnail(const QImage& image, int side) {
  if (image.isNull() || side <= 0) return {};
  const int longest = std::max(image.width(), image.height());
  if (longest <= side) {
    const int factor = std::max(1, side / longest);
    return image.scaled(image.width() * factor, image.height() * factor, Qt::KeepAspectRatio, Qt::FastTransformation);
  }
  return image.scaled(side, side, Qt::KeepAspectRatio, Qt::SmoothTransformation);
}

ThumbnailStore::ThumbnailStore(qint64 maxSourceBytes, QObject* parent)
    : QObject(parent), sources_(static_cast<int>(std::max<qint64>(1, maxSourceBytes / 1024))),
      generation_(nextGeneration++) {}

void ThumbnailStore::clear() {
  sources_.clear();
  asked_.clear();
  toAsk_.clear();
  generation_ = nextGeneration++;  // old pixmaps in QPixmapCache are never hit again and age out
}

QImage ThumbnailStore::image(qint64 sample) {
  if (const QImage* source = sources_.object(sample)) return *source;
  ask(sample);
  return {};
}

QPixmap ThumbnailStore::thumbnail(qint64 sample, int side) {
  const QString key = QStringLiteral("mumoe/%1/%2/%3").arg(generation_).arg(sample).arg(side);
  QPixmap pixmap;
  if (QPixmapCache::find(key, &pixmap)) return pixmap;
  const QImage source = image(sample);
  if (source.isNull()) return {};
  pixmap = QPixmap::fromImage(scaleForThumbnail(source, side));
  QPixmapCache::insert(key, pixmap);
  return pixmap;
}

void ThumbnailStore::ask(qint64 sample) {
  if (!available_ || asked_.contains(sample)) return;
  asked_.insert(sample);
  toAsk_ << sample;
  if (!askScheduled_) {
    askScheduled_ = true;
    // One request per event-loop turn: a painted page of thumbnails becomes one job.
    QTimer::singleShot(0, this, [this] {
      askScheduled_ = false;
      if (!toAsk_.isEmpty()) Q_EMIT imagesWanted(std::exchange(toAsk_, {}));
    });
  }
}

void ThumbnailStore::insert(const QHash<qint64, QImage>& images) {
  QVector<qint64> arrived;
  for (auto it = images.cbegin(); it != images.cend(); ++it) {
    asked_.remove(it.key());
    if (it.value().isNull()) continue;
    const auto cost = std::max<qint64>(1, it.value().sizeInBytes() / 1024);
    sources_.insert(it.key(), new QImage(it.value()), static_cast<int>(cost));
    arrived << it.key();
  }
  if (!arrived.isEmpty()) Q_EMIT imagesArrived(arrived);
}

namespace {
constexpr qint64 kPatchKeys = qint64{1} << 24;  // patches per image a tile key can tell apart
}

qint64 thumbnailKey(qint64 sample, qint64 patch) {
  // Samples are indices (≥ 0) and a ViT has far fewer than 2^24 patches; 2^39 samples would
  // overflow the code.
  Q_ASSERT(sample >= 0 && patch < kPatchKeys && sample < (qint64{1} << 39));
  return patch < 0 ? sample : -1 - (sample * kPatchKeys + patch);
}

std::pair<qint64, qint64> thumbnailSource(qint64 key) {
  if (key >= 0) return {key, -1};
  const qint64 code = -1 - key;
  return {code / kPatchKeys, code % kPatchKeys};
}

}  // namespace mumoe::ui
