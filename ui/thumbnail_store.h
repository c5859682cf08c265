// ThumbnailStore: the gallery's images, fetched lazily and kept with bounded memory. Pictures are
// keyed by thumbnailKey (below): a sample index, or a ViT block's tile of a sample and a patch.
//
// Two levels: the samples' source images (QImage, 8-bit, small) in an LRU QCache bounded by
// bytes, and the scaled, ready-to-paint pixmaps in QPixmapCache (the process-wide LRU, keyed by
// sample, size and this store's generation). A miss returns a null pixmap and asks for the image
// once through imagesWanted() (the main window connects it to SessionController::requestImages);
// insert() brings the answer and imagesArrived() tells the gallery model which rows to repaint.
// GUI thread only.
#pragma once

#include <QCache>
#include <QHash>
#include <QImage>
#include <QObject>
#include <QPixmap>
#include <QSet>
#include <QVector>

#include <utility>

namespace mumoe::ui {

class ThumbnailStore : public QObject {
  Q_OBJECT

 public:
  /// `maxSourceBytes` bounds the source images kept (default 64 MiB).
  explicit ThumbnailStore(qint64 maxSourceBytes = 64LL << 20, QObject* parent = nullptr);

  /// The sample's image scaled to fit `side` × `side` (pixelated when enlarging small images);
  /// null while it is being fetched (then asked for once).
  QPixmap thumbnail(qint64 sample, int side);
  /// The source image, or null (then asked for once).
  QImage image(qint64 sample);
  bool contains(qint64 sample) const { return sources_.contains(sample); }

  /// Forgets everything (a new session): later requests ask again.
  void clear();
  /// Whether images exist at all for this session (false: nothing is ever asked).
  void setAvailable(bool available) { available_ = available; }
  bool available() const { return available_; }

  /// Memory held by source images, in KiB (at most maxSourceBytes / 1024).
  qint64 sourceKiB() const { return sources_.totalCost(); }
  int pendingCount() const { return static_cast<int>(asked_.size()); }

 public Q_SLOTS:
  void insert(const QHash<qint64, QImage>& images);

 Q_SIGNALS:
  void imagesWanted(const QVector<qint64>& samples);
  void imagesArrived(const QVector<qint64>& samples);

 private:
  void ask(qint64 sample);

  QCache<qint64, QImage> sources_;
  QSet<qint64> asked_;
  QVector<qint64> toAsk_;
  bool askScheduled_ = false;
  bool available_ = true;
  quint64 generation_ = 0;
};

/// The store's key of a picture. A whole sample's image is keyed by its sample index; a ViT
/// block's gallery tile — the image with one patch outlined — by a negative key of its own, since
/// one image appears with different patches in different experts' galleries.
qint64 thumbnailKey(qint64 sample, qint64 patch = -1);
/// Inverse of thumbnailKey: {sample, patch}, patch −1 for a whole-sample key.
std::pair<qint64, qint64> thumbnailSource(qint64 key);

/// Scales a small image up by an integer factor without smoothing (crisp pixels) and a large one
/// down smoothly, to fit side × side.
QImage scaleForThumbnail(const QImage& image, int side);

}  // namespace mumoe::ui
