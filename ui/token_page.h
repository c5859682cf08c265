// TokenPage: the token view of a μMoE GPT (analysis/text_analysis_session.h, taken from the
// TextSessionHost it shares with the Steering page, on that host's worker thread): a layer
// picker, the experts of that MLP block (load, support, mean a_n), the selected expert's token
// gallery — each token drawn inside its context with the token highlighted (TokenGalleryModel +
// TokenContextDelegate, token_gallery_model.h), a seeded random draw among a_n ≥ threshold or
// the top-ranked tokens — and click-to-ablate (double-click an expert, or Ablate) with the
// next-token accuracy and loss before and after.
#pragma once

#include <QPointer>
#include <QWidget>

#include <functional>
#include <memory>

#include "analysis/lm_ablation_results.h"
#include "analysis/token_gallery.h"
#include "token_gallery_model.h"
#include "worker_queue.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListView;
class QPushButton;
class QTableWidget;
class QStackedWidget;

namespace mumoe::ui {

class NoteStack;
class TextSessionHost;

class TokenPage : public QWidget {
  Q_OBJECT

 public:
  /// `host`: the session and queue shared with the Steering page (the main window's); none = the
  /// page makes and owns its own.
  explicit TokenPage(TextSessionHost* host = nullptr, QWidget* parent = nullptr);
  /// Cancels the page's jobs (and, when it owns its host, waits for the worker).
  ~TokenPage() override;

  /// Opens `modelPath` (a μMoE GPT) on its validation split; `layers` are its μMoE layers.
  void open(const QString& modelPath, const QStringList& layers, const QString& cachePath = {});
  void showNote(const QString& html);
  /// The ablation line before any expert is ablated (and again after the layer changes).
  QString ablationHint() const;
  /// The text the open session reads ("fortunes:val", …); "" before one opened.
  QString dataIdentity() const { return dataIdentity_; }
  bool hasSession() const { return hasSession_; }
  void setErrorDialogsEnabled(bool enabled) { errorDialogs_ = enabled; }

  QComboBox* layerCombo() const { return layer_; }
  QTableWidget* expertTable() const { return experts_; }
  QListView* galleryView() const { return gallery_; }
  TokenGalleryModel* galleryModel() const { return model_; }
  QComboBox* orderCombo() const { return order_; }
  QLabel* ablationLabel() const { return ablation_; }
  /// The shared host's queue (the main window tracks it; tests wait on it).
  WorkerQueue* worker() const;
  qint64 currentExpert() const;
  void selectExpert(qint64 expert);
  void ablate(qint64 expert);
  const analysis::LmAblationReport* lastAblation() const { return hasAblation_ ? &ablationReport_ : nullptr; }
  /// File ▸ Export Report… on a GPT: the open block's report (`mumoe report GPT --layer L`,
  /// analysis::make_token_report of this page's session) written to `path` as a job with
  /// progress and cancel; reportExported() or failed().
  void exportReport(const QString& path, const QString& experts = QStringLiteral("top-16"));

 Q_SIGNALS:
  void opened();
  void galleryReady();
  void ablationReady();
  void reportExported(const QString& path, int sections, qint64 bytes);
  /// Any job failed (task = its display name); the page has shown the error where it belongs.
  void failed(const QString& task, const QString& message);
  /// Opening the layer (extraction included) failed: the page shows why instead of the view.
  void openFailed(const QString& message);
  /// The expert shown now (at opening: the most loaded one) of the GPT block `block` (its index
  /// among the GPT's blocks): the Steering page follows it.
  void expertSelected(int block, qint64 expert);

 private:
  void openLayer();
  /// The page's job endings: its topic, `failed` (then the failed() signal) and `cancelled`.
  WorkerQueue::Handlers endings(const QString& task, std::function<void(const QString&)> failed = {},
                                std::function<void()> cancelled = {});
  void requestGallery();
  void showErrorDialog(const QString& message);

  /// Guarded: a shared host may be deleted before the page (it has been shut down by then).
  QPointer<TextSessionHost> host_;
  bool ownsHost_ = false;
  QString modelPath_, cachePath_;
  QString layerName_;  ///< the layer the open (or opening) view shows
  bool hasSession_ = false;
  QString dataIdentity_;
  bool errorDialogs_ = true;
  bool hasAblation_ = false;
  int blockIndex_ = -1;  ///< the open layer's index among the GPT's blocks
  analysis::LmAblationReport ablationReport_;
  uint64_t seed_ = 0;

  NoteStack* stack_ = nullptr;
  QLabel* header_ = nullptr;
  QComboBox* layer_ = nullptr;
  QTableWidget* experts_ = nullptr;
  QComboBox* order_ = nullptr;
  QDoubleSpinBox* threshold_ = nullptr;
  QPushButton* shuffle_ = nullptr;
  QPushButton* ablateButton_ = nullptr;
  QLabel* galleryTitle_ = nullptr;
  QListView* gallery_ = nullptr;
  TokenGalleryModel* model_ = nullptr;
  QLabel* ablation_ = nullptr;
};

}  // namespace mumoe::ui
